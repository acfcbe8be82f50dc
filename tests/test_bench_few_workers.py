"""The few-worker probe crowds of benchmarks/bench_default_policy.py hold what their names and
docstring say (docs/stress-bed.md, "the default policy in pull mode"): exactly the named odd
workers, the heavy one as heavy as stated."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

from crowdbudget.experiments.stress import draw_crowd, make_crowd

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_default_policy.py"


@pytest.fixture(scope="module")
def bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bench_default_policy", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


#: crowd size -> the odd workers (spammers or biased) and the heaviest odd worker's share
EXPECTED = {3: ([0], 0.5), 5: ([4], 0.24), 8: ([0, 4, 6], 0.46)}


def test_probes_hold_the_named_odd_workers(bench) -> None:  # type: ignore[no-untyped-def]
    cells = bench.few_worker_cells()
    assert len(cells) == 12 and len({c.name for c in cells}) == 12
    for cell in cells:
        drawn = draw_crowd(cell, np.random.default_rng(0))
        odd, heavy = EXPECTED[cell.n_workers]
        kind = drawn.spammer if "-spam-" in cell.name else drawn.biased
        assert np.flatnonzero(kind).tolist() == odd, cell.name
        assert not np.any(drawn.spammer & drawn.biased)
        assert not np.any(drawn.biased if "-spam-" in cell.name else drawn.spammer)
        data = make_crowd(bench.pool_cell(cell, 1), 0)
        assert data.n_labels == 2 * data.n_items
        original = np.array([int(str(w)[1:]) for w in data.worker_ids])
        share = np.bincount(original[data.workers], minlength=cell.n_workers) / data.n_labels
        assert share[odd].max() == pytest.approx(heavy, abs=0.01), cell.name


def test_probes_are_named_by_cells_and_not_bed_cells(bench) -> None:  # type: ignore[no-untyped-def]
    from crowdbudget.experiments.stress import DEFAULT_BED, full_bed

    few = bench.chosen_cells("few")
    assert [c.name for c in few] == [c.name for c in bench.few_worker_cells()]
    bed = {c.name for c in (*DEFAULT_BED, *full_bed())}
    assert not bed & {c.name for c in few}
    assert bench.chosen_cells(few[0].name) == [few[0]]
