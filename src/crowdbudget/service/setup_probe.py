"""Expensive work in child processes under a deadline and a memory ceiling.

Two kinds of work cost more than a request should: building a campaign's policy (its set-up
and its first decision: the Hu–Frazier index table, Gittins indices, the KOS graph, the exact
DP) and fitting an aggregator verdict (``GET …/results?verdict=``, ``…/calibration``). The
parameters that scale them directly are bounded first (:func:`crowdbudget.registry.
check_network_policy`, :func:`~crowdbudget.registry.check_network_verdict`, a policy's
declared cost against ``ServiceSettings.max_policy_cost``); what is left grows with the
campaign. So the service runs that work here:

- **a set-up is tried before anything is stored**: :meth:`Campaign.create` on an in-memory
  store and the first decision, the very same code path, in a child with a time limit
  (``setup_timeout``); a set-up that does not finish in time is killed and the request
  refused (422). The server's own set-up, run afterwards in a worker thread, is then known to
  take about that long at most.
- **a verdict fit runs in the child and only its result comes back** (labels and
  probabilities), killed at ``compute_timeout`` (503).

Every child's address space is capped (``RLIMIT_AS`` = ``compute_memory_bytes``): an
allocation beyond it fails in the child, never in the server. At most ``max_compute_jobs``
children run at once per server process; a request finding them all busy is refused at once
(:class:`ComputeBusyError`: 503 with ``Retry-After``) rather than queued, so heavy requests
never fill the server's thread pool. A request whose client leaves, or that the server
cancels at shutdown, kills its child (:meth:`ComputePool.cancel`).

How: one helper process per slot (``python -m crowdbudget.service.setup_probe``, started on
first use in its own process group, a fresh interpreter that has imported the policies and
aggregators once) takes one job per line on its standard input. It is single-threaded, so it
can safely ``fork`` a child per job and kill it at the deadline; a fork costs milliseconds.
Jobs and results cross the pipe pickled (base64 in one JSON line): both ends are this
package, the pipe is private to the server. A fresh interpreter rather than
:mod:`multiprocessing`: the latter's forkserver re-imports the caller's ``__main__`` in every
child, which breaks (or re-runs) a user's script that builds the app without an
``if __name__ == "__main__"`` guard.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import json
import math
import os
import pickle
import resource
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError

#: seconds the server waits for a helper beyond the job's own limit before it gives up on
#: the helper (and starts a new one)
HELPER_GRACE = 30.0

#: scheduling priority a child gives up: the server's own requests come first on a busy CPU
_CHILD_NICENESS = 10

#: one thread per child for the numeric libraries: the pool's size is the parallelism
_HELPER_ENVIRONMENT = {
    name: "1"
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")
}

#: the name a set-up's first decision is tried for when the campaign names no worker
PROBE_WORKER = "setup-probe-worker"


class ComputeBusyError(CrowdBudgetError):
    """Every compute slot of this server process is busy: try again after ``retry_after``
    seconds (HTTP 503 with ``Retry-After``)."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ComputeTimeoutError(CrowdBudgetError):
    """A computation ran past its deadline, ran out of its memory ceiling, or was cancelled;
    its child was killed (HTTP 503)."""


# ------------------------------------------------------------------------ the jobs (children)
def _setup_job(config: dict[str, Any]) -> str | None:
    """Create the campaign in memory and make its first decision; None if it works, else the
    one-line refusal."""
    from crowdbudget.campaign import Campaign, EventStore

    try:
        campaign = Campaign.create(store=EventStore("sqlite://"), **config)
    except CrowdBudgetError as error:
        return str(error)
    except Exception as error:  # a policy failing on a valid problem: refuse, say what
        return f"the policy failed to set up: {type(error).__name__}"
    try:  # the first decision builds what some policies prepare lazily (graphs, tables)
        if config.get("mode") == "push":
            campaign.push_assignments(1)
        else:
            workers = list(config.get("workers") or ()) or [PROBE_WORKER]
            if not config.get("workers"):
                campaign.add_workers(workers)
            campaign.next_assignment(workers[0])
    except CrowdBudgetError:  # a refusal of this probe's request, not of the set-up
        pass
    except Exception as error:
        return f"the policy failed on its first decision: {type(error).__name__}"
    return None


def _verdict_job(arguments: tuple[Any, ...]) -> Any:
    from crowdbudget.campaign.read_models import fit_verdict

    return fit_verdict(*arguments)


_JOBS: dict[str, Callable[[Any], Any]] = {"setup": _setup_job, "verdict": _verdict_job}


def _run_in_child(job: str, payload: Any, timeout: float, memory: int) -> dict[str, Any]:
    """(In the helper.) Fork, run the job in the child under ``memory`` bytes of address
    space, wait at most ``timeout`` seconds; the answer as a JSON-able dict."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: compute, report, leave without running any cleanup
        os.close(read_end)
        try:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
            os.nice(_CHILD_NICENESS)
            try:
                answer = {"result": _encode(_JOBS[job](payload))}
            except MemoryError:
                answer = {"failed": "memory"}
            except CrowdBudgetError as error:
                answer = {"refusal": str(error)}
            data = json.dumps(answer).encode()
            while data:
                data = data[os.write(write_end, data) :]
        finally:
            os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + timeout
    chunks: list[bytes] = []
    try:
        while True:  # read as the child writes (a result may exceed the pipe's buffer)
            left = deadline - time.monotonic()
            ready, _, _ = select.select([read_end], [], [], max(left, 0.0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                return {"timeout": True}
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        if not chunks:  # the child died (out of memory, killed)
            return {"failed": "died"}
        result: dict[str, Any] = json.loads(b"".join(chunks))
        return result
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


def _encode(value: Any) -> str:
    return base64.b64encode(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).decode()


def _decode(text: str) -> Any:
    return pickle.loads(base64.b64decode(text))  # our own helper, over a private pipe


def _helper_main(stdin: IO[str], stdout: IO[str]) -> None:
    """The helper's loop: one JSON job per line in, one JSON answer per line out."""
    import crowdbudget.aggregation.registry  # import once, before any fork
    import crowdbudget.campaign
    import crowdbudget.policies.builtin  # noqa: F401

    for line in stdin:
        request = json.loads(line)
        answer = _run_in_child(
            request["job"],
            _decode(request["payload"]),
            float(request["timeout"]),
            int(request["memory"]),
        )
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


# ------------------------------------------------------------------------ the server's side
class _Helper:
    """One helper process: one job at a time; :meth:`kill` ends it and its child."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[str] | None = None
        self.cancelled = False

    def start(self) -> None:
        """Start the helper if it is not running (it imports the package meanwhile, so that
        a job's wait is its own computation, not the interpreter's start)."""
        self._running()

    def _running(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "crowdbudget.service.setup_probe"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
                env={**os.environ, **_HELPER_ENVIRONMENT},
                start_new_session=True,  # its own process group: kill() reaches the child
            )
        return self._process

    def ask(self, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """The helper's answer, or None if it died, hung or was killed meanwhile."""
        self.cancelled = False
        process = self._running()
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
            ready, _, _ = select.select([process.stdout], [], [], timeout + HELPER_GRACE)
            line = process.stdout.readline() if ready else ""
        except (BrokenPipeError, OSError, ValueError):
            line = ""
        if not line:  # the helper died, hangs or was killed: replace it next time
            self._kill(process)
            return None
        answer: dict[str, Any] = json.loads(line)
        return answer

    def kill(self) -> None:
        """End the helper and any child it runs (its process group) at once."""
        if self._process is not None:
            self._kill(self._process)

    def _kill(self, process: subprocess.Popen[str]) -> None:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        if self._process is process:
            self._process = None


class ComputePool:
    """``size`` helpers, each running one job at a time in a child (see the module).

    :meth:`run` takes a free helper or raises :class:`ComputeBusyError` at once; it blocks
    its calling thread until the job ends (call it from a worker thread). :meth:`cancel`
    (from any thread) kills the job a ``token`` runs, and its helper is replaced at once;
    :meth:`stop` kills every job and helper (none is replaced until :meth:`start` or the
    next :meth:`run`)."""

    def __init__(self, size: int) -> None:
        self._free = [_Helper() for _ in range(size)]
        self._busy: dict[object, _Helper] = {}
        self._lock = threading.Lock()
        self._stopped = False

    def run(
        self,
        job: str,
        payload: Any,
        *,
        timeout: float,
        memory: int,
        token: object | None = None,
        retry_after: float = 1.0,
    ) -> Any:
        """The job's result; :class:`InvalidParameterError` with its refusal;
        :class:`ComputeTimeoutError` past ``timeout`` seconds, beyond ``memory`` bytes or
        when cancelled; :class:`ComputeBusyError` when every helper is busy."""
        token = object() if token is None else token
        with self._lock:
            self.refuse_if_busy(retry_after)
            helper = self._free.pop()
            self._busy[token] = helper
        try:
            request = {"job": job, "payload": _encode(payload), "timeout": timeout}
            answer = helper.ask({**request, "memory": memory}, timeout)
        finally:
            with self._lock:
                del self._busy[token]
                if not self._stopped:
                    helper.start()  # a killed helper is replaced before it is free again
                self._free.append(helper)
        if answer is None or helper.cancelled:
            raise ComputeTimeoutError("the computation was cancelled")
        if answer.get("timeout"):
            raise ComputeTimeoutError(
                f"this computation takes longer than this server allows ({timeout:g} s)"
            )
        if answer.get("failed") is not None:
            raise ComputeTimeoutError(
                f"this computation needs more memory than this server allows ({memory} bytes)"
            )
        if answer.get("refusal") is not None:
            raise InvalidParameterError(str(answer["refusal"]))
        return _decode(answer["result"])

    def refuse_if_busy(self, retry_after: float = 1.0) -> None:
        """Raise :class:`ComputeBusyError` now if no helper is free (a request that would
        only be refused later need not prepare its job first)."""
        if not self._free:
            raise ComputeBusyError(
                "this server is busy with other expensive requests; try again shortly",
                retry_after,
            )

    def start(self) -> None:
        """Start every helper now rather than at its first job (and take jobs again after
        :meth:`stop`)."""
        with self._lock:
            self._stopped = False
            for helper in self._free:
                helper.start()

    def cancel(self, token: object) -> None:
        """Kill the job ``token`` runs, if any (its :meth:`run` raises
        :class:`ComputeTimeoutError`)."""
        with self._lock:
            helper = self._busy.get(token)
        if helper is not None:
            helper.cancelled = True
            helper.kill()

    def stop(self) -> None:
        """Kill every helper and job (the server stops). A later :meth:`run` starts its
        helper again (another app in this process may still use the pool)."""
        with self._lock:
            self._stopped = True
            helpers = [*self._free, *self._busy.values()]
        for helper in helpers:
            helper.cancelled = True
            helper.kill()


_POOLS: dict[int, ComputePool] = {}
_POOLS_LOCK = threading.Lock()


def compute_pool(size: int) -> ComputePool:
    """The process's :class:`ComputePool` of ``size`` helpers (apps built in one process
    share it: each helper holds an interpreter with the package imported), stopped when the
    interpreter exits."""
    with _POOLS_LOCK:
        pool = _POOLS.get(size)
        if pool is None:
            pool = _POOLS[size] = ComputePool(size)
        return pool


@atexit.register
def _stop_pools() -> None:
    for pool in _POOLS.values():
        pool.stop()


def check_policy_cost(config: dict[str, Any], max_cost: float) -> None:
    """Refuse (:class:`InvalidParameterError`, one line naming the limit) a campaign whose
    policy declares a cost (:attr:`~crowdbudget.registry.ComponentSpec.cost`) above
    ``max_cost`` on the campaign's size: its items, classes, and the labels its budget buys
    at the lowest price it names. ``config``: the arguments of :meth:`Campaign.create`."""
    from crowdbudget.registry import POLICIES, ProblemSize, split_verdict

    policy_spec, _ = split_verdict(config["policy"], "posterior")
    prices = [float(config.get("default_price") or 1.0)]
    prices += [float(p) for p in (config.get("worker_prices") or {}).values()]
    budget_labels = float(config["budget"]) / min(prices)
    size = ProblemSize(
        n_items=len(config["items"]),
        budget_labels=budget_labels,
        n_classes=len(config.get("classes") or ()) or 2,
    )
    cost = POLICIES.cost(policy_spec, size)
    if cost > max_cost:
        raise InvalidParameterError(
            f"policy {policy_spec.id!r} on {size.n_items} items and a budget of "
            f"{budget_labels:g} labels costs {cost:.3g} steps to set up; this server's limit "
            f"(max_policy_cost) is {max_cost:.3g}: use a smaller budget, fewer items or "
            "another policy"
        )


def check_setup(
    config: dict[str, Any],
    timeout: float,
    *,
    pool: ComputePool,
    memory: int,
    max_cost: float = math.inf,
) -> None:
    """Refuse a campaign whose policy's declared cost exceeds ``max_cost``
    (:func:`check_policy_cost`), then run ``Campaign.create(**config)`` and its first
    decision in a child of ``pool``; raise :class:`InvalidParameterError` with its refusal,
    or when it takes longer than ``timeout`` seconds or more than ``memory`` bytes (the
    set-up is then killed). :class:`ComputeBusyError` when the pool is busy. ``config`` must
    be picklable."""
    check_policy_cost(config, max_cost)
    try:
        refusal = pool.run("setup", config, timeout=timeout, memory=memory)
    except ComputeTimeoutError:
        raise InvalidParameterError(
            f"setting up policy {str(config.get('policy'))[:80]!r} for "
            f"{len(config.get('items', ()))} items takes longer than this server allows "
            f"({timeout:g} s) or more memory ({memory / 2**20:.0f} MiB); use fewer items, a "
            "smaller budget or another policy"
        ) from None
    if refusal is not None:
        raise InvalidParameterError(str(refusal))


if __name__ == "__main__":
    _helper_main(sys.stdin, sys.stdout)
