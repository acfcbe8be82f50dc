"""Exact solutions and bounds on the Bayes-optimal value of a labeling campaign."""

from crowdbudget.bounds.exact_dp import ExactDPSolution, solve_exact_dp

__all__ = ["ExactDPSolution", "solve_exact_dp"]
