"""The binary class prior's runaway lock at odds × 16 (``class-prior=gated-runaway16``,
:data:`crowdbudget.policies._class_prior.RUNAWAYS`): the same gate as ``gated``, a lock that
lets a share fall from a first reading of 0.2 to a true 0.05 without shutting the gate, and
still shuts it on a collapse to a share near 0 (docs/stress-bed.md, "the default policy on
held-out cells")."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.stress import StressCell, make_crowd
from crowdbudget.policies import _class_prior
from crowdbudget.policies._class_prior import RUNAWAY, RUNAWAYS, GateMemory, gated_class_prior
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from decision_log import run_recorded

LOOSE = "opt-kg:posterior=one-coin:class-prior=gated-runaway16"


def _one_coin_labels(
    pi: float, a: float, n_items: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(items, workers, labels): every item 3 labels of 50 workers of accuracy a."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n_items) < pi).astype(np.int64)
    items = np.repeat(np.arange(n_items), 3)
    workers = rng.integers(0, 50, size=items.shape[0])
    right = rng.random(items.shape[0]) < a
    return items, workers, np.where(right, truth[items], 1 - truth[items])


def _opened(runaway: float) -> GateMemory:
    """A gate that opened on a 80/20 crowd (share odds 1/4)."""
    memory = GateMemory()
    first = _one_coin_labels(0.2, 0.7, 3000, 4)
    assert gated_class_prior(*first, 3000, (16.0, 4.0), memory=memory, runaway=runaway)
    return memory


def test_a_share_falling_to_five_per_cent_locks_only_the_tight_gate() -> None:
    assert RUNAWAYS == {"gated": RUNAWAY, "gated-runaway16": 16.0}
    five = _one_coin_labels(0.05, 0.7, 3000, 5)  # odds 1/19: about 4.75 times 1/4
    tight, loose = _opened(RUNAWAY), _opened(16.0)
    assert gated_class_prior(*five, 3000, (16.0, 4.0), memory=tight, runaway=RUNAWAY) is None
    assert tight.locked
    state = gated_class_prior(*five, 3000, (16.0, 4.0), memory=loose, runaway=16.0)
    assert state is not None and state[0] < state[1]  # open: the prior says class 0
    assert not loose.locked


def test_a_collapse_locks_the_loose_gate_too() -> None:
    loose = _opened(16.0)
    collapse = _one_coin_labels(0.002, 0.9, 3000, 6)  # odds about 1/500: beyond 16 × 1/4
    assert gated_class_prior(*collapse, 3000, (16.0, 4.0), memory=loose, runaway=16.0) is None
    assert loose.locked


def test_the_option_is_registered_for_two_classes_only() -> None:
    assert make_policy(LOOSE).class_prior == "gated-runaway16"  # type: ignore[attr-defined]
    with pytest.raises(InvalidParameterError, match="multiclass-class-prior"):
        make_policy("opt-kg:posterior=one-coin:multiclass-class-prior=gated-runaway16")


def _imbalanced() -> ReplayEnvironment:
    cell = StressCell("t-90-10", (0.9, 0.1), 6, 30, accuracy=(2.5, 2.0), n_items=150)
    return ReplayEnvironment.from_label_data(make_crowd(cell, 0))


def test_the_policy_reads_its_own_runaway_factor(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[float] = []
    gate = _class_prior.gated_class_prior

    def spy(*args: object, runaway: float = RUNAWAY, **kwargs: object) -> object:
        seen.append(runaway)
        return gate(*args, runaway=runaway, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_class_prior, "gated_class_prior", spy)
    env = _imbalanced()
    for pid, factor in ((LOOSE, 16.0), ("opt-kg:posterior=one-coin:class-prior=gated", 4.0)):
        seen.clear()
        run_recorded(make_policy(pid), env, [150.0], 0)
        assert seen and set(seen) == {factor}


def test_fast_path_decides_as_reference_with_the_loose_lock() -> None:
    env = _imbalanced()
    runs = []
    for reference in (False, True):
        policy = make_policy(LOOSE)
        policy.reference = reference  # type: ignore[attr-defined]
        runs.append(run_recorded(policy, env, [150.0, 300.0], 0, "push")[:2])
        assert policy._shared_row != (1.0, 1.0)  # type: ignore[attr-defined]
    assert runs[0] == runs[1]
