"""A simulated crowd working through a live campaign over HTTP.

Starts ``crowdbudget serve`` on a free loopback port (a real uvicorn process), creates a
campaign over the 800 RTE items, and lets a swarm of worker threads ask for work, think for a
random time, and answer with a recorded RTE label of the assigned item (a random one not used
yet — the replay rule of Chen et al. 2013 §7.2). Some workers walk away without answering:
their assignments expire after the time-to-live and the budget comes back. At the end the
campaign's final labels are scored against RTE's gold labels and set beside the offline
replay of the same policy at the same budget (``crowdbudget replay``).

Run:  python examples/live_campaign.py [--budget 1600] [--workers 16] [--policy opt-kg]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from crowdbudget.cli.common import positive_int
from crowdbudget.client import Client, ServiceError
from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.service.local import free_port as _free_port
from crowdbudget.simulation.replay import ReplayEnvironment


def start_service(db_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``crowdbudget serve`` in a subprocess; returns it and its base URL once it answers."""
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crowdbudget",
            "serve",
            "--db",
            f"sqlite:///{db_path}",
            "--port",
            str(port),
            # simulated workers answer at machine speed: lift the per-key request rate
            # meant for people
            "--requests-per-second-per-key",
            "100000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/openapi.json", timeout=0.5)
            return proc, base
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("live_campaign: error: crowdbudget serve did not answer within 30 s")


class RecordedAnswers:
    """Thread-safe replay oracle: a random unused recorded label of an item."""

    def __init__(self, seed: int) -> None:
        self.data = load_dataset("rte")
        rng = np.random.default_rng(seed)
        order = rng.permutation(self.data.n_labels)
        self._unused: dict[str, list[str]] = {}
        for record in order.tolist():
            item = str(self.data.item_ids[self.data.items[record]])
            self._unused.setdefault(item, []).append(self.data.classes[self.data.labels[record]])
        self._lock = threading.Lock()

    def answer(self, item_id: str) -> str:
        with self._lock:
            return self._unused[item_id].pop()


def run_live(
    *,
    budget: int = 1600,
    n_workers: int = 16,
    policy: str = "opt-kg",
    seed: int = 0,
    walk_away: float = 0.05,
    ttl: float = 2.0,
    base_url: str | None = None,
) -> dict[str, Any]:
    """Run one live campaign on RTE; returns accuracy, spending and timing."""
    answers = RecordedAnswers(seed)
    data = answers.data
    anon = Client(base_url or "")
    created = anon.create_campaign(
        items=[str(i) for i in data.item_ids],
        budget=budget,
        classes=list(data.classes),
        policy=policy,
        ttl=ttl,
        max_labels_per_item=10,  # RTE holds 10 labels per item
        seed=seed,
        name=f"RTE live ({policy})",
    )
    cid = created["campaign_id"]
    boss = anon.with_key(created["requester_key"])
    tokens = [boss.add_worker(cid, f"worker-{k}")["worker_token"] for k in range(n_workers)]
    start = time.perf_counter()

    def crowd_member(k: int) -> int:
        rng = np.random.default_rng([seed, k])
        me = anon.with_key(tokens[k])
        answered = 0
        idle = 0
        while idle < 3:
            work = me.next_assignment(cid)
            if work is None:  # nothing now: pending work of others may still expire
                idle += 1
                time.sleep(ttl / 2)
                continue
            idle = 0
            time.sleep(float(rng.uniform(0.0, 0.01)))  # thinking
            if rng.random() < walk_away:
                continue  # never answers: the assignment expires after ttl
            me.submit_label(cid, work["assignment_id"], answers.answer(work["item_id"]))
            answered += 1
        return answered

    with ThreadPoolExecutor(n_workers) as pool:
        answered = sum(pool.map(crowd_member, range(n_workers)))
    seconds = time.perf_counter() - start
    results = boss.results(cid)
    status = boss.status(cid)
    gold = dict(zip(data.item_ids, np.asarray(data.classes)[data.gold], strict=True))
    accuracy = float(np.mean([r["label"] == gold[r["task"]] for r in results]))
    return {
        "policy": policy,
        "budget": budget,
        "accuracy": accuracy,
        "spent": status["spent"],
        "labels": status["n_labels"],
        "answered": answered,
        "seconds": seconds,
        "label_round_trips_per_second": answered / seconds,
    }


def offline_replay(policy: str, budget: int, reps: int, seed: int = 0) -> tuple[float, float]:
    """Mean and standard deviation of the offline replay's accuracy at the same budget."""
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    result = run_experiment([policy], env, [budget], reps, seed=seed, progress=False, n_jobs=1)
    row = result.summary.iloc[0]
    return float(row["accuracy_mean"]), float(row["accuracy_std"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--budget", type=positive_int, default=1600, help="labels to buy (default 1600)"
    )
    parser.add_argument(
        "--workers", type=positive_int, default=16, help="simulated workers (default 16)"
    )
    parser.add_argument(
        "--policy",
        default="opt-kg",
        help="policy id, parameters after colons (default opt-kg; `crowdbudget policies`)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the crowd and the policy (default 0)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = start_service(Path(tmp) / "live.db")
        try:
            live = run_live(
                budget=args.budget,
                n_workers=args.workers,
                policy=args.policy,
                seed=args.seed,
                base_url=base,
            )
        except ServiceError as error:  # a refusal or no answer in time: one line, no traceback
            print(f"live_campaign: error: {error}", file=sys.stderr)
            raise SystemExit(1) from None
        finally:
            proc.kill()
            proc.wait()
    mean, std = offline_replay(args.policy, args.budget, 20)
    live["offline_accuracy_mean"], live["offline_accuracy_std"] = mean, std
    print(json.dumps(live, indent=2))


if __name__ == "__main__":
    main()
