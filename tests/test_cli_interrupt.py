"""Stopping ``crowdbudget compare`` mid-run (Ctrl-C's SIGINT, a supervisor's SIGTERM) ends its
process-pool workers at once: none is left running its queue after the command has gone,
and the command says so in one line; Ctrl-C exits with status 130, SIGTERM ends the
process by that signal once the workers are stopped (a shell shows 143)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from service_helpers import alive, live_children

LINUX = sys.platform.startswith("linux")


@pytest.mark.skipif(not LINUX, reason="reads /proc")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_compare_leaves_no_worker_process(tmp_path: Path, signum: int) -> None:
    process = subprocess.Popen(
        # about a minute of campaigns on two workers: the signal lands mid-work
        [sys.executable, "-m", "crowdbudget", "compare", "--policies", "opt-kg",
         "--budget-per-item", "1,2,3,4,5,6,7,8,9,10", "--reps", "200", "--jobs", "2",
         "--no-progress", "--out", str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        # a background job may inherit SIGINT ignored: give the child the default handler
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(workers) < 2 and time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.05)
            workers = live_children(process.pid)
        assert len(workers) == 2, f"the pool did not start: {workers}"
        process.send_signal(signum)
        sent = time.monotonic()
        _, err = process.communicate(timeout=30)
        time.sleep(max(0.0, sent + 2.0 - time.monotonic()))
        survivors = [pid for pid in workers if alive(pid)]
        assert not survivors, f"workers {survivors} still run 2 s after the signal"
        # SIGINT: status 130; SIGTERM: the clean-up done, the process ends by the signal
        assert process.returncode == (130 if signum == signal.SIGINT else -signum), err
        name = signal.Signals(signum).name
        assert err.strip() == (
            f"crowdbudget: interrupted ({name}): stopped at once, with any worker processes"
        ), err
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in workers:  # never leave a worker behind a failed test
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_cli_gives_back_the_sigterm_handler_it_found() -> None:
    from crowdbudget.cli import main

    before = signal.getsignal(signal.SIGTERM)
    assert main(["policies", "--json"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before
