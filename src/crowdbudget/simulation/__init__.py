"""Where labels come from in a simulation: synthetic worlds (and, later, replays)."""

from crowdbudget.simulation.environment import LabelingEnvironment, SyntheticBernoulliEnvironment

__all__ = ["LabelingEnvironment", "SyntheticBernoulliEnvironment"]
