"""Several ``crowdbudget serve`` processes on one PostgreSQL: throughput against processes.

For each process count (``--processes 1,2,4``): a fresh PostgreSQL database, that many
``crowdbudget serve`` processes on it (loopback, free ports), ``--campaigns`` campaigns of
``--items`` binary items (Opt-KG, a budget that never runs out) with ``--workers`` workers
each, and ``--threads`` client threads that loop "ask for work, answer it" for ``--seconds``,
every request to a process drawn at random or each campaign's to one process (``--route``;
``crowdbudget.testing.service_load.run_load``).
Then the invariants are checked from the store itself (``check_store``: no double assignment,
no overspend, no lost label) and the case reports labels per second, server errors and
refused requests, the servers' CPU time per label (all processes, and per process; Linux
``/proc``) and the clients' (this process): the numbers that say whether more cores would carry
more processes, and the 1-minute load average before and after.

Where a label round trip's time goes (PostgreSQL on the same machine): each of its two requests
waits for its event's commit, and with ``synchronous_commit = on`` (PostgreSQL's default) a
commit waits for the WAL fsync — several milliseconds on a virtual disk (``pg_test_fsync``). The
clients are closed loops, so throughput is about ``threads`` / (2 × commit latency) whatever the
number of processes: the processes' group commits only split the same requests into smaller
batches. ``--synchronous-commit off`` (the operator's choice: a crash may lose the last few
acknowledged labels, never corrupt the store) takes the fsync off the round trip, and the
server's CPU becomes the limit. The clients run in this
process; CPU is shared with the servers and the database, so on a small machine the curve
shows the cost of coordination more than capacity.

Needs a PostgreSQL server: ``--postgres URL`` of a maintenance database (``postgres``) that
may create databases, or ``$CROWDBUDGET_POSTGRES_URL`` (``source .ci/postgres.sh`` starts a
throw-away one on loopback). Run from the repository root:

    python benchmarks/bench_multiprocess.py [--processes 1,2,4] [--campaigns 8] [--seconds 20]
        [--threads 8] [--route campaign,random] [--repeat 1] [--sqlite] [--json out.json]
        [--synchronous-commit on|off] [--history LABELS]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import threading
import time
from pathlib import Path

import httpx
import sqlalchemy as sa

from bench_service import _cpu_seconds  # this directory is on sys.path when run as a script
from crowdbudget.client import Client
from crowdbudget.service.local import LocalServer
from crowdbudget.testing.service_load import (
    LoadCampaign,
    check_store,
    create_database,
    drop_database,
    run_load,
)


def _start(db_url: str, n: int) -> list[LocalServer]:
    servers = [LocalServer(db_url, start_timeout=180) for _ in range(n)]
    threads = [threading.Thread(target=s.start) for s in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if any(not s.url for s in servers):
        for server in servers:
            server.stop()
        raise RuntimeError("a server did not start")
    return servers


def _set_synchronous_commit(admin_url: str, name: str, value: str) -> None:
    """``synchronous_commit`` for every session of the database ``name``."""
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'ALTER DATABASE "{name}" SET synchronous_commit = {value}'))
    admin.dispose()


def _import_history(url: str, cid: str, key: str, n_labels: int, n_items: int) -> None:
    """Give a campaign a history of ``n_labels`` labels collected elsewhere (workers ``h0``,
    ``h1``, … none of the load's), so that rebuilding it costs what a campaign that ran for
    a while costs."""
    rows = ["task,worker,label"]
    rows += [f"i{k % n_items},h{k // n_items},{k % 2}" for k in range(n_labels)]
    response = httpx.post(
        f"{url}/v1/campaigns/{cid}/labels/import",
        content="\n".join(rows).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "text/csv"},
        timeout=300,
    )
    response.raise_for_status()


def bench(
    db_url: str, args: argparse.Namespace, n_processes: int, route: str
) -> dict[str, float | str]:
    servers = _start(db_url, n_processes)
    try:
        urls = [s.url for s in servers]
        campaigns = []
        for c in range(args.campaigns):
            # campaigns spread across processes: created and set up on different ones
            created = Client(urls[c % n_processes], timeout=120).create_campaign(
                items=[f"i{k}" for k in range(args.items)], budget=10**9, seed=c
            )
            cid, key = created["campaign_id"], created["requester_key"]
            boss = Client(urls[(c + 1) % n_processes], key, timeout=120)
            tokens = [boss.add_worker(cid, f"w{k}")["worker_token"] for k in range(args.workers)]
            if args.history:
                _import_history(urls[c % n_processes], cid, key, args.history, args.items)
            campaigns.append(LoadCampaign(cid, tokens))
        load_before = os.getloadavg()[0]
        pids = [s.pid for s in servers if s.pid is not None]
        cpu_before = [_cpu_seconds(pid) for pid in pids]
        client_before = _cpu_seconds()
        result = run_load(
            urls,
            campaigns,
            n_threads=args.threads,
            seconds=args.seconds,
            seed=n_processes,
            route=route,
        )
        server_cpu = [
            _cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)
        ]
        client_cpu = _cpu_seconds() - client_before
        load_after = os.getloadavg()[0]
    finally:
        for server in servers:
            server.stop()
    counts = check_store(db_url, result)  # raises on a broken invariant
    return {
        "processes": n_processes,
        "route": route,
        "labels_per_s": result.round_trips / result.seconds,
        "labels": len(result.acknowledged),
        "server_cpu_ms_per_label": 1000 * sum(server_cpu) / max(result.round_trips, 1),
        "per_process_cpu_ms_per_label": " / ".join(
            f"{1000 * cpu / max(result.round_trips, 1):.2f}" for cpu in server_cpu
        ),
        "client_cpu_ms_per_label": 1000 * client_cpu / max(result.round_trips, 1),
        "server_errors": result.server_errors,
        "refused": result.refused,
        "stored_labels": counts.get("labels", 0),
        "events": counts.get("events", 0),
        "load_before": load_before,
        "load_after": load_after,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--campaigns", type=int, default=8)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=5, help="workers per campaign")
    parser.add_argument(
        "--history",
        type=int,
        default=0,
        help="labels imported into each campaign before the load (a campaign's rebuild "
        "replays them: what a lost race costs grows with them, a catch-up's does not)",
    )
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repeat", type=int, default=1, help="runs of every case, interleaved")
    parser.add_argument(
        "--route",
        default="campaign,random",
        help="campaign: a campaign's requests to one process (hash on its id); random: each "
        "request to any process",
    )
    parser.add_argument("--postgres", default=os.environ.get("CROWDBUDGET_POSTGRES_URL"))
    parser.add_argument("--sqlite", action="store_true", help="one SQLite file instead")
    parser.add_argument("--json", default=None)
    parser.add_argument(
        "--synchronous-commit",
        choices=["on", "off"],
        default="on",
        help="PostgreSQL's synchronous_commit for the benchmark's database (the operator's "
        "choice; off: a commit does not wait for the WAL fsync)",
    )
    args = parser.parse_args()
    if not args.sqlite and not args.postgres:
        parser.error("give --postgres URL (or $CROWDBUDGET_POSTGRES_URL), or --sqlite")
    print(
        "| store | route | processes | labels/s | servers' CPU ms per label (per process) "
        "| clients' CPU ms per label | labels (stored) | server errors | refused "
        "| load 1-min before / after |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for _ in range(args.repeat):
        for route, n in [
            (route, int(p)) for route in args.route.split(",") for p in args.processes.split(",")
        ]:
            if args.sqlite:
                with tempfile.TemporaryDirectory() as tmp:
                    r = bench(f"sqlite:///{Path(tmp) / 'bench.db'}", args, n, route)
            else:
                url, name = create_database(args.postgres, "crowdbudget_bench")
                _set_synchronous_commit(args.postgres, name, args.synchronous_commit)
                try:
                    r = bench(url, args, n, route)
                finally:
                    drop_database(args.postgres, name)
            r["store"] = "sqlite" if args.sqlite else f"postgresql sc={args.synchronous_commit}"
            rows.append(r)
            print(
                f"| {r['store']} | {route} | {n} | {r['labels_per_s']:.0f} | "
                f"{r['server_cpu_ms_per_label']:.2f} ({r['per_process_cpu_ms_per_label']}) | "
                f"{r['client_cpu_ms_per_label']:.2f} | "
                f"{r['labels']:,} ({r['stored_labels']:,}) | {r['server_errors']} | "
                f"{r['refused']} | {r['load_before']:.2f} / {r['load_after']:.2f} |",
                flush=True,
            )
            time.sleep(1)
    if args.json:
        meta = {"python": platform.python_version(), "cpus": os.cpu_count()}
        Path(args.json).write_text(json.dumps({"machine": meta, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
