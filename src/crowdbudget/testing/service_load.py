"""Load on several ``crowdbudget serve`` processes sharing one store, and the store's invariants.

What the multi-process test and ``benchmarks/bench_multiprocess.py`` share: worker threads
that send every request (ask for work, answer it) to a process drawn at random, so a label
usually reaches a process that did not hand out its assignment (or each campaign's requests
to one process, ``route="campaign"``); then a check of the event store
itself (not of what the servers say) that the run kept the campaign's promises:

- no server error (HTTP 5xx) and no refused request (a conflict or a lost race is the
  servers' business, never the client's);
- no double assignment: every assignment id is handed out once, to one worker, and no worker
  holds the same item twice;
- no overspend: ``spent + committed <= budget`` for every campaign (exact decimal sums);
- no lost label: every label a server acknowledged is in the store, with its value.

The servers are started by the caller (:class:`crowdbudget.service.local.LocalServer`); the
clients are the standard library's keep-alive ``http.client`` connections, one per thread and
process, so the load generator takes little of the machine's CPU.
"""

from __future__ import annotations

import http.client
import json
import select
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlsplit

import numpy as np
import sqlalchemy as sa

from crowdbudget.campaign.store import EventStore


def create_database(admin_url: str, prefix: str = "crowdbudget_test") -> tuple[str, str]:
    """A new, empty PostgreSQL database next to ``admin_url`` (a maintenance database such
    as ``postgres`` on a server that lets its user create databases): its URL and name
    (``prefix`` and 12 random hex digits; drop it with :func:`drop_database`)."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return admin_url.rsplit("/", 1)[0] + "/" + name, name


def drop_database(admin_url: str, name: str) -> None:
    """Drop the database ``name`` made by :func:`create_database` (its sessions closed)."""
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@dataclass
class LoadCampaign:
    """A campaign under load: its id and one bearer token per worker."""

    campaign_id: str
    worker_tokens: list[str]


@dataclass
class LoadResult:
    """What the clients saw: status codes per request kind, the labels acknowledged
    (``(campaign id, assignment id, label)``), which worker got each assignment id, the
    round trips and the wall time."""

    statuses: Counter[tuple[str, int]] = field(default_factory=Counter)
    acknowledged: list[tuple[str, str, str]] = field(default_factory=list)
    handed_out: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    round_trips: int = 0
    seconds: float = 0.0
    failures: list[tuple[str, int, str]] = field(default_factory=list)  # the first few
    #: seconds from sending each request to the last byte of its answer, per kind
    #: (``"next"``, ``"label"``), answered or not
    latencies: dict[str, list[float]] = field(default_factory=dict)

    def percentile(self, kind: str, q: float) -> float:
        """The ``q``-th percentile (0-100) of the ``kind`` requests' latencies, in ms."""
        values = self.latencies.get(kind, [])
        return float(np.percentile(values, q)) * 1000 if values else float("nan")

    @property
    def server_errors(self) -> int:
        return sum(n for (_, code), n in self.statuses.items() if code >= 500)

    @property
    def refused(self) -> int:
        """Requests answered 4xx (none expected from well-behaved workers)."""
        return sum(n for (_, code), n in self.statuses.items() if 400 <= code < 500)


class _Connections:
    """One keep-alive connection per server for one thread (reopened after an error: the
    server may close the connection after a 5xx)."""

    def __init__(self, urls: list[str], timeout: float) -> None:
        self._targets = [(urlsplit(u).hostname or "", urlsplit(u).port or 80) for u in urls]
        self._timeout = timeout
        self._open: dict[int, http.client.HTTPConnection] = {}

    def post(self, k: int, path: str, token: str, body: dict[str, str] | None) -> tuple[int, bytes]:
        conn = self._open.get(k)
        if conn is not None and _closed_by_peer(conn):
            # the server closed this idle keep-alive connection (uvicorn after its keep-alive
            # timeout): a request sent on it would get no answer although the server never
            # read it; open a new one, as urllib3 and httpcore do before reusing a connection
            conn.close()
            conn = None
        if conn is None:
            host, port = self._targets[k]
            conn = self._open[k] = http.client.HTTPConnection(host, port, timeout=self._timeout)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        try:
            conn.request("POST", path, body=json.dumps(body or {}), headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as error:
            conn.close()
            del self._open[k]
            return 599, repr(error).encode()  # no answer: counted as a server error
        if response.status >= 500 or response.getheader("connection", "") == "close":
            conn.close()
            del self._open[k]
        return response.status, data

    def close(self) -> None:
        for conn in self._open.values():
            conn.close()


def _closed_by_peer(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle keep-alive connection is readable: between requests the server sends
    nothing, so readable means it closed its end (end of file)."""
    sock = conn.sock
    if sock is None:
        return False
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def run_load(
    urls: list[str],
    campaigns: list[LoadCampaign],
    *,
    n_threads: int,
    seconds: float | None = None,
    n_classes: int = 2,
    seed: int = 0,
    timeout: float = 60.0,
    route: str = "random",
) -> LoadResult:
    """Worker threads loop "ask for work, answer it", each request to a random server.

    Args:
        urls: the servers' base URLs (``http://127.0.0.1:PORT``).
        campaigns: the campaigns and their workers' tokens; the workers are dealt to the
            threads round-robin, and a thread serves its workers in turn.
        n_threads: client threads.
        seconds: stop after this long; None: run until no worker gets more work (every
            campaign has spent its budget or stopped).
        n_classes: labels are ``str(k % n_classes)`` for the k-th answer of a thread.
        seed: the servers each request goes to and the answers (``default_rng([seed, t])``
            for thread t).
        timeout: seconds a request may take before it counts as a server error.
        route: ``"random"`` — every request to a server drawn at random (the worst case: a
            campaign's consecutive requests land on different processes); ``"campaign"`` —
            campaign k's requests to server k mod n (a load balancer hashing the campaign id
            in the path: campaigns spread across processes).

    Returns:
        A :class:`LoadResult`; check the store with :func:`check_store`.
    """
    if route not in ("random", "campaign"):
        raise ValueError(f"route must be 'random' or 'campaign', got {route!r}")
    home = {c.campaign_id: k % len(urls) for k, c in enumerate(campaigns)}
    workers = [(c.campaign_id, token) for c in campaigns for token in c.worker_tokens]
    shares = [workers[t::n_threads] for t in range(n_threads)]
    result = LoadResult()
    lock = threading.Lock()
    deadline = None if seconds is None else time.perf_counter() + seconds

    def loop(t: int) -> None:
        rng = np.random.default_rng([seed, t])

        def server(cid: str) -> int:
            return home[cid] if route == "campaign" else int(rng.integers(len(urls)))

        conns = _Connections(urls, timeout)
        mine = shares[t]
        statuses: Counter[tuple[str, int]] = Counter()
        latencies: dict[str, list[float]] = {"next": [], "label": []}
        acknowledged: list[tuple[str, str, str]] = []
        handed: list[tuple[str, str, str]] = []
        failures: list[tuple[str, int, str]] = []
        active = list(range(len(mine)))
        k = 0
        try:
            while active and (deadline is None or time.perf_counter() < deadline):
                slot = active[k % len(active)]
                cid, token = mine[slot]
                sent = time.perf_counter()
                code, data = conns.post(
                    server(cid), f"/v1/campaigns/{cid}/assignments", token, None
                )
                latencies["next"].append(time.perf_counter() - sent)
                statuses["next", code] += 1
                if code == 204:
                    active.remove(slot)  # this worker has nothing left
                    continue
                if code != 200:
                    failures.append(("next", code, data[:200].decode(errors="replace")))
                    k += 1
                    continue
                assignment_id = json.loads(data)["assignment_id"]
                handed.append((cid, assignment_id, token))
                label = str(int(rng.integers(n_classes)))
                sent = time.perf_counter()
                code, data = conns.post(
                    server(cid),
                    f"/v1/campaigns/{cid}/assignments/{assignment_id}/label",
                    token,
                    {"label": label},
                )
                latencies["label"].append(time.perf_counter() - sent)
                statuses["label", code] += 1
                if code == 200:
                    acknowledged.append((cid, assignment_id, label))
                else:
                    failures.append(("label", code, data[:200].decode(errors="replace")))
                k += 1
        finally:
            conns.close()
        with lock:
            result.statuses.update(statuses)
            for kind, values in latencies.items():
                result.latencies.setdefault(kind, []).extend(values)
            result.acknowledged.extend(acknowledged)
            result.failures.extend(failures[: max(0, 20 - len(result.failures))])
            for cid, assignment_id, token in handed:
                result.handed_out.setdefault((cid, assignment_id), set()).add(token)
            result.round_trips += len(acknowledged)

    threads = [threading.Thread(target=loop, args=(t,)) for t in range(n_threads)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    result.seconds = time.perf_counter() - start
    return result


def check_store(db_url: str, result: LoadResult) -> dict[str, int]:
    """The invariants of the module docstring, read from the event store at ``db_url``.

    Returns counts (campaigns, events, assignments, labels in the store); raises
    ``AssertionError`` naming the first broken invariant."""
    store = EventStore(db_url)
    try:
        counts = Counter[str]()
        by_campaign: dict[str, dict[str, str]] = {}
        assignment_ids: dict[str, dict[str, dict[str, object]]] = {}
        for campaign_id in store.campaign_ids():
            events = list(store.events(campaign_id))
            seqs = [e.seq for e in events]
            assert seqs == list(range(1, len(seqs) + 1)), f"{campaign_id}: event numbers have gaps"
            budget = Decimal(repr(float(events[0].payload["budget"])))
            spent = committed = Decimal(0)
            records: dict[str, dict[str, object]] = {}
            held: set[tuple[int, str]] = set()
            labels: dict[str, str] = {}
            classes = events[0].payload["classes"]
            for event in events:
                p = event.payload
                if event.kind == "assigned":
                    assert p["id"] not in records, f"{campaign_id}: assignment {p['id']} twice"
                    pair = (int(p["item"]), str(p["worker"]))
                    assert pair not in held, f"{campaign_id}: {pair} assigned twice"
                    held.add(pair)
                    records[p["id"]] = {"pair": pair, "price": p["price"], "status": "pending"}
                    committed += Decimal(repr(float(p["price"])))
                    counts["assignments"] += 1
                elif event.kind in ("labeled", "released"):
                    record = records[p["id"]]
                    assert record["status"] == "pending", f"{campaign_id}: {p['id']} closed twice"
                    price = Decimal(repr(float(record["price"])))  # type: ignore[arg-type]
                    committed -= price
                    if event.kind == "labeled":
                        record["status"] = "answered"
                        spent += price
                        labels[p["id"]] = classes[int(p["label"])]
                        counts["labels"] += 1
                    else:
                        record["status"] = p["reason"]
                        held.discard(record["pair"])
                assert spent + committed <= budget, f"{campaign_id}: overspent at {event.seq}"
            counts["campaigns"] += 1
            counts["events"] += len(events)
            by_campaign[campaign_id] = labels
            assignment_ids[campaign_id] = records
        assigned = {cid: set(records) for cid, records in assignment_ids.items()}
        for (campaign_id, assignment_id), tokens in result.handed_out.items():
            assert len(tokens) == 1, f"{campaign_id}: {assignment_id} handed to two workers"
            assert assignment_id in assigned.get(campaign_id, ()), (
                f"{campaign_id}: assignment {assignment_id} was handed out but is not stored"
            )
        for campaign_id, assignment_id, label in result.acknowledged:
            stored = by_campaign.get(campaign_id, {}).get(assignment_id)
            assert stored == label, f"{campaign_id}: acknowledged label {assignment_id} lost"
        return dict(counts)
    finally:
        store.dispose()
