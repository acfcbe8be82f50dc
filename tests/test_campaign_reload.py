"""A live campaign reloaded from its store makes the decisions the never-restarted one makes.

A restarted service rebuilds its campaigns with :meth:`Campaign.load`; "same seed, same run"
holds for live campaigns only if the reload changes none of the campaign's later decisions.
The allocation's events carry the policy's random stream state, which a replay restores
(``campaign/problem_build.py``, "Policy randomness"). Each check below compares the whole
assignment sequence of one campaign run straight through with the same campaign reloaded
at step ``k`` (after a label, or between an assignment and its label), the crowd
giving the same answers.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crowdbudget.campaign import Campaign, EventStore

N_ITEMS, N_WORKERS, BUDGET, STEPS = 8, 4, 20.0, 22
POLICIES = ("opt-kg:posterior=one-coin", "opt-kg", "uniform", "kg-random")


def simulated_answer(item: int, worker: int, step: int) -> str:
    """A simulated crowd: item ``item``'s true class is ``item % 2``; worker ``w`` is right
    with probability 0.9 − 0.1·w, drawn from (99, step) so every run gets the same answers."""
    truth = item % 2
    right = np.random.default_rng([99, step]).random() < 0.9 - 0.1 * worker
    return str(truth if right else 1 - truth)


def _run(
    policy: str,
    path: Path,
    *,
    seed: int = 0,
    reload_at: int | None = None,
    mid: bool = False,
    probe: bool = False,
) -> list[tuple[int, int | None]]:
    """The (worker, item) of every request, item None when none was given. ``reload_at``:
    the step at which the campaign is reloaded from its store (``mid``: between that step's
    assignment and its label, else before the request); ``probe``: at every step worker ``x``,
    whose labels of every item were imported at the start, asks first and is answered with
    nothing (a request that writes no event)."""
    url = f"sqlite:///{path}"
    campaign = Campaign.create(
        [f"i{k}" for k in range(N_ITEMS)],
        budget=BUDGET,
        policy=policy,
        seed=seed,
        workers=[f"w{k}" for k in range(N_WORKERS)],
        store=EventStore(url),
        clock=lambda: 0.0,
    )
    imported = [[f"i{k}", "x", str(k % 2)] for k in range(N_ITEMS)]
    campaign.import_labels(pd.DataFrame(imported, columns=["task", "worker", "label"]))
    cid = campaign.campaign_id
    sequence: list[tuple[int, int | None]] = []
    for step in range(STEPS):
        worker = step % N_WORKERS
        if step == reload_at and not mid:
            campaign = Campaign.load(EventStore(url), cid, clock=lambda: 0.0)
        if probe:
            assert campaign.next_assignment("x") is None  # every item is x's already
        if step == 6:  # an event that is no label (after the probe: it may carry the draws)
            campaign.update_settings(max_pending_per_worker=5)
        given = campaign.next_assignment(f"w{worker}")
        if given is None:
            sequence.append((worker, None))
            continue
        item = int(given.item_id[1:])
        sequence.append((worker, item))
        if step == reload_at and mid:
            campaign = Campaign.load(EventStore(url), cid, clock=lambda: 0.0)
        campaign.record_label(given.assignment_id, simulated_answer(item, worker, step))
    return sequence


@pytest.mark.parametrize("policy", POLICIES)
def test_reload_gives_the_same_continuation(policy: str, tmp_path: Path) -> None:
    straight = _run(policy, tmp_path / "straight.db")
    assert sum(item is not None for _, item in straight) >= 15  # the budget is spent
    for k in (1, 4, 9, 15):
        for mid in (False, True):
            name = f"reload-{k}-{'mid' if mid else 'after'}.db"
            reloaded = _run(policy, tmp_path / name, reload_at=k, mid=mid)
            assert reloaded == straight, (policy, k, "mid" if mid else "after")


def test_reload_matches_for_another_seed(tmp_path: Path) -> None:
    policy = POLICIES[0]
    straight = _run(policy, tmp_path / "s.db", seed=5)
    assert _run(policy, tmp_path / "r.db", seed=5, reload_at=7, mid=True) == straight


@pytest.mark.parametrize("policy", ("opt-kg", "uniform"))
def test_draws_of_a_request_answered_with_nothing_survive_a_reload(
    policy: str, tmp_path: Path
) -> None:
    """At every step a worker who labeled every item asks first: the policy is asked (and
    may break a tie) for an item it then cannot give, and no event is written. Those draws
    are part of the stream (as in the offline engine); the next event carries the state."""
    straight = _run(policy, tmp_path / "s.db", probe=True)
    assert straight != _run(policy, tmp_path / "n.db")  # the probes' draws count
    for k in (3, 10):
        for mid in (False, True):
            name = f"p-{k}-{mid}.db"
            assert _run(policy, tmp_path / name, probe=True, reload_at=k, mid=mid) == straight


def test_refresh_copy_decides_like_a_fresh_load(tmp_path: Path) -> None:
    """Two processes on one store: the copy that caught up with :meth:`Campaign.refresh`
    decides as a copy loaded from the same events (here: from a copy of the store file)."""
    path = tmp_path / "two.db"
    writer = Campaign.create(
        [f"i{k}" for k in range(N_ITEMS)],
        budget=BUDGET,
        policy="kg-random",
        seed=2,
        workers=["w0", "w1"],
        store=EventStore(f"sqlite:///{path}"),
        clock=lambda: 0.0,
    )
    reader = Campaign.load(EventStore(f"sqlite:///{path}"), writer.campaign_id, clock=lambda: 0.0)
    for step in range(6):
        given = writer.next_assignment(f"w{step % 2}")
        assert given is not None
        answer = simulated_answer(int(given.item_id[1:]), step % 2, step)
        writer.record_label(given.assignment_id, answer)
    assert reader.refresh() == 12
    with sqlite3.connect(path) as source, sqlite3.connect(tmp_path / "twin.db") as copy:
        source.backup(copy)  # the store as it is now (its write-ahead log included)
    twin_store = EventStore(f"sqlite:///{tmp_path / 'twin.db'}")
    twin = Campaign.load(twin_store, writer.campaign_id, clock=lambda: 0.0)
    for worker in ("w1", "w0", "w1"):
        mine, theirs = reader.next_assignment(worker), twin.next_assignment(worker)
        assert mine is not None and theirs is not None
        assert mine.item_id == theirs.item_id
