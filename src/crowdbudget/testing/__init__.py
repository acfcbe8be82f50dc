"""Public conformance checks (like scikit-learn's ``check_estimator`` or Gymnasium's
``check_env``): run them on your own policy or environment before using it."""

from crowdbudget.testing.checks import check_environment, check_policy
from crowdbudget.testing.posterior_checks import check_posterior

__all__ = ["check_environment", "check_policy", "check_posterior"]
