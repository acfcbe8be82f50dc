"""A campaign's set-up under a time limit, tried in another process before the server does it.

Building a campaign resets its policy on the campaign's problem, and some policies prepare
tables whose cost grows with the problem (the Hu–Frazier index table, Gittins indices, the
exact DP). The parameters that scale that work directly are server settings a client cannot
set (:func:`crowdbudget.registry.check_network_policy`); what is left grows with the number of
items and the budget, which a client does choose. So the service first runs the very same
set-up — :meth:`Campaign.create` on an in-memory store, the same code path — in another
process with a time limit (``ServiceSettings.setup_timeout``): a set-up that does not finish
in time is killed and the request refused (422) before anything is stored, and the server's
own set-up, run afterwards off the event loop, is known to take about that long at most.

How: one helper process per server process (``python -m crowdbudget.service.setup_probe``,
started on first use, a fresh interpreter that has imported the policies once) takes one
request per line on its standard input. It is single-threaded, so it can safely ``fork`` a
child for each set-up and kill it at the limit; a fork costs milliseconds. A fresh
interpreter rather than :mod:`multiprocessing`: the latter's forkserver re-imports the
caller's ``__main__`` in every child, which breaks (or re-runs) a user's script that builds
the app without an ``if __name__ == "__main__"`` guard.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
from typing import IO, Any

from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError

#: seconds the server waits for the helper beyond the set-up's own limit before it gives up
#: on the helper (and starts a new one)
_HELPER_GRACE = 30.0


def _refusal_of_setup(config: dict[str, Any]) -> str | None:
    """Create the campaign in memory; None if it works, else the one-line refusal."""
    from crowdbudget.campaign import Campaign, EventStore

    try:
        Campaign.create(store=EventStore("sqlite://"), **config)
    except CrowdBudgetError as error:
        return str(error)
    except Exception as error:  # a policy failing on a valid problem: refuse, say what
        return f"the policy failed to set up: {type(error).__name__}"
    return None


def _run_in_child(config: dict[str, Any], timeout: float) -> dict[str, Any]:
    """(In the helper.) Fork, set up in the child, wait at most ``timeout`` seconds."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: set up, report, leave without running any cleanup
        os.close(read_end)
        try:
            refusal = _refusal_of_setup(config)
            os.write(write_end, json.dumps({"refusal": refusal}).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            return {"timeout": True}
        chunks = []
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)
        if not chunks:  # the child died (out of memory, killed)
            return {"refusal": "the policy failed to set up on this server"}
        result: dict[str, Any] = json.loads(b"".join(chunks))
        return result
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)


def _helper_main(stdin: IO[str], stdout: IO[str]) -> None:
    """The helper's loop: one JSON request per line in, one JSON answer per line out."""
    import crowdbudget.campaign  # import once, before any fork
    import crowdbudget.policies.builtin  # noqa: F401

    for line in stdin:
        request = json.loads(line)
        answer = _run_in_child(request["config"], float(request["timeout"]))
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


class _Helper:
    """The server side: starts the helper process on first use, one request at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[str] | None = None

    def _running(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "crowdbudget.service.setup_probe"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                bufsize=1,
            )
        return self._process

    def ask(self, config: dict[str, Any], timeout: float) -> dict[str, Any]:
        with self._lock:
            process = self._running()
            assert process.stdin is not None and process.stdout is not None
            try:
                process.stdin.write(json.dumps({"config": config, "timeout": timeout}) + "\n")
                process.stdin.flush()
                ready, _, _ = select.select([process.stdout], [], [], timeout + _HELPER_GRACE)
                line = process.stdout.readline() if ready else ""
            except (BrokenPipeError, OSError):
                line = ""
            if not line:  # the helper died or hangs: replace it next time
                self.stop()
                return {"refusal": "the server could not try the policy's set-up; try again"}
            answer: dict[str, Any] = json.loads(line)
            return answer

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()
        self._process = None


_HELPER = _Helper()
atexit.register(_HELPER.stop)


def check_setup(config: dict[str, Any], timeout: float) -> None:
    """Run ``Campaign.create(**config)`` in another process; raise
    :class:`InvalidParameterError` with its refusal, or when it takes longer than
    ``timeout`` seconds (the set-up is then killed). ``config`` must be JSON data."""
    answer = _HELPER.ask(config, timeout)
    if answer.get("timeout"):
        raise InvalidParameterError(
            f"setting up policy {str(config.get('policy'))[:80]!r} for "
            f"{len(config.get('items', ()))} items takes longer than this server allows "
            f"({timeout:g} s); use fewer items, a smaller budget or another policy"
        )
    if answer.get("refusal") is not None:
        raise InvalidParameterError(str(answer["refusal"]))


if __name__ == "__main__":
    _helper_main(sys.stdin, sys.stdout)
