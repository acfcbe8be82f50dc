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

``--client wrk`` replaces the client threads by the wrk load generator (C; Debian's ``wrk``
package) running ``label_round_trip.lua``: ``--connections`` concurrent round trips in all
(one wrk process per server, one connection per wrk thread, campaign routing), an offered
load high enough that the servers, not the clients, are the limit, at a third of the client
threads' CPU per label. The case then also reports PostgreSQL's commits and WAL fsyncs per
label (``pg_stat_database``, ``pg_stat_wal``): how large the group commits were.

Needs a PostgreSQL server: ``--postgres URL`` of a maintenance database (``postgres``) that
may create databases, or ``$CROWDBUDGET_POSTGRES_URL`` (``source .ci/postgres.sh`` starts a
throw-away one on loopback). Run from the repository root:

    python benchmarks/bench_multiprocess.py [--processes 1,2,4] [--campaigns 8] [--seconds 20]
        [--threads 8] [--route campaign,random] [--repeat 1] [--sqlite] [--json out.json]
        [--synchronous-commit on|off] [--commit-delay MICROSECONDS] [--history LABELS]
        [--client threads|wrk] [--connections 64] [--workers 16]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import resource
import shutil
import signal
import subprocess
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
    LoadResult,
    check_store,
    create_database,
    drop_database,
    run_load,
)

#: the wrk script of ``--client wrk`` (next to this file)
WRK_SCRIPT = Path(__file__).with_name("label_round_trip.lua")

#: ``serve`` flags of every process: no per-key request rate. The rate limiter is per process
#: (a token bucket per key in each), so with it N processes would grant N times the rate and
#: "scale" by the quota alone; the benchmark measures what the processes can carry.
SERVE_FLAGS = ["--requests-per-second-per-key", "1000000", "--request-burst-per-key", "1000000"]


def _start(db_url: str, n: int) -> list[LocalServer]:
    servers = [LocalServer(db_url, extra_args=SERVE_FLAGS, start_timeout=180) for _ in range(n)]
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


def _stop(servers: list[LocalServer]) -> None:
    """SIGTERM (uvicorn shuts down and the interpreter's exit handlers run: a profiler hooked
    in with ``sitecustomize`` can write its file), then SIGKILL whatever is left after 15 s."""
    for server in servers:
        if server.pid is not None:
            os.kill(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for server in servers:
        process = server._process  # LocalServer has no wait of its own
        if process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        server.stop()


def _set_database(admin_url: str, name: str, setting: str, value: str) -> None:
    """A PostgreSQL setting for every later session of the database ``name``."""
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'ALTER DATABASE "{name}" SET {setting} = {value}'))
    admin.dispose()


def _postgres_pids(admin_url: str) -> list[int]:
    """The PostgreSQL server's processes (the postmaster and its children; Linux ``/proc``),
    when this user may read its data directory; else none (its CPU is then not reported)."""
    admin = sa.create_engine(admin_url)
    try:
        with admin.connect() as conn:
            data = conn.execute(sa.text("SHOW data_directory")).scalar_one()
        postmaster = int((Path(data) / "postmaster.pid").read_text().split()[0])
    except (sa.exc.SQLAlchemyError, OSError, ValueError):
        return []
    finally:
        admin.dispose()
    children = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == postmaster:
            children.append(int(stat.parent.name))
    return [postmaster, *children]


def _wal_counters(admin_url: str | None, db_url: str) -> tuple[float, float]:
    """PostgreSQL's commits in the benchmark's database so far (``pg_stat_database``) and
    the server's WAL flushes so far (``pg_stat_wal.wal_sync``, PostgreSQL 14+: the fsyncs a
    commit waits for); NaN when not available (SQLite, an older server). The statistics are
    those the server has published, at most ``stats_fetch_consistency`` old: a snapshot
    is taken in a new session after the load ended."""
    if admin_url is None:
        return math.nan, math.nan
    name = db_url.rsplit("/", 1)[1]
    admin = sa.create_engine(admin_url)
    try:
        with admin.connect() as conn:
            conn.execute(sa.text("SELECT pg_stat_force_next_flush()"))
            commits = conn.execute(
                sa.text("SELECT xact_commit FROM pg_stat_database WHERE datname = :n"), {"n": name}
            ).scalar_one()
            syncs = conn.execute(sa.text("SELECT wal_sync FROM pg_stat_wal")).scalar_one()
    except sa.exc.SQLAlchemyError:
        return math.nan, math.nan
    finally:
        admin.dispose()
    return float(commits), float(syncs)


def _machine_ticks() -> tuple[int, int]:
    """All CPU ticks of the machine so far and the idle ones (``/proc/stat``)."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return sum(values), values[3] + values[4]  # idle + iowait


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


def run_wrk(
    urls: list[str], campaigns: list[LoadCampaign], connections: int, seconds: float
) -> tuple[LoadResult, dict[str, float]]:
    """``run_load`` with campaign routing, the clients being wrk (C, one event loop per
    thread; ``label_round_trip.lua``): one wrk process per server, with ``connections / n``
    connections (one per wrk thread) over the workers of that server's campaigns (campaign k
    on server k mod n). What the clients saw is read back from the script's per-thread logs.

    Returns the result and the clients' figures: CPU seconds of the wrk processes (user +
    system, ``RUSAGE_CHILDREN``: the servers are not reaped meanwhile) and wrk's latency
    percentiles over both request kinds (the longest-running process's)."""
    n = len(urls)
    per_server = max(connections // n, 1)
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        for k, url in enumerate(urls):
            lines = [
                f"{c.campaign_id} {token}\n"
                for j, c in enumerate(campaigns)
                if j % n == k
                for token in c.worker_tokens
            ]
            if len(lines) < per_server:
                raise ValueError(
                    f"server {k} has {len(lines)} workers for {per_server} connections: give "
                    "more --workers (a worker's round trips must not overlap)"
                )
            workers = Path(tmp) / f"workers{k}.txt"
            workers.write_text("".join(lines))
            env = dict(os.environ, CB_WORKERS=str(workers), CB_THREADS=str(per_server))
            env["CB_LOG"] = str(Path(tmp) / f"s{k}-")
            command = ["wrk", "-t", str(per_server), "-c", str(per_server)]
            command += ["-d", f"{seconds:g}s", "--timeout", "60s", "-s", str(WRK_SCRIPT), url]
            jobs.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True))
        outputs = [job.communicate()[0] for job in jobs]
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = LoadResult()
        for log in sorted(Path(tmp).glob("s*.log")):
            for line in log.read_text().splitlines():
                kind, cid, aid, extra, status = line.split(" ")
                code = int(status)
                result.statuses["next" if kind == "A" else "label", code] += 1
                if kind == "A" and code == 200:
                    result.handed_out.setdefault((cid, aid), set()).add(extra)
                elif kind == "L" and code == 200:
                    result.acknowledged.append((cid, aid, extra))
                    result.round_trips += 1
                elif code != 200 and len(result.failures) < 20:
                    result.failures.append((kind, code, aid))
    figures = {"client_cpu": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime}
    summaries = []
    for output in outputs:
        summary = next((ln for ln in output.splitlines() if ln.startswith("WRK ")), None)
        if summary is None:
            raise RuntimeError(f"wrk gave no summary:\n{output}")
        summaries.append(dict(field.split("=") for field in summary.split()[1:]))
    result.seconds = max(float(s["seconds"]) for s in summaries)
    slowest = max(summaries, key=lambda s: float(s["seconds"]))
    figures["p50_ms"], figures["p99_ms"] = float(slowest["p50_ms"]), float(slowest["p99_ms"])
    # socket errors and timeouts: requests without an answer
    unanswered = sum(int(s["errors"]) + int(s["timeouts"]) for s in summaries)
    if unanswered:
        result.statuses["wrk", 599] += unanswered
    return result, figures


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
        database_pids = _postgres_pids(args.postgres) if not args.sqlite else []
        database_before = {pid: _cpu_seconds(pid) for pid in database_pids}
        wal_before = _wal_counters(None if args.sqlite else args.postgres, db_url)
        ticks_before = _machine_ticks()
        if args.client == "wrk":
            result, figures = run_wrk(urls, campaigns, args.connections, args.seconds)
        else:
            result = run_load(
                urls,
                campaigns,
                n_threads=args.threads,
                seconds=args.seconds,
                seed=n_processes,
                route=route,
            )
            figures = {}
        server_cpu = [
            _cpu_seconds(pid) - before for pid, before in zip(pids, cpu_before, strict=True)
        ]
        client_cpu = figures.get("client_cpu", _cpu_seconds() - client_before)
        # backends of sessions that ended meanwhile (NaN) are not counted, nor those that
        # started: the servers' sessions are long-lived, so this misses little
        database_deltas = [_cpu_seconds(pid) - before for pid, before in database_before.items()]
        database_cpu = sum(d for d in database_deltas if not math.isnan(d))
        ticks_after = _machine_ticks()
        # the servers' sessions publish their statistics when idle (at most 1 s later)
        time.sleep(1.5)
        wal_after = _wal_counters(None if args.sqlite else args.postgres, db_url)
        ticks = [after - before for after, before in zip(ticks_after, ticks_before, strict=True)]
        load_after = os.getloadavg()[0]
    finally:
        _stop(servers)
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
        "database_cpu_ms_per_label": 1000 * database_cpu / max(result.round_trips, 1),
        # PostgreSQL commits and WAL fsyncs per label (two events per round trip: fewer
        # than 2 commits per label means group commits; fsyncs below commits, that
        # PostgreSQL's own group commit merged several sessions' flushes)
        "commits_per_label": (wal_after[0] - wal_before[0]) / max(result.round_trips, 1),
        "wal_syncs_per_label": (wal_after[1] - wal_before[1]) / max(result.round_trips, 1),
        # the cores this benchmark kept busy (servers, clients, database) and the machine's
        # busy share in all (other jobs included): 1.0 means no core was idle
        "cores_used": (sum(server_cpu) + client_cpu + database_cpu) / result.seconds,
        "machine_busy": 1 - ticks[1] / max(ticks[0], 1),
        # wrk: its percentiles over both request kinds, in both columns
        "next_p50_ms": figures.get("p50_ms", result.percentile("next", 50)),
        "next_p99_ms": figures.get("p99_ms", result.percentile("next", 99)),
        "label_p50_ms": figures.get("p50_ms", result.percentile("label", 50)),
        "label_p99_ms": figures.get("p99_ms", result.percentile("label", 99)),
        "unanswered": sum(n for (_, code), n in result.statuses.items() if code == 599),
        "server_errors": result.server_errors,
        "failures": [" ".join(map(str, f)) for f in result.failures[:5]],
        "refused": result.refused,
        "stored_labels": counts.get("labels", 0),
        "events": counts.get("events", 0),
        "load_before": load_before,
        "load_after": load_after,
    }


def _print_row(r: dict[str, float | str]) -> None:
    print(
        f"| {r['store']} | {r['route']} | {r['processes']} | {r['labels_per_s']:.0f} | "
        f"{r['next_p50_ms']:.1f} / {r['next_p99_ms']:.1f} | "
        f"{r['label_p50_ms']:.1f} / {r['label_p99_ms']:.1f} | "
        f"{r['server_cpu_ms_per_label']:.2f} ({r['per_process_cpu_ms_per_label']}) / "
        f"{r['client_cpu_ms_per_label']:.2f} / {r['database_cpu_ms_per_label']:.2f} | "
        f"{r['cores_used']:.2f} ({r['machine_busy']:.0%}) | "
        f"{r['commits_per_label']:.3f} / {r['wal_syncs_per_label']:.3f} | "
        f"{r['labels']:,} ({r['stored_labels']:,}) | "
        f"{r['server_errors']} ({r['unanswered']}) | {r['refused']} | "
        f"{r['load_before']:.2f} / {r['load_after']:.2f} |",
        flush=True,
    )
    for failure in r.get("failures", []):  # type: ignore[union-attr]
        print(f"    {failure}", flush=True)


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
    parser.add_argument("--threads", type=int, default=8, help="client threads (--client threads)")
    parser.add_argument(
        "--client",
        choices=["threads", "wrk"],
        default="threads",
        help="threads: Python http.client threads in this process (any route); wrk: the wrk "
        "load generator (C; apt-get install wrk), --connections concurrent round trips, "
        "campaign routing only",
    )
    parser.add_argument(
        "--connections",
        type=int,
        default=64,
        help="--client wrk: concurrent connections in all (split evenly over the processes; "
        "each needs a worker of its own: --workers x --campaigns / processes >= this / processes)",
    )
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
    parser.add_argument(
        "--commit-delay",
        type=int,
        default=0,
        help="PostgreSQL's commit_delay (microseconds, with commit_siblings 1) for the "
        "benchmark's database: a commit waits that long before its WAL flush when another "
        "transaction is in progress, so the processes' commits share fsyncs (durability "
        "unchanged)",
    )
    args = parser.parse_args()
    if args.client == "wrk" and args.route != "campaign":
        parser.error("--client wrk sends each campaign's requests to one process: --route campaign")
    if args.client == "wrk" and shutil.which("wrk") is None:
        parser.error("--client wrk needs wrk on the PATH (Debian: apt-get install wrk)")
    if not args.sqlite and not args.postgres:
        parser.error("give --postgres URL (or $CROWDBUDGET_POSTGRES_URL), or --sqlite")
    print(
        "| store | route | processes | labels/s | next p50 / p99 ms | label p50 / p99 ms "
        "| CPU ms per label: servers (per process) / clients / database | cores used "
        "(machine busy) | commits / WAL fsyncs per label | labels (stored) "
        "| server errors (unanswered) | refused "
        "| load 1-min before / after |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
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
                _set_database(args.postgres, name, "synchronous_commit", args.synchronous_commit)
                if args.commit_delay:
                    _set_database(args.postgres, name, "commit_delay", str(args.commit_delay))
                    _set_database(args.postgres, name, "commit_siblings", "1")
                try:
                    r = bench(url, args, n, route)
                finally:
                    drop_database(args.postgres, name)
            store = f"postgresql sc={args.synchronous_commit}"
            if args.client == "wrk":
                store += f" wrk c={args.connections}"
            if args.commit_delay:
                store += f" cd={args.commit_delay}"
            r["store"] = "sqlite" if args.sqlite else store
            rows.append(r)
            _print_row(r)
            time.sleep(1)
    if args.json:
        meta = {"python": platform.python_version(), "cpus": os.cpu_count()}
        Path(args.json).write_text(json.dumps({"machine": meta, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
