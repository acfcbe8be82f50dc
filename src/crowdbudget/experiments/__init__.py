"""Experiments: run policies × budgets × replications and summarise."""

from crowdbudget.experiments.runner import (
    ExperimentResult,
    run_campaign,
    run_experiment,
    summarize,
)

__all__ = ["ExperimentResult", "run_campaign", "run_experiment", "summarize"]
