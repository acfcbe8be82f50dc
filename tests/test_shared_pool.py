"""The shared process pool of ``crowdbudget reproduce --all`` (issue #21: "reproductions fan
out over replications × cases on the process pool or Dask with no serial tail").

Several callers, each in its own thread seated with :func:`fan_out`, send their campaigns to
one :class:`SharedPool`; queued units start by priority (the slowest reproduction's first),
a caller's failure is its own, Ctrl-C drops what is queued, and the rows are those of a
serial run. The registry, read from those threads at once, is complete in every one.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
from concurrent.futures import CancelledError
from pathlib import Path

import pytest

from crowdbudget.experiments.runner import (
    SharedPool,
    execute,
    fan_out,
    resolve_executor,
    run_experiment,
)
from crowdbudget.registry import ComponentSpec, Registry
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment


def _stamp(tag: str, pause: float) -> tuple[str, float]:
    """A unit that records when it started (module level: it is pickled to the workers)."""
    started = time.time()
    time.sleep(pause)
    return tag, started


def _rows(k: int) -> list[int]:
    if k == 3:
        raise ValueError("unit 3 fails")
    return [k]


def test_queued_units_start_by_priority_then_by_submission() -> None:
    pool = SharedPool(1)
    try:
        first = pool.submit(5, _stamp, "first", 0.6)  # occupies the only worker
        time.sleep(0.1)  # it is in the pool before the others are queued
        queued = [
            pool.submit(2, _stamp, "p2-a", 0.0),
            pool.submit(1, _stamp, "p1-a", 0.0),
            pool.submit(2, _stamp, "p2-b", 0.0),
            pool.submit(0, _stamp, "p0", 0.0),
            pool.submit(1, _stamp, "p1-b", 0.0),
        ]
        stamps = [first.result(timeout=60), *(f.result(timeout=60) for f in queued)]
    finally:
        pool.close()
    order = [tag for tag, _ in sorted(stamps, key=lambda stamp: stamp[1])]
    assert order == ["first", "p0", "p1-a", "p1-b", "p2-a", "p2-b"]


def test_at_most_n_workers_units_are_in_the_pool() -> None:
    pool = SharedPool(2)
    try:
        futures = [pool.submit(0, _stamp, str(k), 0.3) for k in range(4)]
        starts = sorted(f.result(timeout=60)[1] for f in futures)
    finally:
        pool.close()
    # two at a time: the third starts only when one of the first two has ended
    assert starts[2] - starts[0] >= 0.25


def test_close_with_cancel_drops_the_queued_units() -> None:
    pool = SharedPool(1)
    running = pool.submit(0, _stamp, "running", 5.0)
    time.sleep(0.2)
    queued = [pool.submit(0, _stamp, f"q{k}", 0.0) for k in range(3)]
    started = time.perf_counter()
    pool.close(cancel=True)
    assert time.perf_counter() - started < 4.0  # the running unit was stopped, not awaited
    assert all(f.cancelled() for f in queued)
    with pytest.raises((RuntimeError, CancelledError, OSError)):
        running.result(timeout=10)
    with pytest.raises(RuntimeError, match="closed"):
        pool.submit(0, _stamp, "late", 0.0)


def test_a_seated_caller_runs_on_the_pool_and_gets_the_serial_rows() -> None:
    env = SyntheticBernoulliEnvironment(n_items=30)
    policies = ["uniform", "opt-kg", "kg:tie-break=random"]
    serial = run_experiment(policies, env, [30, 60, 90], n_reps=4, seed=3, n_jobs=1)
    pool = SharedPool(2)
    try:
        with fan_out(pool, priority=0) as seat:
            # n_jobs=1 would run serially anywhere else: seated, it goes to the pool
            assert resolve_executor(None, 1, 1) == ("shared", 2)
            shared = run_experiment(
                policies, env, [30, 60, 90], n_reps=4, seed=3, n_jobs=1, progress=False
            )
    finally:
        pool.close()
    columns = ["policy", "budget", "replication", "accuracy", "labels_used"]
    assert shared.runs[columns].equals(serial.runs[columns])
    assert seat.cpu_seconds > 0.0  # the workers' CPU time of its campaigns
    # outside the seat, the usual rule again
    assert resolve_executor(None, 1, 4) == ("serial", 1)


def test_a_failing_caller_fails_alone_and_its_queued_units_are_dropped() -> None:
    pool = SharedPool(2)
    outcome: dict[str, object] = {}

    def caller(name: str, tasks: list[tuple[int]], priority: int) -> None:
        try:
            with fan_out(pool, priority):
                outcome[name] = sorted(execute(_rows, tasks, [1.0] * len(tasks), progress=False))
        except ValueError as exc:
            outcome[name] = str(exc)

    threads = [
        threading.Thread(target=caller, args=("bad", [(k,) for k in range(8)], 0)),
        threading.Thread(target=caller, args=("good", [(k,) for k in range(10, 20)], 1)),
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        pool.close()
    assert outcome["bad"] == "unit 3 fails"
    assert outcome["good"] == list(range(10, 20))


def test_fan_out_on_dask_needs_a_scheduler() -> None:
    from crowdbudget.exceptions import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="dask_scheduler"), fan_out(None, 0):
        pass


_SLOW_MODULE = """
import time
from crowdbudget.registry import ComponentSpec
from {holder} import REGISTRY

REGISTRY.register(ComponentSpec("first", dict, "the first entry"))
time.sleep(0.5)  # another thread asks for the entries meanwhile
REGISTRY.register(ComponentSpec("second", dict, "registered after a pause"))
"""


def test_the_registry_is_complete_in_every_thread_that_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = "crowdbudget_test_registry_holder"
    builtin = "crowdbudget_test_registry_builtin"
    (tmp_path / f"{holder}.py").write_text(
        f"from crowdbudget.registry import Registry\nREGISTRY = Registry('thing', {builtin!r})\n"
    )
    (tmp_path / f"{builtin}.py").write_text(_SLOW_MODULE.format(holder=holder))
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        registry = importlib.import_module(holder).REGISTRY
        assert isinstance(registry, Registry)
        seen: list[set[str]] = []

        def read() -> None:
            seen.append(set(registry.entries()))

        threads = [threading.Thread(target=read) for _ in range(4)]
        for k, thread in enumerate(threads):
            thread.start()
            if k == 0:
                time.sleep(0.1)  # the first is inside the import when the others ask
        for thread in threads:
            thread.join(timeout=30)
        assert seen == [{"first", "second"}] * 4
        assert isinstance(registry.entries()["second"], ComponentSpec)
    finally:
        for name in (holder, builtin):
            sys.modules.pop(name, None)
