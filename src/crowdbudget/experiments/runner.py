"""The experiment runner: policies × budgets × replications, with common random numbers.

Every policy faces the same world in replication r (same θ, same answers per item): the world
seed of replication r is the r-th child of ``SeedSequence(seed)``, and the policy's own
generator the r-th child of a sibling stream, so results do not depend on the order, the
process or the number of worker processes. A policy whose decisions do not depend on the total
budget is run once per replication up to the largest budget, and its accuracy is recorded at
each smaller budget on the way (checkpoints); a budget-aware policy (exact DP) is run once per
budget.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import heapq
import itertools
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats
from tqdm.auto import tqdm

from crowdbudget._validation import check_budget, check_positive_int
from crowdbudget.engine.loop import CheckpointRecorder, Clock, MetricsHook, drive
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.verdict import Verdict, make_verdict
from crowdbudget.registry import Spec, VerdictSpec, make_policy, pin_paper_ties, split_verdict
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import CampaignState

_SCHEDULER: contextvars.ContextVar[_DaskSession | None] = contextvars.ContextVar(
    "crowdbudget_scheduler", default=None
)


class _DaskSession:
    """A Dask client made on first use: a local cluster (one single-threaded worker process
    per core) for ``"local"``, else a connection to the scheduler at the given address."""

    def __init__(self, address: str, n_workers: int | None = None) -> None:
        self.address = address
        self.n_workers = n_workers
        self._client: Any = None
        self._cluster: Any = None

    def client(self) -> Any:
        if self._client is None:
            try:
                from dask.distributed import Client, LocalCluster
            except ImportError:
                raise InvalidParameterError(
                    "--scheduler needs Dask: pip install -e '.[dask]' in a clone "
                    "(pip install 'crowdbudget[dask]' from a registry)"
                ) from None
            if self.address == "local":
                self._cluster = LocalCluster(
                    n_workers=self.n_workers or os.cpu_count() or 1,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                )
                self._client = Client(self._cluster)
            else:
                if not self.address.startswith(("tcp://", "tls://", "inproc://")):
                    raise InvalidParameterError(
                        f"scheduler must be 'local' or an address like tcp://host:8786, "
                        f"got {self.address!r}"
                    )
                try:
                    self._client = Client(self.address, timeout="10s")
                except OSError as exc:
                    raise InvalidParameterError(
                        f"cannot reach the Dask scheduler at {self.address}: {exc}"
                    ) from None
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        if self._cluster is not None:
            self._cluster.close()


@contextlib.contextmanager
def dask_scheduler(address: str | None, n_workers: int | None = None) -> Iterator[None]:
    """Run every :func:`run_experiment` inside the block on Dask (``"local"``: a local
    cluster started once for the block; ``"tcp://host:port"``: an existing cluster); None
    leaves the process pool in charge. Results are identical to the serial run: each task's
    seeds are fixed before it is sent, and rows are sorted afterwards."""
    if address is None:
        yield
        return
    try:
        import dask.distributed  # noqa: F401  (checked before any work starts)
    except ImportError:
        raise InvalidParameterError(
            "--scheduler needs Dask: pip install -e '.[dask]' in a clone "
            "(pip install 'crowdbudget[dask]' from a registry)"
        ) from None
    session = _DaskSession(address, n_workers)
    token = _SCHEDULER.set(session)
    try:
        yield
    finally:
        _SCHEDULER.reset(token)
        session.close()


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel the queued tasks and end the worker processes without waiting for them."""
    # CPython's executor keeps its processes here (and forgets them at shutdown: read first)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        if process.is_alive():
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def _chunk(run: Callable[..., list[Any]], tasks: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Run several campaigns in one scheduled task (one pickle of the shared world, one
    round trip to the scheduler); each keeps its own seeds, so results do not depend on it."""
    return [row for task in tasks for row in run(*task)]


def _timed_chunk(
    run: Callable[..., list[Any]], tasks: Sequence[tuple[Any, ...]]
) -> tuple[list[Any], float]:
    """:func:`_chunk` and the CPU seconds it took in its worker (a fanned-out caller adds
    them to its account, :class:`FanOutSeat`)."""
    start = time.process_time()
    rows = _chunk(run, tasks)
    return rows, time.process_time() - start


class SharedPool:
    """One process pool that several concurrent callers of :func:`execute` share — one
    thread per caller, each seated with :func:`fan_out` — so that their campaigns fill every
    core until the last one ends (``crowdbudget reproduce --all``: every reproduction's
    replications × cases on one pool, no id running alone on one core at the end).

    Units wait in a priority queue and at most ``n_workers`` are in the pool at a time, so a
    unit queued later with a better priority (lower ``(priority, order of submission)``)
    starts before those queued earlier: the slowest reproduction's campaigns start first.
    Results do not depend on it — every campaign carries its own seeds.

    Args:
        n_workers: worker processes (each single-threaded work: one core each).
    """

    def __init__(self, n_workers: int) -> None:
        self.n_workers = check_positive_int(n_workers, "n_workers")
        self._pool = ProcessPoolExecutor(max_workers=self.n_workers)
        # start the workers now, while this is the only busy thread: with the "fork" start
        # method the pool forks all its processes at its first submit, and a fork while the
        # callers' threads hold locks (imports, BLAS) could leave a child deadlocked
        self._pool.submit(int).result()
        self._ready = threading.Condition()
        self._queue: list[tuple[int, int, Callable[..., Any], tuple[Any, ...], Future[Any]]] = []
        self._order = itertools.count()
        self._in_pool = 0
        self._closed = False
        # a thread of its own hands units to the pool: the pool's done-callbacks run in its
        # management thread, which must not be the one that submits to it
        self._dispatcher = threading.Thread(
            target=self._dispatch, name="crowdbudget-shared-pool", daemon=True
        )
        self._dispatcher.start()

    def submit(self, priority: int, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        """Queue ``fn(*args)`` (picklable, module-level) at ``priority`` (lower first); the
        future is cancellable until the unit enters the pool."""
        future: Future[Any] = Future()
        with self._ready:
            if self._closed:
                raise RuntimeError("the shared pool is closed")
            heapq.heappush(self._queue, (priority, next(self._order), fn, args, future))
            self._ready.notify_all()
        return future

    def _dispatch(self) -> None:
        while True:
            with self._ready:
                while not self._closed and (self._in_pool >= self.n_workers or not self._queue):
                    self._ready.wait()
                if self._closed:
                    return
                _, _, fn, args, future = heapq.heappop(self._queue)
                if not future.set_running_or_notify_cancel():
                    continue  # its caller gave up on it (a failed reproduction)
                self._in_pool += 1
            try:
                inner = self._pool.submit(fn, *args)
            except BaseException as exc:  # a broken pool: every later unit fails the same way
                with self._ready:
                    self._in_pool -= 1
                future.set_exception(exc)
                continue
            inner.add_done_callback(partial(self._finished, future))

    def _finished(self, future: Future[Any], inner: Future[Any]) -> None:
        with self._ready:
            self._in_pool -= 1
            self._ready.notify_all()
        if inner.cancelled():  # close(cancel=True) stopped the pool
            future.set_exception(RuntimeError("the shared pool was stopped"))
            return
        error = inner.exception()
        if error is None:
            future.set_result(inner.result())
        else:
            future.set_exception(error)

    def close(self, *, cancel: bool = False) -> None:
        """End the pool: wait for the units in it (``cancel``: stop them now and drop the
        queue — Ctrl-C)."""
        with self._ready:
            self._closed = True
            queued, self._queue = self._queue, []
            self._ready.notify_all()
        for *_, future in queued:
            future.cancel()
        self._dispatcher.join()
        if cancel:
            _stop_pool(self._pool)
        else:
            self._pool.shutdown()


@dataclass
class FanOutSeat:
    """Where one fanned-out caller's :func:`execute` calls go (:func:`fan_out`): the shared
    pool (None: the Dask cluster of :func:`dask_scheduler`), the caller's priority (lower
    starts first), the CPU seconds its units took in the workers and how many units it has
    queued and seen finish (read by a progress display in another thread)."""

    pool: SharedPool | None
    priority: int
    cpu_seconds: float = 0.0
    units_queued: int = 0
    units_done: int = 0


_SEAT: contextvars.ContextVar[FanOutSeat | None] = contextvars.ContextVar(
    "crowdbudget_fan_out_seat", default=None
)


@contextlib.contextmanager
def fan_out(pool: SharedPool | None, priority: int) -> Iterator[FanOutSeat]:
    """Inside the block (in this thread), every :func:`execute` that names no executor sends
    its units to ``pool`` at ``priority`` — with ``pool=None``, to the cluster of the
    enclosing :func:`dask_scheduler` — whatever its ``n_jobs``, even a single task, so that
    the caller's thread only coordinates. The seat counts its units' CPU seconds."""
    if pool is None and _SCHEDULER.get() is None:
        raise InvalidParameterError("fan_out(None, ...) runs inside dask_scheduler(address)")
    seat = FanOutSeat(pool, priority)
    token = _SEAT.set(seat)
    try:
        yield seat
    finally:
        _SEAT.reset(token)


def _chunks(tasks: list[tuple[Any, ...]], n_workers: int) -> list[list[tuple[Any, ...]]]:
    """Split ``tasks`` into about 8 chunks per worker (at most 64 campaigns each): large
    enough to amortise the per-task cost of a process pool or Dask (pickling the world,
    scheduling — milliseconds against ~1 ms for a small compiled campaign), small enough to
    balance the load and keep the progress bar moving."""
    size = max(1, min(64, len(tasks) // (8 * max(1, n_workers))))
    return [tasks[k : k + size] for k in range(0, len(tasks), size)]


RUN_COLUMNS = ["policy", "budget", "replication", "accuracy", "labels_used", "seconds"]

#: A metric hook (:data:`crowdbudget.engine.loop.MetricsHook`) is called at every checkpoint;
#: its values become extra columns (summarized like accuracy). It must be a module-level
#: function (it is pickled to worker processes).
ENGINES = ("auto", "reference", "fast")


def run_campaign(
    policy: AllocationPolicy,
    env: LabelingEnvironment,
    budgets: Sequence[float],
    *,
    world_seed: int | np.random.SeedSequence | None,
    policy_rng: np.random.Generator,
    mode: str = "push",
    metrics: MetricsHook | None = None,
    verdict: Verdict | None = None,
    readers: Sequence[tuple[str, Verdict]] = (),
) -> list[dict[str, Any]]:
    """Run one campaign up to ``max(budgets)``, recording accuracy at each budget.

    Args:
        policy: the policy (reset here).
        verdict: where the final labels and their confidence come from
            (:mod:`crowdbudget.policies.verdict`; reset here, after the policy, from the same
            generator — it draws nothing from it); None: ``make_verdict()``, the policy's own
            model (``posterior``).
        env: the world (reset here with ``world_seed``).
        budgets: checkpoints, ascending; the campaign's budget is the largest.
        mode: ``"push"`` (the policy picks) or ``"pull"`` (a worker arrives first).
        metrics: optional hook adding metrics at each checkpoint (:data:`MetricsHook`).
        readers: more verdicts reading the same campaign, ``(label, verdict)`` each (reset
            here like ``verdict``, each from a copy of the policy's generator as it stands
            after the policy's reset — so each reads exactly what a campaign with that verdict
            alone would give): their rows follow the verdict's, with ``"policy": label``.

    Returns:
        One dict per budget: ``budget``, ``accuracy`` (fraction of the evaluated items —
        ``env.evaluation_mask``, all by default — whose final label is the true one),
        ``labels_used`` (budget actually spent — less when the policy stops early),
        ``seconds`` (time spent so far) and the hook's metrics. When the policy stops
        early (``select`` returns None) or the world runs out of labels, every remaining
        checkpoint records the final state.
    """
    clock = Clock(mode)
    if (
        mode == "pull"
        and getattr(env, "pairs", None) is not None
        and not (policy.chooses_workers or policy.replay_pull)
    ):
        raise InvalidParameterError(
            f"{type(policy).__name__} cannot restrict itself to the arriving worker's recorded "
            "labels, so it cannot replay in pull mode; use push mode (an item-only policy then "
            "gets a random unused worker's label of its item, Chen et al. §7.2)"
        )
    checkpoints = sorted(float(b) for b in budgets)
    env.check_budget(checkpoints[-1])
    env.reset(seed=world_seed)
    problem = env.problem(checkpoints[-1])
    state = CampaignState.initial(problem)
    state.pairs = env.pairs
    verdict = verdict if verdict is not None else make_verdict()
    if env.eligible is not None:
        state.eligible &= env.eligible
    recorder = CheckpointRecorder(
        policy,
        checkpoints,
        env.true_labels,
        np.ones(problem.n_items, dtype=bool)
        if env.evaluation_mask is None
        else np.asarray(env.evaluation_mask, dtype=bool),
        metrics,
        verdict,
        readers,
    )
    policy.reset(problem, policy_rng)
    # each reader from the generator as the verdict gets it (a verdict only spawns a child
    # seed from it, which moves the seed sequence's spawn counter: hence the copies)
    for _, reader in readers:
        reader.reset(problem, copy.deepcopy(policy_rng))
    verdict.reset(problem, policy_rng)
    drive(policy, env, state, clock, recorder)
    return recorder.rows + recorder.reader_rows


def _task(
    entry: tuple[Spec, VerdictSpec, str, tuple[tuple[str, VerdictSpec], ...]],
    env: LabelingEnvironment,
    budgets: list[float],
    replication: int,
    world_seed: np.random.SeedSequence,
    policy_seed: np.random.SeedSequence,
    mode: str,
    engine: str = "auto",
    metrics: MetricsHook | None = None,
) -> list[dict[str, Any]]:
    policy_spec, verdict_spec, label, reader_specs = entry
    policy = make_policy(policy_spec)
    verdict = verdict_spec.build()
    fast = (
        metrics is None
        and verdict_spec.is_posterior
        and not reader_specs
        and _use_fast_engine(policy, env, mode, engine)
    )
    runs = [budgets] if not policy.budget_aware else [[b] for b in budgets]
    rows: list[dict[str, Any]] = []
    for run_budgets in runs:
        rng = np.random.default_rng(policy_seed)
        if fast:
            from crowdbudget.engine.fast import COMPILED_ENGINE  # imports Numba

            campaign = COMPILED_ENGINE.run(
                policy,
                env,
                run_budgets,
                world_seed=world_seed,
                policy_rng=rng,
                sync_policy=False,
                verdict=verdict,
            )
        else:
            campaign = run_campaign(
                policy,
                env,
                run_budgets,
                world_seed=world_seed,
                policy_rng=rng,
                mode=mode,
                metrics=metrics,
                verdict=verdict,
                readers=[(name, spec.build()) for name, spec in reader_specs],
            )
        for row in campaign:
            # a reader's row names its own label ("policy"), after the default
            rows.append({"policy": label, "replication": replication, **row})
    return rows


def _use_fast_engine(
    policy: AllocationPolicy, env: LabelingEnvironment, mode: str, engine: str
) -> bool:
    """Whether to run ``policy`` with the compiled engine (``engine.fast``): same runs,
    faster; ``"fast"`` insists on it."""
    if engine not in ENGINES:
        raise InvalidParameterError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "reference":
        return False
    from crowdbudget.engine.fast import COMPILED_ENGINE  # imports Numba

    supported = COMPILED_ENGINE.supports(policy, env, mode)
    if engine == "fast" and not supported:
        raise InvalidParameterError(
            f"engine='fast' does not support {policy!r} on {type(env).__name__} in {mode} mode "
            "(it needs push mode, an index policy with tie_break='first' or uniform, a "
            "synthetic world without workers and one prior and threshold for all items; or "
            "lagrangian-index on such a world, push or pull)"
        )
    return supported


#: how :func:`execute` runs the tasks: ``None`` picks Dask inside :func:`dask_scheduler`,
#: else processes when ``n_jobs`` > 1, else this process
EXECUTORS = ("serial", "processes", "dask")


def replication_seeds(
    seed: int, n_reps: int
) -> tuple[list[np.random.SeedSequence], list[np.random.SeedSequence]]:
    """Common random numbers: replication r's world seed is the r-th child of the first child
    of ``SeedSequence(seed)`` (the same world for every policy and budget), its policy seed
    the r-th child of the second."""
    world_root, policy_root = np.random.SeedSequence(seed).spawn(2)
    return world_root.spawn(n_reps), policy_root.spawn(n_reps)


def resolve_executor(executor: str | None, n_jobs: int | None, n_tasks: int) -> tuple[str, int]:
    """The executor :func:`execute` uses and on how many workers: ``(executor, n_workers)``.

    None picks, in a thread seated by :func:`fan_out`, its shared pool (``"shared"``) or
    Dask; else Dask inside :func:`dask_scheduler`, else processes when ``n_jobs`` > 1 and
    there is more than one task, else serial. Refuses an unknown executor, and ``"dask"``
    outside :func:`dask_scheduler`."""
    if executor is not None and executor not in EXECUTORS:
        raise InvalidParameterError(
            f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}"
        )
    session = _SCHEDULER.get()
    seat = _SEAT.get()
    if executor is None and seat is not None:
        # a fanned-out caller: its units go to the shared pool (or Dask) whatever n_jobs
        if seat.pool is not None:
            return "shared", seat.pool.n_workers
        executor = "dask"
    if executor == "dask" and session is None:
        raise InvalidParameterError(
            "executor='dask' runs inside dask_scheduler(address) (CLI: --scheduler local|ADDRESS)"
        )
    n_jobs = os.cpu_count() or 1 if n_jobs is None else max(1, n_jobs)
    if executor is None:
        if session is not None:
            executor = "dask"
        elif n_jobs == 1 or n_tasks <= 1:
            executor = "serial"
        else:
            executor = "processes"
    if executor == "dask":
        assert session is not None
        return executor, max(1, sum(session.client().nthreads().values()))
    if executor == "serial":
        return executor, 1
    return executor, max(1, min(n_jobs, n_tasks))


def execute(
    run: Callable[..., list[Any]],
    tasks: list[tuple[Any, ...]],
    weights: Sequence[float],
    *,
    n_jobs: int | None = None,
    executor: str | None = None,
    progress: bool = True,
    desc: str = "labels",
    unit: str = "label",
    chunked: bool = True,
    on_done: Callable[[list[Any]], None] | None = None,
) -> list[Any]:
    """``run(*task)`` for every task, on one executor, with one progress bar; the rows in any
    order (callers sort them: every task carries its own seeds, so the results do not depend
    on the executor, the number of processes or the order).

    Args:
        run: a module-level function (pickled to worker processes) returning rows.
        weights: each task's share of the progress bar (e.g. labels to buy).
        n_jobs: processes (None: all CPU cores; 1: in this process).
        executor: ``"serial"`` (this process), ``"processes"`` (a process pool of
            ``n_jobs``), ``"dask"`` (the cluster of the enclosing :func:`dask_scheduler`);
            None: :func:`resolve_executor` (in a thread seated by :func:`fan_out`: its
            :class:`SharedPool` or Dask, at its priority).
        chunked: several tasks per scheduled unit (:func:`_chunks`: many small campaigns);
            False: one unit per task, started in the order given (long tasks — whole
            reproductions — listed slowest first, so none starts last; Dask priorities too).
        on_done: called in this process with each unit's rows as it finishes.
    """
    executor, workers = resolve_executor(executor, n_jobs, len(tasks))
    seat = _SEAT.get() if executor in ("shared", "dask") else None
    weight = {id(task): w for task, w in zip(tasks, weights, strict=True)}
    units = _chunks(tasks, workers) if chunked else [[task] for task in tasks]
    sizes = [sum(weight[id(t)] for t in unit) for unit in units]
    bar = tqdm(
        total=float(sum(weights)),
        desc=desc,
        unit=unit,
        unit_scale=True,
        delay=2.0,
        disable=not progress,
        file=sys.stderr,
    )
    rows: list[Any] = []

    def finished(unit_rows: list[Any], size: float) -> None:
        rows.extend(unit_rows)
        bar.update(size)
        if on_done is not None:
            on_done(unit_rows)

    try:
        if executor == "dask":
            from dask.distributed import as_completed as dask_completed

            session = _SCHEDULER.get()
            assert session is not None
            client = session.client()
            # retries: a task lost with its worker is run again, never silently dropped;
            # priorities: the units start in the order given (Dask runs higher first), a
            # fanned-out caller's after those of the callers seated before it
            first = 0 if seat is None else -seat.priority * 10**9
            futures = [
                client.submit(
                    _timed_chunk, run, chunk, retries=2, pure=False, priority=first + len(units) - k
                )
                for k, chunk in enumerate(units)
            ]
            size_of = {future.key: size for future, size in zip(futures, sizes, strict=True)}
            if seat is not None:
                seat.units_queued += len(futures)
            try:
                for future in dask_completed(futures):
                    unit_rows, cpu = future.result()
                    if seat is not None:
                        seat.cpu_seconds += cpu
                        seat.units_done += 1
                    finished(unit_rows, size_of[future.key])
            except BaseException:
                client.cancel(futures)
                raise
        elif executor == "shared":
            assert seat is not None and seat.pool is not None
            shared = {
                seat.pool.submit(seat.priority, _timed_chunk, run, chunk): size
                for chunk, size in zip(units, sizes, strict=True)
            }
            seat.units_queued += len(shared)
            try:
                for future in as_completed(shared):
                    unit_rows, cpu = future.result()
                    seat.cpu_seconds += cpu
                    seat.units_done += 1
                    finished(unit_rows, shared[future])
            except BaseException:
                for future in shared:
                    future.cancel()  # the queued ones; those in the pool run to their end
                raise
        elif executor == "serial":
            for chunk, size in zip(units, sizes, strict=True):
                finished(_chunk(run, chunk), size)
        else:
            pool = ProcessPoolExecutor(max_workers=workers)
            try:
                pending = {
                    pool.submit(_chunk, run, chunk): size
                    for chunk, size in zip(units, sizes, strict=True)
                }
                for future in as_completed(pending):
                    finished(future.result(), pending[future])
            except BaseException:
                # Ctrl-C (or a failed campaign): stop now, not after the queued chunks — a
                # plain shutdown waits for every running chunk (measured ~45 s on compare)
                _stop_pool(pool)
                raise
            pool.shutdown()
    finally:
        bar.close()
    return rows


def sort_runs(runs: pd.DataFrame, policies: Sequence[str]) -> pd.DataFrame:
    """``runs`` in the order of ``policies``, then by budget and replication."""
    order = {pid: k for k, pid in enumerate(policies)}
    return runs.sort_values(
        ["policy", "budget", "replication"], key=lambda s: s.map(order) if s.name == "policy" else s
    ).reset_index(drop=True)


@dataclass
class ExperimentResult:
    """Tidy per-run rows and their summary per (policy, budget)."""

    runs: pd.DataFrame
    summary: pd.DataFrame


def run_experiment(
    policies: Sequence[str],
    env: LabelingEnvironment,
    budgets: Sequence[float],
    n_reps: int,
    *,
    seed: int = 0,
    n_jobs: int | None = None,
    progress: bool = True,
    mode: str = "push",
    engine: str = "auto",
    metrics: MetricsHook | None = None,
    verdict: str | None = None,
    executor: str | None = None,
    ties: str = "default",
    verdicts: Sequence[str] = (),
) -> ExperimentResult:
    """Run every policy id on ``n_reps`` worlds of ``env`` at every budget.

    Args:
        policies: policy ids (``"opt-kg"``, ``"cvar-kg:alpha=0.3"``, ...), validated up front;
            an id may name its verdict (``"opt-kg:verdict=ds"``); rows are labelled with the
            id as given.
        executor: ``"serial"``, ``"processes"`` or ``"dask"`` (:func:`execute`); None: Dask
            inside :func:`dask_scheduler`, else processes when ``n_jobs`` > 1.
        verdict: the verdict of every id that names none (``"posterior"``, the default: each
            policy's own model; or an aggregator id, :mod:`crowdbudget.policies.verdict`).
        env: the world (pickled to worker processes; reset per replication).
        budgets: absolute budgets.
        n_reps: replications (worlds).
        seed: root seed; replication r uses its r-th child, for every policy.
        n_jobs: processes (None: all CPU cores; 1: in this process).
        progress: show a progress bar on stderr (appears after 2 s).
        engine: ``"auto"`` runs the campaigns the compiled engine supports
            (:func:`~crowdbudget.engine.fast.supports_fast_path`) with it and the others with
            :func:`run_campaign` — the results are identical; ``"reference"`` always uses
            :func:`run_campaign`; ``"fast"`` requires the compiled engine for every policy
            (InvalidParameterError otherwise). Campaigns with an aggregator verdict run on
            the reference engine.
        metrics: optional module-level hook adding metrics per checkpoint
            (:data:`MetricsHook`); campaigns then run on the reference engine.
        ties: ``"default"`` (each policy's own rule among tied items: random for the
            item-selecting policies, bar deterministic ``kg``) or ``"paper"``:
            the papers' rule (``tie-break=first``) for every id that names none
            (:func:`~crowdbudget.registry.pin_paper_ties`; rows keep the ids as given) —
            what the faithful reproductions use.
        verdicts: more verdicts reading every campaign (``posterior``, ``paper`` or aggregator
            ids): each campaign is run once and read at every checkpoint by its own verdict
            and by each of these, one row each, labelled ``<policy id>:verdict=<v>`` (the id
            without its own verdict) — the rows a run of that id would give (same allocation:
            a verdict draws nothing from the policy's generator), at the cost of one
            allocation. A reading that is the id's own verdict, or whose label is one of
            ``policies``, is not repeated. Such campaigns run on the reference engine.
            Likewise ids of ``policies`` that differ only in their verdict share one
            campaign per replication (:func:`_share_allocations`; not with
            ``engine="fast"``): the same rows, one allocation.

    Returns:
        :class:`ExperimentResult` with ``runs`` (columns ``RUN_COLUMNS``) and ``summary``.
    """
    policies = list(policies)
    if not policies:
        raise InvalidParameterError("at least one policy is needed")
    # parsed and checked once here; the specs (not the strings) go to the worker processes:
    # (the policy's spec, its verdict's, the row label)
    readings = reader_specs(policies, verdict, verdicts)
    specs = {pid: (*split_verdict(pid, verdict), str(pid), readings[str(pid)]) for pid in policies}
    if ties == "paper":
        specs = {pid: (pin_paper_ties(p), v, label, r) for pid, (p, v, label, r) in specs.items()}
    elif ties != "default":
        raise InvalidParameterError(f"ties must be 'default' or 'paper', got {ties!r}")
    for policy_spec, verdict_spec, _, _ in specs.values():
        # fail fast on unknown ids and unsupported engines, before any work
        if verdict_spec.is_posterior or engine == "fast":
            _use_fast_engine(make_policy(policy_spec), env, mode, engine)
        if not verdict_spec.is_posterior and engine == "fast":
            raise InvalidParameterError(
                f"engine='fast' gives the policy's own verdict only; {policy_spec.id!r} has the "
                f"verdict {verdict_spec.name!r}"
            )
    budgets = sorted({check_budget(b) for b in budgets})
    env.check_budget(budgets[-1])  # e.g. a replay cannot spend more labels than recorded
    n_reps = check_positive_int(n_reps, "reps")
    world_seeds, policy_seeds = replication_seeds(seed, n_reps)
    # each id's row, then its readings'
    order = [label for pid in policies for label in (str(pid), *(r for r, _ in readings[str(pid)]))]
    running = policies if engine == "fast" else _share_allocations(policies, specs)
    # replications outside, policies inside: every chunk of tasks (below) then holds a mix of
    # cheap and expensive policies, so chunks take about the same time and the progress bar's
    # estimate is honest (policy by policy, the slow policies' chunks all came last: the bar
    # said seconds left at 80% and took minutes). Rows are sorted afterwards: same results.
    tasks = [
        (specs[pid], env, budgets, r, world_seeds[r], policy_seeds[r], mode, engine, metrics)
        for r in range(n_reps)
        for pid in running
    ]
    # the bar counts labels to buy, not campaigns: a budget-aware policy runs one campaign per
    # budget (the sum of the budgets), the others one up to the largest budget, so a bar over
    # campaigns under-counts the slow ones and its time estimate comes out short
    cost = {
        id(spec): float(sum(budgets)) if spec[0].capabilities.budget_aware else float(budgets[-1])
        for spec in specs.values()
    }
    rows = execute(
        _task,
        tasks,
        [cost[id(task[0])] for task in tasks],
        n_jobs=n_jobs,
        executor=executor,
        progress=progress,
    )
    extra_columns = list(dict.fromkeys(k for row in rows for k in row if k not in RUN_COLUMNS))
    runs = sort_runs(pd.DataFrame(rows, columns=RUN_COLUMNS + extra_columns), order)
    return ExperimentResult(runs=runs, summary=summarize(runs, order))


def _share_allocations(
    policies: Sequence[str],
    specs: dict[str, tuple[Spec, VerdictSpec, str, tuple[tuple[str, VerdictSpec], ...]]],
) -> list[str]:
    """The ids whose campaigns :func:`run_experiment` runs: of several ids that differ only in
    their verdict (``bbta:n-explore=1`` and ``bbta:n-explore=1:verdict=one-coin-em``), the
    first runs the campaign and the others become its readings (``specs`` is updated: their
    label and verdict, then their own readings, join the first's). The rows are those of
    separate runs — the policy's generator and the world's are the same for every id of a
    replication, and a verdict draws nothing from the policy's generator (its tie seed is a
    side-effect-free child, :func:`~crowdbudget.policies.verdict.verdict_seed`); checked in
    ``tests/test_verdict.py`` — at the cost of one allocation."""
    first_of: dict[tuple[str, tuple[tuple[str, str], ...], str], str] = {}
    running: list[str] = []
    for pid in policies:
        policy_spec, verdict_spec, label, readings = specs[pid]
        first = first_of.setdefault((policy_spec.id, policy_spec.params, policy_spec.kind), pid)
        if first == pid:
            running.append(pid)
            continue
        spec, verdict_of_first, first_label, first_readings = specs[first]
        shared = (*first_readings, (label, verdict_spec), *readings)
        specs[first] = (spec, verdict_of_first, first_label, shared)
    return running


def reader_specs(
    policies: Sequence[str], verdict: str | None, verdicts: Sequence[str]
) -> dict[str, tuple[tuple[str, VerdictSpec], ...]]:
    """Per policy id, the extra readings of its campaigns (:func:`run_experiment`'s
    ``verdicts``): ``(label, VerdictSpec)`` with label ``<id without its verdict>:verdict=<v>``,
    leaving out the id's own verdict and labels that are ids of ``policies``. An unknown
    verdict fails here, naming the allowed ones."""
    wanted = [VerdictSpec(str(v)) for v in dict.fromkeys(verdicts)]
    for spec in wanted:
        spec.build()  # an unknown aggregator fails here, with the allowed ones
    taken = {str(pid) for pid in policies}
    out: dict[str, tuple[tuple[str, VerdictSpec], ...]] = {}
    for pid in policies:
        policy_spec, own = split_verdict(pid, verdict)
        readings = []
        for spec in wanted:
            label = f"{policy_spec}:verdict={spec.name}"
            if spec == own or label in taken:
                continue
            taken.add(label)
            readings.append((label, spec))
        out[str(pid)] = tuple(readings)
    return out


def summarize(runs: pd.DataFrame, policy_order: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean, std and 95% t-interval of every metric per (policy, budget).

    Columns: ``policy, budget, reps`` and, for each metric m, ``m_mean, m_std, m_ci_low,
    m_ci_high``.
    """
    metrics = [c for c in runs.columns if c not in ("policy", "budget", "replication")]
    grouped = runs.groupby(["policy", "budget"], sort=False)
    out = grouped.size().rename("reps").reset_index()
    for metric in metrics:
        mean = grouped[metric].mean().to_numpy()
        std = grouped[metric].std(ddof=1).fillna(0.0).to_numpy()
        n = out["reps"].to_numpy()
        half = np.where(n > 1, stats.t.ppf(0.975, np.maximum(n - 1, 1)) * std / np.sqrt(n), 0.0)
        out[f"{metric}_mean"] = mean
        out[f"{metric}_std"] = std
        out[f"{metric}_ci_low"] = mean - half
        out[f"{metric}_ci_high"] = mean + half
    if policy_order is not None:
        rank = {pid: k for k, pid in enumerate(policy_order)}
        out = out.sort_values(
            ["policy", "budget"], key=lambda s: s.map(rank) if s.name == "policy" else s
        )
    return out.reset_index(drop=True)
