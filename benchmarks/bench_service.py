"""Live-campaign service: label round trips per second and request latency (p50 / p99).

Starts ``crowdbudget serve`` (uvicorn, one process) on loopback with a SQLite file, creates a
campaign of n_items binary items (Opt-KG, budget large enough never to run out), and lets
``--clients`` threads loop "ask for an assignment, submit a label" (keep-alive HTTP
connections of the standard library's ``http.client``, no thinking time) for ``--seconds``.
The clients are real HTTP over loopback, in this process (one process, separate from the
server's, on the same machine: their CPU is reported so it can be told apart).

Reports round trips per second, the latency percentiles of each request kind as the client
sees them (send to last byte of the answer), the 1-minute load average before and after the
case (other jobs on the machine show there), and the CPU time per round trip of the server
and of the client (Linux ``/proc``; the server's is the number that does not depend on how
busy the machine is). Run from the repository root:

    python benchmarks/bench_service.py [--items 10000,100000] [--clients 8,16] [--seconds 10]
        [--policies opt-kg,opt-kg:posterior=one-coin] [--workers 200] [--repeat 1]
        [--json out.json]

``--warm`` makes one round trip before the timed window, so the campaign's first decision (where
a worker-aware policy scores every (item, worker) pair once) is not counted per round trip.

A worker who has labelled every item gets no more work (204); a new worker is registered in
its place (counted in the workers column as "+N new"), so small campaigns keep their load.

``--workers W`` registers W workers and lets each client thread act for W / clients of them
in turn (a worker asks, labels, and the thread moves to its next worker), so worker-aware
policies see a crowd rather than one worker per thread; labels are a seeded draw.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from crowdbudget.service.local import free_port as _free_port


def _cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of a process (this one by default); NaN off Linux."""
    if pid is None:
        t = os.times()
        return t.user + t.system
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> float:
    return os.getloadavg()[0]


def _start(db: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "crowdbudget",
            "serve",
            "--db",
            f"sqlite:///{db}",
            "--port",
            str(port),
            # throughput is measured, not the per-key rate limit (a client here is a script
            # with no thinking time, far above any person's request rate)
            "--requests-per-second-per-key",
            "1000000",
            "--request-burst-per-key",
            "1000000",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            httpx.get(f"{base}/openapi.json", timeout=0.5)
            return proc, base
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the service did not start")


def bench(
    n_items: int,
    clients: int,
    seconds: float,
    policy: str = "opt-kg",
    workers: int = 0,
    warm: bool = False,
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        proc, base = _start(Path(tmp) / "bench.db")
        try:
            setup = httpx.Client(base_url=base, timeout=30)
            t0 = time.perf_counter()
            created = setup.post(
                "/v1/campaigns",
                json={
                    "items": [f"i{k}" for k in range(n_items)],
                    "budget": 10**9,
                    "policy": policy,
                },
            ).json()
            create_s = time.perf_counter() - t0
            cid, key = created["campaign_id"], created["requester_key"]
            host, port = base.removeprefix("http://").split(":")
            boss = {"Authorization": f"Bearer {key}"}
            tokens = [
                setup.post(
                    f"/v1/campaigns/{cid}/workers", json={"worker_id": f"w{k}"}, headers=boss
                ).json()["worker_token"]
                for k in range(max(workers, clients))
            ]
            if warm:
                # the campaign's first decision builds the policy's state (a worker-aware
                # policy: every (item, worker) pair), a cost per campaign, not per round trip
                first = setup.post(
                    f"/v1/campaigns/{cid}/assignments",
                    headers={"Authorization": f"Bearer {tokens[0]}"},
                ).json()
                setup.post(
                    f"/v1/campaigns/{cid}/assignments/{first['assignment_id']}/label",
                    json={"label": "1"},
                    headers={"Authorization": f"Bearer {tokens[0]}"},
                )
            # client thread k acts for workers k, k + clients, k + 2 * clients, ...
            per_client = [tokens[k::clients] for k in range(clients)]
            latencies: dict[str, list[float]] = {"next": [], "label": []}
            replaced: list[int] = []  # workers each thread registered to replace done ones
            lock = threading.Lock()
            stop = time.perf_counter() + seconds

            def loop(my_tokens: list[str], k: int) -> None:
                # the standard library's HTTP client: several times cheaper per request than
                # httpx, so less of the two shared cores goes to the load generator
                mine: dict[str, list[float]] = {"next": [], "label": []}
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
                rng = np.random.default_rng(k)
                turn = 0
                fresh = 0
                while time.perf_counter() < stop:
                    slot = turn % len(my_tokens)
                    token = my_tokens[slot]
                    turn += 1
                    headers = {
                        "Authorization": f"Bearer {token}",
                        "Content-Type": "application/json",
                    }
                    body = json.dumps({"label": str(int(rng.integers(2)))})
                    a = time.perf_counter()
                    conn.request("POST", f"/v1/campaigns/{cid}/assignments", headers=headers)
                    response = conn.getresponse()
                    data = response.read()
                    if response.status == 204:
                        # this worker has labelled every item (a worker labels an item at
                        # most once): a new worker takes its place, as in a crowd
                        fresh += 1
                        my_tokens[slot] = _new_worker(conn, cid, key, f"w{k}-{fresh}")
                        continue
                    work = json.loads(data)
                    assert response.status == 200, work
                    b = time.perf_counter()
                    conn.request(
                        "POST",
                        f"/v1/campaigns/{cid}/assignments/{work['assignment_id']}/label",
                        body=body,
                        headers=headers,
                    )
                    response = conn.getresponse()
                    response.read()
                    assert response.status == 200, response.status
                    c = time.perf_counter()
                    mine["next"].append(b - a)
                    mine["label"].append(c - b)
                conn.close()
                with lock:
                    replaced.append(fresh)
                    for kind in mine:
                        latencies[kind].extend(mine[kind])

            threads = [
                threading.Thread(target=loop, args=(mine, k)) for k, mine in enumerate(per_client)
            ]
            load_before = _load()
            server_cpu, client_cpu = _cpu_seconds(proc.pid), _cpu_seconds()
            start = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            elapsed = time.perf_counter() - start
            server_cpu = _cpu_seconds(proc.pid) - server_cpu
            client_cpu = _cpu_seconds() - client_cpu
            load_after = _load()
        finally:
            proc.kill()
            proc.wait()
    n = len(latencies["label"])
    out: dict[str, Any] = {"policy": policy, "n_items": n_items, "clients": clients}
    out["workers"], out["create_s"] = max(workers, clients), create_s
    out["workers_replaced"] = sum(replaced)
    out["load_before"], out["load_after"] = load_before, load_after
    out["round_trips_per_s"] = n / elapsed
    out["server_cpu_ms_per_round_trip"] = 1000 * server_cpu / n
    out["client_cpu_ms_per_round_trip"] = 1000 * client_cpu / n
    for kind, values in latencies.items():
        arr = np.asarray(values) * 1000
        out[f"{kind}_p50_ms"] = float(np.percentile(arr, 50))
        out[f"{kind}_p99_ms"] = float(np.percentile(arr, 99))
    return out


def _new_worker(conn: http.client.HTTPConnection, cid: str, key: str, worker_id: str) -> str:
    """Register a worker on the keep-alive connection ``conn``; its bearer token."""
    conn.request(
        "POST",
        f"/v1/campaigns/{cid}/workers",
        body=json.dumps({"worker_id": worker_id}),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    data = response.read()
    assert response.status in (200, 201), data
    return str(json.loads(data)["worker_token"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", default="10000,100000")
    parser.add_argument("--clients", default="8", help="comma-separated client counts")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--policies", default="opt-kg", help="comma-separated policy ids")
    parser.add_argument("--workers", type=int, default=0, help="workers (default: one a client)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of every case, interleaved")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="one round trip before the timed window (the campaign's first decision)",
    )
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    cases = [
        (policy, int(n), int(c))
        for policy in args.policies.split(",")
        for n in args.items.split(",")
        for c in args.clients.split(",")
    ]
    print(
        "| policy | n_items | clients | workers | load 1-min before / after | round trips/s "
        "| next p50 / p99 ms | label p50 / p99 ms | server / client CPU ms per round trip |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for _ in range(args.repeat):
        for policy, n_items, clients in cases:
            r = bench(n_items, clients, args.seconds, policy, args.workers, args.warm)
            rows.append(r)
            extra = f" (+{r['workers_replaced']} new)" if r["workers_replaced"] else ""
            print(
                f"| `{r['policy']}` | {r['n_items']:,} | {r['clients']} | {r['workers']}{extra} | "
                f"{r['load_before']:.2f} / {r['load_after']:.2f} | "
                f"{r['round_trips_per_s']:.0f} | "
                f"{r['next_p50_ms']:.1f} / {r['next_p99_ms']:.1f} | "
                f"{r['label_p50_ms']:.1f} / {r['label_p99_ms']:.1f} | "
                f"{r['server_cpu_ms_per_round_trip']:.2f} / "
                f"{r['client_cpu_ms_per_round_trip']:.2f} |",
                flush=True,
            )
    if args.json:
        meta = {"python": platform.python_version(), "machine": platform.machine()}
        Path(args.json).write_text(json.dumps({"machine": meta, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
