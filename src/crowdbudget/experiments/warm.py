"""Compile the worker-aware policy's kernels into Numba's on-disk cache ahead of the first run.

The worker-aware Opt-KG (Chen, Lin, Zhou 2013, §4, one-coin workers) runs on about 40 compiled
kernels (``policies/_push_bounds``, ``_push_replay``, ``_one_coin_kernel``, ``_refit_incremental``,
``_class_prior``, the table kernel of I_{1/2}) and its default verdict
(``bds-hard-blind-recheck``) on ``aggregation/_bds_kernel`` and, where its item-difficulty gate
passes, ``aggregation/_difficulty_kernel``. Numba compiles each at its first call and keeps it
in its on-disk cache
(``NUMBA_CACHE_DIR``, else ``__pycache__`` beside the sources); a later process loads it in
milliseconds. The first compile takes 20–30 s of CPU — most of a first ``crowdbudget reproduce
chen2013-fig3b --quick`` (benchmarks/README.md, 2026-12-07) — and in a run on a process pool every
worker process compiled the same kernels at once.

:func:`warm_kernels` runs short RTE replays (§7.2: 800 items, one replication, in this
process) of the policies of :data:`WARM_RUNS`: every kernel their campaigns and verdicts call
is then compiled (or loaded) here and written to the cache. The default verdict's gate refuses
the item-difficulty mixture on RTE, so those fits never reach the mixture's passes (about
1.4 s of compile at the first fit where the gate passes, e.g. on fact_eval):
:func:`warm_verdict_kernels` fits the default verdict once more on RTE's labels with the
mixture always fitted (``difficulty="evidence-full"``), the same code path as a fit past the
gate, so its kernels are compiled with the argument types a production fit gives them (after
the ``default`` replay, whose verdict it is; Fig. 3(b)'s replays read the papers' verdict and
do not need it). ``crowdbudget reproduce --warm``
runs them all once after the install (the README's set-up line), and
:func:`~crowdbudget.experiments.papers.chen2013.fig3b` runs Fig. 3(b)'s in the parent process
before its pool starts when :func:`kernels_cached` says the cache lacks them, so the forked
workers share one compile instead of each making its own. Nothing it computes is kept:
results never depend on it (``tests/test_warm.py``).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crowdbudget.labels import LabelData

#: the incremental refit's kernels run only past the exact phase (2,000 labels on RTE): a
#: short one reaches them within a warm-up's labels (the same kernels, the same types)
_SHORT_EXACT_PHASE = "refit-exact-until=100"

#: the warm-up replays by name: (policy ids, the runner's ``ties`` and ``verdict``, labels per
#: item). ``fig3b``: Fig. 3(b)'s worker-aware ids as the reproduction runs them (the papers'
#: rules); ``default``: the default worker-aware Opt-KG read by its default verdict (what
#: ``compare`` and ``replay`` run), two labels per item so that its verdict fits workers
#: with partnered labels (the compiled iteration; one label per item has none)
WARM_RUNS: dict[str, tuple[tuple[str, ...], str, str | None, int]] = {
    "fig3b": (
        (
            "kg:posterior=one-coin:refit=0",
            "opt-kg:posterior=one-coin:refit=0",
            f"opt-kg:posterior=one-coin:refit=25:worker-prior=4,1:{_SHORT_EXACT_PHASE}",
        ),
        "paper",
        "paper",
        1,
    ),
    "default": ((f"opt-kg:posterior=one-coin:{_SHORT_EXACT_PHASE}",), "default", None, 2),
}


def warm_kernels(runs: tuple[str, ...] = tuple(WARM_RUNS)) -> float:
    """Run the warm-up replays ``runs`` (names of :data:`WARM_RUNS`) in this process (module
    docstring), after ``"default"`` also :func:`warm_verdict_kernels`; return their CPU seconds.
    Numba compiles what is not in its cache yet; with a warm cache this is the replays' own
    time (about a second)."""
    from crowdbudget.datasets import load_dataset
    from crowdbudget.experiments.runner import run_experiment
    from crowdbudget.simulation.replay import ReplayEnvironment

    start = time.process_time()
    data = load_dataset("rte")
    env = ReplayEnvironment.from_label_data(data)
    for name in runs:
        policies, ties, verdict, per_item = WARM_RUNS[name]
        run_experiment(
            list(policies),
            env,
            [per_item * data.n_items],
            1,
            seed=0,
            n_jobs=1,
            progress=False,
            ties=ties,
            verdict=verdict,
        )
        if name == "default":
            warm_verdict_kernels(data)
    return time.process_time() - start


def warm_verdict_kernels(data: LabelData) -> None:
    """Fit the default verdict on ``data`` with its item-difficulty mixture always fitted
    (``difficulty="evidence-full"``: the mixture's fit and the evidence's comparison whatever
    the gate would say), so that the mixture's compiled passes
    (:mod:`~crowdbudget.aggregation._difficulty_kernel`) are compiled or loaded here (module
    docstring). Nothing when the default verdict has no such mixture (no ``difficulty``
    parameter). The fit is thrown away."""
    from crowdbudget.aggregation import DEFAULT_VERDICT
    from crowdbudget.aggregation.registry import make_aggregator

    default = make_aggregator(DEFAULT_VERDICT)
    params = default.get_params()
    if "difficulty" not in params:
        return
    type(default)(**{**params, "difficulty": "evidence-full"}).fit(data)


def kernels_cached() -> bool:
    """Whether Numba's cache holds current entries of the worker-aware policy's outermost
    kernels (the push replay, the refits' and the class prior's, whose compiles bring their
    callees'): their cache index exists and was written for today's source (Numba drops an
    index whose source stamp differs). A cheap check (five small files read, no kernel
    loaded); False whenever it cannot tell (another Numba, caching off)."""
    from crowdbudget.policies import (
        _class_prior,
        _one_coin_kernel,
        _push_replay,
        _refit_incremental,
    )

    kernels: tuple[Any, ...] = (
        _push_replay.push_replay_labels,
        _refit_incremental.incremental_refit,
        _class_prior._grouped_em,
        _one_coin_kernel.reestimate,
        _one_coin_kernel.item_errors,
    )
    try:
        return all(bool(kernel._cache._cache_file._load_index()) for kernel in kernels)
    except Exception:  # Numba's private cache API: no answer means "not cached"
        return False
