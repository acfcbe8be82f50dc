"""What replaying a policy's select-side state costs a live campaign: store bytes and load time.

For each (policy id, mode) a live campaign of ``--items`` items, ``--workers`` workers and a
budget of ``--labels`` labels is run to the end on one process's SQLite file (pull: the
workers ask in turn; push: one assignment pushed at a time; every label answered at once by
a simulated crowd, worker w right with probability 0.9 − 0.05·w, seed 0), twice: with the
question log (``campaign/problem_build.py``, "Select-side state") and with the log turned
off (the code before it: no ``"asked"`` key, a load does not ask the policy again). Reports
per run the labels bought, the store's payload bytes (the JSON of every event's payload) and
the ``"asked"`` share of them, and the CPU time (``time.process_time``) of
:meth:`Campaign.load` on the finished store, the median of ``--repeat`` loads. ``--writer``
instead reports the running campaign's CPU per decision (the request and its ``assigned``
commit, labels not counted) on an in-memory store, ``--repeat`` runs with the log and without
it in turn. Run from the repository root:

    python benchmarks/bench_campaign_reload.py [--items 2000] [--workers 10]
        [--labels 10000] [--repeat 3] [--cases round-robin/pull,kos/push,...] [--writer]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.campaign.problem_build import QUESTIONS, QuestionLog

DEFAULT_CASES = (
    "round-robin/pull",
    "lagrangian-index/pull",
    "kos/push",
    "bbta/push",
    "bbta/pull",
    "b-kube/push",
    "iethresh/push",
    "opt-kg/pull",
)


def _run(policy: str, mode: str, url: str, args: argparse.Namespace) -> tuple[str, int, float]:
    """Run one campaign to the end; its id, labels bought and CPU seconds per decision."""
    rng = np.random.default_rng(0)
    truth = rng.integers(2, size=args.items)
    workers = [f"w{k}" for k in range(args.workers)]
    campaign = Campaign.create(
        [f"i{k}" for k in range(args.items)],
        budget=float(args.labels),
        policy=policy,
        seed=0,
        workers=workers,
        mode=mode,
        store=EventStore(url),
        clock=lambda: 0.0,
    )
    labels = nothing = 0
    deciding = 0.0
    while labels < args.labels and nothing < len(workers):
        start = time.process_time()
        if mode == "push":
            batch = campaign.push_assignments(1)
            given = batch[0] if batch else None
        else:
            given = campaign.next_assignment(workers[(labels + nothing) % len(workers)])
        deciding += time.process_time() - start
        if given is None:
            nothing += 1
            continue
        nothing = 0
        worker, item = int(given.worker_id[1:]), int(given.item_id[1:])
        right = rng.random() < 0.9 - 0.05 * worker
        campaign.record_label(given.assignment_id, str(truth[item] if right else 1 - truth[item]))
        labels += 1
    return campaign.campaign_id, labels, deciding / max(labels + nothing, 1)


def _logged(on: bool) -> None:
    """Turn the question log on, or off (the code before it: no question reaches the events)."""
    QuestionLog.asking = (  # type: ignore[method-assign]
        _ASKING if on else staticmethod(lambda policy: policy)
    )


_ASKING = QuestionLog.__dict__["asking"]  # the staticmethod itself


def _measure(policy: str, mode: str, args: argparse.Namespace, *, logged: bool) -> dict[str, Any]:
    _logged(logged)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'reload.db'}"
            cid, labels, _ = _run(policy, mode, url, args)
            store = EventStore(url)
            payloads = [event.payload for event in store.events(cid)]
            total = sum(len(json.dumps(p)) for p in payloads)
            asked = sum(len(json.dumps(p[QUESTIONS])) for p in payloads if QUESTIONS in p)
            seconds = []
            for _ in range(args.repeat):
                start = time.process_time()
                loaded = Campaign.load(EventStore(url), cid)
                seconds.append(time.process_time() - start)
                assert loaded._questions.mismatches == 0
    finally:
        _logged(True)
    return {
        "case": f"{policy}/{mode}",
        "logged": logged,
        "labels": labels,
        "events": len(payloads),
        "payload_bytes": total,
        "asked_bytes": asked,
        "load_s": statistics.median(seconds),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--labels", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cases", default=",".join(DEFAULT_CASES))
    parser.add_argument("--writer", action="store_true")
    args = parser.parse_args()
    if args.writer:
        print("| case | question log | run | CPU µs per decision |")
        print("|---|---|---|---|")
        for case in args.cases.split(","):
            policy, mode = case.rsplit("/", 1)
            for run in range(args.repeat):
                for logged in (True, False):
                    _logged(logged)
                    try:
                        *_, per_decision = _run(policy, mode, "sqlite://", args)
                    finally:
                        _logged(True)
                    flag = "on" if logged else "off"
                    print(f"| {case} | {flag} | {run + 1} | {per_decision * 1e6:.1f} |", flush=True)
        return
    print("| case | question log | labels | events | payload bytes | asked bytes | load s |")
    print("|---|---|---|---|---|---|---|")
    for case in args.cases.split(","):
        policy, mode = case.rsplit("/", 1)
        for logged in (True, False):
            row = _measure(policy, mode, args, logged=logged)
            print(
                f"| {row['case']} | {'on' if logged else 'off'} | {row['labels']} | "
                f"{row['events']} | {row['payload_bytes']:,} | {row['asked_bytes']:,} | "
                f"{row['load_s']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
