"""Where the runner's campaigns run (DESIGN §9): this process, a process pool, a Dask
cluster (:func:`dask_scheduler`), or one process pool shared by several concurrent callers
(:class:`SharedPool`, :func:`fan_out`). :func:`execute` runs ``run(*task)`` for every task on
the executor :func:`resolve_executor` picks, with one progress bar. Every task carries its own
seeds, so the rows do not depend on the executor, the number of processes or the order.
"""

from __future__ import annotations

import contextlib
import contextvars
import heapq
import itertools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from functools import partial
from typing import Any

from tqdm.auto import tqdm

from crowdbudget._validation import check_positive_int
from crowdbudget.exceptions import InvalidParameterError

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


def _worker_signals() -> None:
    """Each pool worker's initializer: SIGINT ignored (a terminal's Ctrl-C reaches the whole
    process group; the parent stops its workers, :func:`_stop_pool`, so they print no
    traceback of their own) and SIGTERM, what that stop sends, back to its default (end
    now: a forked worker inherits the parent's Python handler, e.g. the CLI's, which would
    only raise an exception the worker reports back and then go on with its queue)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def process_pool(n_workers: int) -> ProcessPoolExecutor:
    """A process pool of ``n_workers`` whose workers :func:`_stop_pool` ends at once."""
    return ProcessPoolExecutor(max_workers=n_workers, initializer=_worker_signals)


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel the queued tasks and end the worker processes without waiting for them."""
    # CPython's executor keeps its processes here (and forgets them at shutdown: read first)
    processes = list((getattr(pool, "_processes", None) or {}).values())
    manager = getattr(pool, "_executor_manager_thread", None)
    for process in processes:
        if process.is_alive():
            process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)
    # The executor's management thread closes its wake-up pipe as it ends (its workers gone,
    # it ends at once). Let it end here: the interpreter's exit hook writes to that pipe when
    # it is not yet marked closed, and a close between the check and the write prints
    # "Exception ignored ... Bad file descriptor" after the command's one line (CPython 3.11).
    if manager is not None and manager.is_alive():
        manager.join(timeout=2.0)


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
        self._pool = process_pool(self.n_workers)
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
    balance the load and keep the progress bar moving. The chunks shrink towards the end
    (at most 1/8 per worker of the tasks still to come, down to one task), so that the
    workers run out of work at about the same time: the last unit is one campaign, not
    ``size`` of them while the other cores wait."""
    workers = max(1, n_workers)
    size = max(1, min(64, len(tasks) // (8 * workers)))
    chunks = []
    start = 0
    while start < len(tasks):
        step = max(1, min(size, (len(tasks) - start) // (4 * workers)))
        chunks.append(tasks[start : start + step])
        start += step
    return chunks


#: how :func:`execute` runs the tasks: ``None`` picks Dask inside :func:`dask_scheduler`,
#: else processes when ``n_jobs`` > 1, else this process
EXECUTORS = ("serial", "processes", "dask")


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
            pool = process_pool(workers)
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
