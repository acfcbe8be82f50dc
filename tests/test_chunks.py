"""The runner's units of work (``executors._chunks``): every task once, in order, in chunks
that shrink towards the end so the workers run out of work together."""

from __future__ import annotations

import pytest

from crowdbudget.experiments.executors import _chunks


@pytest.mark.parametrize(("n_tasks", "n_workers"), [(1, 1), (3, 4), (16, 2), (150, 2), (5000, 2)])
def test_chunks_cover_the_tasks_in_order_and_shrink(n_tasks: int, n_workers: int) -> None:
    tasks = [(k,) for k in range(n_tasks)]
    chunks = _chunks(tasks, n_workers)
    assert [task for chunk in chunks for task in chunk] == tasks
    sizes = [len(chunk) for chunk in chunks]
    assert all(1 <= size <= 64 for size in sizes)
    assert sizes == sorted(sizes, reverse=True)  # never a larger unit after a smaller one
    assert sizes[-1] == 1  # the last unit is one campaign
    # the first units keep their size: about 8 per worker of them, not one per task
    assert sizes[0] == max(1, min(64, n_tasks // (8 * n_workers)))
    # the shrinking tail adds a few units per worker to the plain split
    assert len(chunks) <= -(-n_tasks // sizes[0]) + 40 * n_workers
