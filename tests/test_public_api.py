"""The package's curated exports (DESIGN §11, issue #16): ``crowdbudget.__all__`` names what
most programs need — the problem, its workers, the live campaign, the policy and aggregator
factories, the experiment runner, the data sets and the errors — and every name imports."""

from __future__ import annotations

import subprocess
import sys

import crowdbudget
from crowdbudget import exceptions

#: DESIGN §11's list: Problem, WorkerSpec, Campaign, make_policy, make_aggregator,
#: run_experiment, load_dataset, errors
DESIGN_EXPORTS = {
    "Problem",
    "WorkerSpec",
    "Campaign",
    "make_policy",
    "make_aggregator",
    "run_experiment",
    "load_dataset",
}


def test_every_export_imports() -> None:
    for name in crowdbudget.__all__:
        assert getattr(crowdbudget, name) is not None, name
    namespace: dict[str, object] = {}
    exec("from crowdbudget import *", namespace)
    assert set(crowdbudget.__all__) <= set(namespace)


def test_the_exports_are_those_design_names() -> None:
    missing = DESIGN_EXPORTS - set(crowdbudget.__all__)
    assert not missing, f"add to crowdbudget.__all__: {sorted(missing)}"
    errors = {
        name
        for name, value in vars(exceptions).items()
        if isinstance(value, type) and issubclass(value, exceptions.CrowdBudgetError)
    }
    assert errors <= set(crowdbudget.__all__), sorted(errors - set(crowdbudget.__all__))
    assert crowdbudget.load_dataset is crowdbudget.datasets.load_dataset  # type: ignore[attr-defined]
    assert len(crowdbudget.__all__) == len(set(crowdbudget.__all__))


def test_import_stays_light() -> None:
    """The lazily imported exports (SQLAlchemy, the runner) are not loaded by the import."""
    code = (
        "import sys, crowdbudget; "
        "print(any(m in sys.modules for m in "
        "('crowdbudget.campaign', 'crowdbudget.experiments.runner', 'sqlalchemy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
