"""The HTTP service: access control, the worker flow, 4xx on bad input, crash safety."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from crowdbudget.client import Client, ServiceError
from crowdbudget.service import create_app
from crowdbudget.service.local import free_port as _free_port
from service_helpers import bearer


@pytest.fixture
def api(tmp_path: Path) -> TestClient:
    return TestClient(create_app(f"sqlite:///{tmp_path / 'svc.db'}"))


def _campaign(api: TestClient, **extra: object) -> tuple[str, str]:
    body = {"items": ["a", "b", "c"], "budget": 4, "classes": ["no", "yes"], **extra}
    response = api.post("/v1/campaigns", json=body)
    assert response.status_code == 201, response.text
    data = response.json()
    return data["campaign_id"], data["requester_key"]


def _worker(api: TestClient, cid: str, key: str, name: str) -> str:
    response = api.post(
        f"/v1/campaigns/{cid}/workers", json={"worker_id": name}, headers=bearer(key)
    )
    assert response.status_code == 201, response.text
    return str(response.json()["worker_token"])


def test_openapi_and_access_control(api: TestClient) -> None:
    schema = api.get("/openapi.json").json()
    assert "/v1/campaigns/{campaign_id}/assignments" in schema["paths"]
    cid, key = _campaign(api)
    token = _worker(api, cid, key, "w1")
    assert api.get(f"/v1/campaigns/{cid}/status").status_code == 401
    assert api.get(f"/v1/campaigns/{cid}/status", headers=bearer("wrong")).status_code == 403
    assert api.get(f"/v1/campaigns/{cid}/status", headers=bearer(token)).status_code == 403
    assert api.post(f"/v1/campaigns/{cid}/assignments", headers=bearer(key)).status_code == 403
    other_cid, other_key = _campaign(api)
    assert api.get(f"/v1/campaigns/{cid}/status", headers=bearer(other_key)).status_code == 403
    # nothing changed by the refused calls: the events are ``created`` and w1's
    # ``workers_added`` (issuing a token registers the worker)
    assert api.get(f"/v1/campaigns/{cid}/status", headers=bearer(key)).json()["events"] == 2
    listed = api.get("/v1/campaigns", headers=bearer(key)).json()
    assert [c["campaign_id"] for c in listed] == [cid]
    # keys are stored hashed
    db = Path(api.app.state.service.store.url.removeprefix("sqlite:///")).read_bytes()  # type: ignore[attr-defined]
    assert key.encode() not in db and token.encode() not in db
    assert other_cid != cid


def test_worker_flow_idempotency_and_errors(api: TestClient) -> None:
    cid, key = _campaign(api)
    t1, t2 = _worker(api, cid, key, "w1"), _worker(api, cid, key, "w2")
    a = api.post(f"/v1/campaigns/{cid}/assignments", headers=bearer(t1)).json()
    url = f"/v1/campaigns/{cid}/assignments/{a['assignment_id']}/label"
    assert api.post(url, json={"label": "maybe"}, headers=bearer(t1)).status_code == 422
    assert api.post(url, json={"label": "yes"}, headers=bearer(t2)).status_code == 409
    assert api.post(url, json={}, headers=bearer(t1)).status_code == 422
    for _ in range(2):  # the same answer twice is recorded once
        r = api.post(url, json={"label": "yes"}, headers=bearer(t1))
        assert r.status_code == 200 and r.json()["status"] == "answered"
    assert api.post(url, json={"label": "no"}, headers=bearer(t1)).status_code == 409
    missing = f"/v1/campaigns/{cid}/assignments/nope/label"
    assert api.post(missing, json={"label": "yes"}, headers=bearer(t1)).status_code == 404
    assert api.get("/v1/campaigns/nope/status", headers=bearer(key)).status_code == 403
    status = api.get(f"/v1/campaigns/{cid}/status", headers=bearer(key)).json()
    assert status["n_labels"] == 1 and status["spent"] == 1
    export = api.get(f"/v1/campaigns/{cid}/export", headers=bearer(key)).text
    assert export.splitlines() == ["task,worker,label", f"{a['item_id']},w1,yes"]
    results = api.get(f"/v1/campaigns/{cid}/results", headers=bearer(key)).json()
    assert {r["task"] for r in results} == {"a", "b", "c"}


def test_budget_is_never_overspent_and_204_when_done(api: TestClient) -> None:
    cid, key = _campaign(api, budget=2)
    tokens = [_worker(api, cid, key, f"w{k}") for k in range(4)]
    got = [api.post(f"/v1/campaigns/{cid}/assignments", headers=bearer(t)) for t in tokens]
    assert [r.status_code for r in got] == [200, 200, 204, 204]


def test_a_422_names_every_bad_field(api: TestClient) -> None:
    response = api.post("/v1/campaigns", json={"items": ["a"], "budget": -3, "polcy": "x"})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert "budget" in detail and "polcy" in detail and "(and 1 more: " in detail


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"items": [], "budget": 3}, "items"),
        ({"items": ["a"], "budget": -3}, "budget"),
        ({"items": ["a", "a"], "budget": 3}, "appears more than once"),
        ({"items": ["a"], "budget": 3, "policy": "nope"}, "unknown policy"),
        ({"items": ["a"], "budget": 3, "classes": ["x"]}, "classes"),
    ],
)
def test_malformed_campaigns_get_422(api: TestClient, body: dict[str, object], needle: str) -> None:
    response = api.post("/v1/campaigns", json=body)
    assert response.status_code == 422
    assert needle in response.text


def _start(db: str, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "crowdbudget", "serve", "--db", db, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    # 60 s: on a loaded 2-core machine the process's imports alone took 17-22 s; a process
    # that exits early fails at once.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            httpx.get(f"http://127.0.0.1:{port}/openapi.json", timeout=0.5)
            return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"the service did not start (exit status {proc.poll()})")


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL is POSIX")
def test_kill_9_loses_no_acknowledged_label(tmp_path: Path) -> None:
    db, port = f"sqlite:///{tmp_path / 'crash.db'}", _free_port()
    proc = _start(db, port)
    base = f"http://127.0.0.1:{port}"
    try:
        anon = Client(base)
        created = anon.create_campaign(items=[f"i{k}" for k in range(50)], budget=200)
        cid, boss = created["campaign_id"], anon.with_key(created["requester_key"])
        workers = [anon.with_key(boss.add_worker(cid, f"w{k}")["worker_token"]) for k in range(8)]
        acknowledged: list[tuple[str, str, str]] = []
        k = 0
        while len(acknowledged) < 40:
            w = workers[k % len(workers)]
            k += 1
            work = w.next_assignment(cid)
            if work is None:
                continue
            w.submit_label(cid, work["assignment_id"], "1")
            acknowledged.append((work["item_id"], work["worker_id"], "1"))
        proc.send_signal(signal.SIGKILL)  # mid-stream, no shutdown
        proc.wait(timeout=10)
        proc = _start(db, port)
        exported = boss.export(cid).strip().splitlines()[1:]
        rows = [tuple(line.split(",")) for line in exported]
        assert sorted(rows) == sorted(acknowledged)  # every acknowledged label, exactly once
        work = workers[0].next_assignment(cid)  # the campaign continues
        assert work is not None
        workers[0].submit_label(cid, work["assignment_id"], "0")
        assert boss.status(cid)["n_labels"] == 41
        with pytest.raises(ServiceError) as refused:
            anon.with_key("bogus").status(cid)
        assert refused.value.status == 403
    finally:
        proc.kill()
        proc.wait(timeout=10)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


def _browser() -> str:
    if CHROMIUM is None:
        if os.environ.get("CROWDBUDGET_REQUIRE_BROWSER"):
            raise AssertionError("chromium is required (CI installs Debian's chromium)")
        pytest.skip("chromium not installed (CI installs it and sets CROWDBUDGET_REQUIRE_BROWSER)")
    return CHROMIUM


def test_dashboard_renders_charts_in_headless_chromium(tmp_path: Path) -> None:
    import numpy as np
    from matplotlib import image

    browser = _browser()
    db, port = f"sqlite:///{tmp_path / 'dash.db'}", _free_port()
    proc = _start(db, port)
    base = f"http://127.0.0.1:{port}"
    try:
        anon = Client(base)
        created = anon.create_campaign(items=[f"i{k}" for k in range(20)], budget=60, name="demo")
        cid, boss = created["campaign_id"], anon.with_key(created["requester_key"])
        rng = np.random.default_rng(0)
        for k in range(6):
            w = anon.with_key(boss.add_worker(cid, f"w{k}")["worker_token"])
            for _ in range(5):
                work = w.next_assignment(cid)
                if work is not None:
                    w.submit_label(cid, work["assignment_id"], str(int(rng.integers(2))))
        boss.put_gold(cid, {f"i{k}": str(k % 2) for k in range(12)})  # the calibration panel
        url = f"{base}/dashboard/{cid}#key={created['requester_key']}"
        common = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
        dom = subprocess.run(
            [*common, "--virtual-time-budget=4000", "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert 'data-ready="1"' in dom, dom[-2000:]
        assert dom.count("<polyline") >= 2 and dom.count("<rect") >= 5
        assert "campaign demo" in dom and ">30<" in dom  # labels received
        assert ">ECE (equal width)<" in dom and dom.count("<circle") >= 1  # gold: calibration
        shot = tmp_path / "dash.png"
        subprocess.run(
            [
                *common,
                "--virtual-time-budget=4000",
                "--window-size=1200,1400",  # the calibration panel is below the others
                f"--screenshot={shot}",
                url,
            ],
            capture_output=True,
            timeout=60,
            check=True,
        )
        pixels = image.imread(shot)[..., :3]
        blue = np.all(np.abs(pixels - np.array([0x25, 0x63, 0xEB]) / 255) < 0.08, axis=-1)
        purple = np.all(np.abs(pixels - np.array([0x7C, 0x3A, 0xED]) / 255) < 0.08, axis=-1)
        assert blue.sum() > 100 and purple.sum() > 100  # the spend line and the bars are drawn
        cyan = np.all(np.abs(pixels - np.array([0x6B, 0xBD, 0xD3]) / 255) < 0.08, axis=-1)
        assert cyan.sum() > 100  # the reliability diagram's bars (#0891b2 at 60% on white)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_concurrent_workers_never_overspend_or_share_an_assignment(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    db, port = f"sqlite:///{tmp_path / 'busy.db'}", _free_port()
    proc = _start(db, port)
    base = f"http://127.0.0.1:{port}"
    try:
        anon = Client(base)
        created = anon.create_campaign(items=[f"i{k}" for k in range(30)], budget=120)
        cid, boss = created["campaign_id"], anon.with_key(created["requester_key"])
        tokens = [boss.add_worker(cid, f"w{k}")["worker_token"] for k in range(16)]

        def work(token: str) -> list[tuple[str, str]]:
            me = Client(base, token)
            done = []
            for step in range(40):
                got = me.next_assignment(cid)
                if got is None:
                    break
                if step % 7 == 3:  # some work is given back
                    me.cancel(cid, got["assignment_id"])
                    continue
                me.submit_label(cid, got["assignment_id"], str(step % 2))
                done.append((got["assignment_id"], got["item_id"]))
            return done

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(work, tokens))
        acknowledged = [pair for r in results for pair in r]
        ids = [aid for aid, _ in acknowledged]
        assert len(ids) == len(set(ids))  # no assignment handed out twice
        status = boss.status(cid)
        assert status["spent"] <= 120 and status["spent"] == len(acknowledged)
        assert status["n_labels"] == len(acknowledged) == 120  # the budget was used, no more
        exported = boss.export(cid).strip().splitlines()[1:]
        assert len(exported) == len(acknowledged)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_two_service_processes_on_one_database(db_url: str) -> None:
    """Two servers share one database (SQLite file, PostgreSQL): the budget is never
    exceeded, no label is lost or doubled, each sees the other's work (a stale write is
    detected by the event table's primary key and retried)."""
    from concurrent.futures import ThreadPoolExecutor

    db = db_url
    first, second = _free_port(), _free_port()
    procs = [_start(db, first), _start(db, second)]
    bases = [f"http://127.0.0.1:{first}", f"http://127.0.0.1:{second}"]
    try:
        created = Client(bases[0]).create_campaign(items=[f"i{k}" for k in range(25)], budget=90)
        cid, key = created["campaign_id"], created["requester_key"]
        tokens = [Client(bases[0], key).add_worker(cid, f"w{k}")["worker_token"] for k in range(10)]

        def work(k: int) -> list[str]:
            done = []
            for step in range(30):
                me = Client(bases[(k + step) % 2], tokens[k])  # alternate between servers
                got = me.next_assignment(cid)
                if got is None:
                    break
                other = Client(bases[(k + step + 1) % 2], tokens[k])
                other.submit_label(cid, got["assignment_id"], str(step % 2))  # answer via the other
                done.append(got["assignment_id"])
            return done

        with ThreadPoolExecutor(10) as pool:
            acknowledged = [a for r in pool.map(work, range(10)) for a in r]
        assert len(acknowledged) == len(set(acknowledged)) == 90
        for base in bases:
            status = Client(base, key).status(cid)
            assert status["spent"] == 90 and status["n_labels"] == 90 and status["pending"] == 0
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(timeout=10)


def test_push_mode_and_label_import(api: TestClient) -> None:
    cid, key = _campaign(api, budget=5)
    pushed = api.post(
        f"/v1/campaigns/{cid}/push", json={"worker_ids": ["ann", "bob", "cy"]}, headers=bearer(key)
    )
    assert pushed.status_code == 200
    assert [a["worker_id"] for a in pushed.json()] == ["ann", "bob", "cy"]
    assert len({a["item_id"] for a in pushed.json()}) == 3  # busy items are offered last
    csv = "task,worker,label\na,ext1,yes\nb,ext2,no\n"
    csv_headers = {**bearer(key), "Content-Type": "text/csv"}
    r = api.post(f"/v1/campaigns/{cid}/labels/import", content=csv, headers=csv_headers)
    assert r.status_code == 200 and r.json() == {"imported": 2}
    status = api.get(f"/v1/campaigns/{cid}/status", headers=bearer(key)).json()
    assert status["n_labels"] == 2 and status["spent"] == 0 and status["pending"] == 3
    bad = api.post(
        f"/v1/campaigns/{cid}/labels/import",
        content="task,worker,label\nzz,e,yes\n",
        headers=csv_headers,
    )
    assert bad.status_code == 422 and "unknown item 'zz'" in bad.text


def test_shutdown_closes_the_event_store_and_loses_nothing(tmp_path: Path) -> None:
    """Leaving the app's lifespan (uvicorn's shutdown) disposes of the store; a new app on
    the same database serves the campaign and its label."""
    url = f"sqlite:///{tmp_path / 'svc.db'}"
    app = create_app(url)
    with TestClient(app) as api:
        cid, key = _campaign(api)
        token = _worker(api, cid, key, "w1")
        assignment = api.post(f"/v1/campaigns/{cid}/assignments", headers=bearer(token))
        aid = assignment.json()["assignment_id"]
        answer = api.post(
            f"/v1/campaigns/{cid}/assignments/{aid}/label",
            headers=bearer(token),
            json={"label": "yes"},
        )
        assert answer.status_code == 200, answer.text
    store = app.state.service.store
    assert store._committer is None and store._writer is None
    with TestClient(create_app(url)) as again:
        status = again.get(f"/v1/campaigns/{cid}/status", headers=bearer(key)).json()
    assert status["n_labels"] == 1 and status["spent"] == 1.0


def test_client_gold_and_calibration(api: TestClient) -> None:
    """The Python client's gold methods against the app (through the TestClient's transport):
    put / get / replace / delete, calibration as the service reports it, errors as
    :class:`ServiceError`."""
    transport = api._transport  # the in-process ASGI transport of the TestClient
    cid, key = _campaign(api)
    boss = Client("http://testserver", key, transport=transport)
    alice = boss.with_key(_worker(api, cid, key, "alice"))
    for _ in range(3):
        work = alice.next_assignment(cid)
        assert work is not None
        alice.submit_label(cid, work["assignment_id"], "yes")
    with pytest.raises(ServiceError) as none_yet:
        boss.calibration(cid)
    assert none_yet.value.status == 404 and "no gold" in none_yet.value.detail
    boss.put_gold(cid, {"c": "yes", "a": "no"})
    assert boss.get_gold(cid) == {"a": "no", "c": "yes"}  # item order
    boss.put_gold(cid, [("b", "yes")])  # replaces
    assert boss.get_gold(cid) == {"b": "yes"}
    found = boss.calibration(cid)
    direct = api.get(f"/v1/campaigns/{cid}/calibration", headers=bearer(key)).json()
    assert found == direct and (found["n_gold"], found["n_scored"]) == (1, 1)
    assert boss.calibration(cid, verdict="mv")["verdict"] == "mv"
    with pytest.raises(ServiceError) as refused:
        boss.put_gold(cid, {"b": "maybe"})
    assert refused.value.status == 422 and "not a class" in refused.value.detail
    with pytest.raises(ServiceError) as worker_key:
        alice.put_gold(cid, {"b": "no"})
    assert worker_key.value.status == 403
    assert boss.get_gold(cid) == {"b": "yes"}
    boss.delete_gold(cid)
    assert boss.get_gold(cid) == {}
