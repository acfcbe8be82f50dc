"""The replay's per-label step (simulation/replay.py): each record used once, the unused
records of an item first in its segment, pairs recorded twice asked twice, the same records
and draws for item-only and item–worker assignments."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.exceptions import IneligibleAssignmentError
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import Assignment


def _world(seed: int) -> ReplayEnvironment:
    rng = np.random.default_rng(seed)
    n_items, n_workers = 30, 8
    items = np.repeat(np.arange(n_items), 5)
    workers = rng.integers(n_workers, size=items.shape[0])  # some pairs recorded twice
    labels = rng.integers(2, size=items.shape[0])
    gold = rng.integers(2, size=n_items)
    return ReplayEnvironment(items, workers, labels, gold, n_workers=n_workers)


def _check_segments(env: ReplayEnvironment) -> None:
    for item in range(env.n_items):
        lo, hi = int(env._item_ptr[item]), int(env._item_ptr[item + 1])
        segment = env._perm[lo:hi]
        n_unused = int(env._unused[item])
        assert not env._used[segment[:n_unused]].any()
        assert env._used[segment[n_unused:]].all()
    assert np.array_equal(env._perm[env._slot_of], np.arange(env.n_records))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_record_once_with_pairs_and_items_mixed(seed: int) -> None:
    env = _world(seed)
    env.reset(seed=seed)
    rng = np.random.default_rng(seed + 100)
    seen: list[tuple[int, int, int]] = []
    while env._n_used < env.n_records:
        if rng.random() < 0.5:
            item = int(rng.choice(np.flatnonzero(env.eligible)))
            result = env.step(Assignment(item=item, worker=None, price=1.0))
        else:
            assert env.pairs is not None
            live = np.flatnonzero(env.pairs.remaining > 0)
            pair = int(rng.choice(live))
            item, worker = int(env.pairs.items[pair]), int(env.pairs.workers[pair])
            result = env.step(Assignment(item=item, worker=worker, price=1.0))
            assert result.event is not None and result.event.worker == worker
        assert result.event is not None
        seen.append((result.event.item, result.event.worker, result.event.label))
        _check_segments(env)
    assert sorted(seen) == sorted(
        zip(env.items.tolist(), env.workers.tolist(), env.labels.tolist(), strict=True)
    )
    assert not env.eligible.any()


def test_used_up_pair_refused() -> None:
    env = _world(0)
    env.reset(seed=0)
    assert env.pairs is not None
    pair = 0
    item, worker = int(env.pairs.items[pair]), int(env.pairs.workers[pair])
    for _ in range(int(env.pairs.remaining[pair])):
        env.step(Assignment(item=item, worker=worker, price=1.0))
    with pytest.raises(IneligibleAssignmentError):
        env.step(Assignment(item=item, worker=worker, price=1.0))
