"""The worker-aware kernels' cold compile: each kernel compiled once (no literal or second
signature), the heapsort of the tie sets, the warm-up (``reproduce --warm``) and Fig. 3(b)'s
compile before its pool (crowdbudget.experiments.warm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crowdbudget.cli import main
from crowdbudget.experiments import warm
from crowdbudget.experiments.papers import chen2013
from crowdbudget.policies._push_bounds import _merge_from_back, _sort_ascending

SRC = Path(__file__).resolve().parents[1] / "src"


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 64, 1000, 4097])
def test_heapsort_gives_np_sort(n: int) -> None:
    rng = np.random.default_rng(n)
    for high in (1, 3, n + 1, 10**9):  # many ties, some, none
        values = rng.integers(0, high, n)
        ordered = values.copy()
        _sort_ascending(ordered)
        assert np.array_equal(ordered, np.sort(values))
    view = np.arange(10, 0, -1)
    _sort_ascending(view[:6])  # a prefix only, as the tie sets are sorted
    assert view.tolist() == [5, 6, 7, 8, 9, 10, 4, 3, 2, 1]


#: run in a fresh process on an empty cache (a cached caller loads its callees inside its
#: own library, so only a cold compile gives every kernel its signatures)
_COMPILE_ONCE = """
import json
from crowdbudget.experiments.warm import warm_kernels
from crowdbudget.policies import _class_prior, _one_coin_kernel, _push_bounds, _push_replay
from crowdbudget.policies import _refit_incremental
warm_kernels(("fig3b",))
found = {}
for module in (_push_replay, _push_bounds, _one_coin_kernel, _refit_incremental, _class_prior):
    for name, value in vars(module).items():
        if getattr(value, "__module__", None) == module.__name__ and hasattr(value, "signatures"):
            found[module.__name__ + "." + name] = [str(s) for s in value.signatures]
print(json.dumps(found))
"""


@pytest.mark.slow
def test_fig3b_kernels_compile_once_each(tmp_path: Path) -> None:
    """A cold compile of Fig. 3(b)'s warm-up replays gives every worker-aware kernel one
    signature, none of them literal: a literal argument or a second type would be a second
    compile of the kernel and of every callee below it (seconds of a cold run; about 25 s of
    CPU here)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", _COMPILE_ONCE], env=env, capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout.splitlines()[-1])
    compiled = {name: signatures for name, signatures in found.items() if signatures}
    assert len(compiled) >= 35, sorted(compiled)  # the compiled path ran
    for name, signatures in compiled.items():
        assert len(signatures) == 1, (name, signatures)
        assert "Literal" not in signatures[0], (name, signatures)


def test_kernels_cached_false_on_an_empty_cache(tmp_path: Path) -> None:
    code = "from crowdbudget.experiments.warm import kernels_cached; print(kernels_cached())"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_reproduce_warm_alone_reports_and_exits(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: list[tuple[str, ...]] = []

    def fake(runs: tuple[str, ...] = tuple(warm.WARM_RUNS)) -> float:
        calls.append(runs)
        return 1.5

    monkeypatch.setattr(warm, "warm_kernels", fake)
    assert main(["reproduce", "--warm", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document == {"command": "reproduce", "warm": ["fig3b", "default"], "cpu_seconds": 1.5}
    assert calls == [("fig3b", "default")]
    assert main(["reproduce", "--warm"]) == 0
    assert "compiled into Numba's cache (1.5 s CPU" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("cached", "n_jobs", "expected"), [(False, 2, 1), (True, 2, 0), (False, 1, 0)]
)
def test_fig3b_compiles_before_its_pool_only_when_needed(
    monkeypatch: pytest.MonkeyPatch, cached: bool, n_jobs: int, expected: int
) -> None:
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(warm, "kernels_cached", lambda: cached)
    monkeypatch.setattr(warm, "warm_kernels", lambda runs: calls.append(runs) or 0.0)
    summary = pd.DataFrame({"policy": [], "budget": [], "accuracy_mean": []})
    fake_result = type("R", (), {"summary": summary})()
    monkeypatch.setattr(chen2013, "run_experiment", lambda *a, **k: fake_result)
    chen2013.fig3b(quick=True, n_jobs=n_jobs, progress=False)
    assert calls == [("fig3b",)] * expected


def test_merge_from_back_gives_the_sorted_union() -> None:
    rng = np.random.default_rng(1)
    for _ in range(300):
        kept = np.sort(rng.choice(10**5, rng.integers(0, 40), replace=False))
        new = rng.choice(10**5, rng.integers(0, 40))
        out = np.full(kept.size + new.size + 3, -7)
        out[: kept.size] = kept
        _sort_ascending(new)
        _merge_from_back(out, kept.size, new, new.size)
        assert np.array_equal(out[: kept.size + new.size], np.sort(np.concatenate([kept, new])))
        assert (out[kept.size + new.size :] == -7).all()


#: run in a fresh process on an empty cache: the warm-up's verdict fit, then a default-verdict
#: fit where the gate passes (fact_eval: the mixture is chosen)
_VERDICT_WARM = """
import json
from crowdbudget.aggregation import DEFAULT_VERDICT, _difficulty_kernel
from crowdbudget.aggregation.registry import make_aggregator
from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.warm import warm_verdict_kernels
names = ("mixture_counts", "mixture_scores", "normalise_rows")
def signatures():
    return {n: [str(s) for s in getattr(_difficulty_kernel, n).signatures] for n in names}
warm_verdict_kernels(load_dataset("rte"))
warmed = signatures()
fitted = make_aggregator(DEFAULT_VERDICT).fit(load_dataset("fact_eval"))
print(json.dumps({"warmed": warmed, "after": signatures(), "difficulty": fitted.difficulty_}))
"""


@pytest.mark.slow
def test_warm_compiles_the_difficulty_kernels_a_passing_fit_calls(tmp_path: Path) -> None:
    """The warm-up's verdict fit (RTE, where the default verdict's gate refuses the mixture)
    compiles each of the mixture's passes once, with the signature that a default-verdict fit
    past the gate then calls: that fit compiles nothing more."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "PYTHONPATH": str(SRC)}
    out = subprocess.run(
        [sys.executable, "-c", _VERDICT_WARM], env=env, capture_output=True, text=True, check=True
    )
    found = json.loads(out.stdout.splitlines()[-1])
    assert found["difficulty"] == "mixture"  # the gate passed, the mixture's passes ran
    for name, signatures in found["warmed"].items():
        assert len(signatures) == 1, (name, signatures)
    assert found["after"] == found["warmed"]
