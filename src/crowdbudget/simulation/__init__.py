"""Where labels come from in a simulation: synthetic worlds (and, later, replays)."""

from crowdbudget.simulation.environment import (
    FeatureEnvironment,
    LabelingEnvironment,
    SyntheticBernoulliEnvironment,
)

__all__ = ["FeatureEnvironment", "LabelingEnvironment", "SyntheticBernoulliEnvironment"]
