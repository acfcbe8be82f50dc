"""The binary class prior's first-label check (``class-prior=gated-checked``,
:func:`crowdbudget.policies._class_prior.gated_class_prior` with ``check``): the gate of
``gated-runaway16``, shut at a fit whose first labels reject it. The case it is for: a
balanced crowd whose workers lean to one class, labelled the way the gated allocation buys
labels — lone labels of the common class stay lone, the rarer class gets a partner, and a
third where the two disagree (docs/stress-bed.md, "trec in pull")."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.experiments.stress import StressCell, make_crowd
from crowdbudget.policies import _class_prior
from crowdbudget.policies._class_prior import (
    CHECK_Z,
    CHECKED,
    RUNAWAYS,
    GateMemory,
    _share_fit,
    checked_fit,
    gated_class_prior,
)
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from decision_log import run_recorded

CHECKED_ID = "opt-kg:posterior=one-coin:class-prior=gated-checked"
PRIOR = (16.0, 4.0)


def _value_selected(
    pi: float, sens: float, spec: float, n_items: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(items, workers, labels) in arrival order: every item one label from one of 200
    workers (P(1 | class 1) = ``sens``, P(0 | class 0) = ``spec``), then a second label on
    each item whose first said 0, then a third where those two disagree — partners bought
    *because of* the labels' values, as the gated allocation buys them."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n_items) < pi

    def draw(which: np.ndarray) -> np.ndarray:
        p_one = np.where(truth[which], sens, 1.0 - spec)
        return (rng.random(which.shape[0]) < p_one).astype(np.int64)

    first_items = np.arange(n_items)
    first = draw(first_items)
    second_items = np.flatnonzero(first == 0)
    second = draw(second_items)
    third_items = second_items[second != 0]
    third = draw(third_items)
    items = np.concatenate([first_items, second_items, third_items])
    labels = np.concatenate([first, second, third])
    return items, rng.integers(0, 200, size=items.shape[0]), labels


def test_the_check_is_the_same_fit() -> None:
    labelled = _value_selected(0.56, 0.8, 0.45, 3000, 0)
    assert checked_fit(*labelled, PRIOR)[:5] == _share_fit(*labelled, PRIOR)


def test_a_leaning_balanced_crowd_shuts_the_checked_gate_only() -> None:
    # 56 % class 1, workers say 1 on 80 % of class-1 items and on 55 % of class-0 items:
    # 0.67 of the labels say 1, which workers of equal coins read as a share near 0.8
    labelled = _value_selected(0.56, 0.8, 0.45, 3000, 1)
    opened = gated_class_prior(*labelled, 3000, PRIOR, runaway=RUNAWAYS["gated-runaway16"])
    assert opened is not None and opened[0] > opened[1]  # unchecked: a prior for class 1
    assert checked_fit(*labelled, PRIOR)[5] < -CHECK_Z
    memory = GateMemory()
    shut = gated_class_prior(*labelled, 3000, PRIOR, memory=memory, runaway=16.0, check=CHECK_Z)
    assert shut is None and memory.locked  # shut for the campaign
    unchecked = GateMemory()
    assert gated_class_prior(*labelled, 3000, PRIOR, memory=unchecked, runaway=16.0)
    assert not unchecked.locked


@pytest.mark.parametrize(("pi", "a", "seed"), [(0.88, 0.85, 2), (0.12, 0.85, 3), (0.95, 0.85, 4)])
def test_an_imbalanced_crowd_keeps_the_checked_gate_open(pi: float, a: float, seed: int) -> None:
    # the same value-selected shape on symmetric crowds at the worker prior's accuracy or
    # above (below it the check fires too: the module docstring)
    if pi > 0.5:
        labelled = _value_selected(pi, a, a, 3000, seed)
    else:  # the rarer class is 1: the partners follow first labels saying 1
        flip = _value_selected(1.0 - pi, a, a, 3000, seed)
        labelled = (flip[0], flip[1], 1 - flip[2])
    assert checked_fit(*labelled, PRIOR)[5] > -CHECK_Z
    memory = GateMemory()
    state = gated_class_prior(*labelled, 3000, PRIOR, memory=memory, runaway=16.0, check=CHECK_Z)
    assert state is not None and (state[0] > state[1]) == (pi > 0.5)
    assert not memory.locked


def test_the_option_is_registered_and_passes_its_check(monkeypatch: pytest.MonkeyPatch) -> None:
    assert CHECKED == {"gated-checked": "gated-runaway16"}
    policy = make_policy(CHECKED_ID)
    assert policy.class_prior == "gated-checked"  # type: ignore[attr-defined]
    seen: list[tuple[float, float | None]] = []
    gate = _class_prior.gated_class_prior

    def spy(*args: object, runaway: float = 4.0, check: float | None = None, **kw: object):  # type: ignore[no-untyped-def]
        seen.append((runaway, check))
        return gate(*args, runaway=runaway, check=check, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_class_prior, "gated_class_prior", spy)
    cell = StressCell("t-90-10", (0.9, 0.1), 6, 30, accuracy=(2.5, 2.0), n_items=150)
    env = ReplayEnvironment.from_label_data(make_crowd(cell, 0))
    unchecked = "opt-kg:posterior=one-coin:class-prior=gated-runaway16"
    for pid, want in ((CHECKED_ID, (16.0, CHECK_Z)), (unchecked, (16.0, None))):
        seen.clear()
        run_recorded(make_policy(pid), env, [150.0], 0)
        assert seen and set(seen) == {want}
