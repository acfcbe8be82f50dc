"""Several ``crowdbudget serve`` processes on one store give the answers of one.

Three real server processes, started at the same moment on a new database (SQLite always,
PostgreSQL when CI's ``.ci/postgres.sh`` exported its URL), serve two campaigns; worker threads
send every request to a process drawn at random, so most labels reach a process that did not
hand out their assignment. Checked from the event store itself
(:func:`crowdbudget.testing.service_load.check_store`): no server error and no refused request,
no double assignment, no overspend, no lost label — and each campaign spent its whole budget.
And a process that is behind the store catches up with the events it missed instead of
rebuilding the campaign.
"""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.client import Client
from crowdbudget.service import create_app
from crowdbudget.service.local import LocalServer
from crowdbudget.testing.service_load import LoadCampaign, check_store, run_load
from service_helpers import bearer

N_PROCESSES, N_CAMPAIGNS, N_ITEMS, BUDGET, N_WORKERS, N_THREADS = 3, 2, 40, 120, 12, 6


def _start_together(db_url: str, n: int) -> list[LocalServer]:
    """``n`` servers started at once on ``db_url`` (each creates the schema if missing)."""
    # a loaded machine starts three interpreters slowly: a generous limit
    servers = [LocalServer(db_url, start_timeout=120) for _ in range(n)]
    errors: list[BaseException] = []

    def start(server: LocalServer) -> None:
        try:
            server.start()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start, args=(s,)) for s in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        for server in servers:
            server.stop()
        raise AssertionError(f"a server did not start: {errors[0]}")
    return servers


def test_processes_on_one_store_answer_as_one(db_url: str) -> None:
    servers = _start_together(db_url, N_PROCESSES)
    try:
        urls = [s.url for s in servers]
        campaigns = []
        for c in range(N_CAMPAIGNS):
            created = Client(urls[c % N_PROCESSES]).create_campaign(
                items=[f"i{k}" for k in range(N_ITEMS)], budget=BUDGET, seed=c
            )
            cid, key = created["campaign_id"], created["requester_key"]
            boss = Client(urls[(c + 1) % N_PROCESSES], key)
            tokens = [boss.add_worker(cid, f"w{k}")["worker_token"] for k in range(N_WORKERS)]
            campaigns.append(LoadCampaign(cid, tokens))
        result = run_load(urls, campaigns, n_threads=N_THREADS, seed=7)
        assert result.server_errors == 0, result.statuses
        assert result.refused == 0, result.failures
        counts = check_store(db_url, result)
        assert counts["labels"] == len(result.acknowledged) == N_CAMPAIGNS * BUDGET
        # every process reports what the store holds
        store = EventStore(db_url)
        try:
            for campaign in campaigns:
                truth = Campaign.load(store, campaign.campaign_id).status()
                assert truth["spent"] == BUDGET and truth["pending"] == 0
                assert truth["stopped"]
        finally:
            store.dispose()
    finally:
        for server in servers:
            server.stop()


def test_a_label_to_the_process_that_did_not_assign_it_is_accepted_after_catching_up(
    db_url: str,
) -> None:
    """Two services on one store (two processes in one test): every assignment is handed
    out by the first, its label posted to the second, whose copy of the campaign is behind.
    The second accepts each label after reading only the events it missed — never a full
    reload (``EventStore.activity``) — and the store holds every label."""
    first, second = TestClient(create_app(db_url)), TestClient(create_app(db_url))
    stores = [client.app.state.service.store for client in (first, second)]  # type: ignore[attr-defined]
    try:
        body = {"items": [f"i{k}" for k in range(6)], "budget": 20, "classes": ["no", "yes"]}
        created = first.post("/v1/campaigns", json=body).json()
        cid, key = created["campaign_id"], created["requester_key"]
        token = first.post(
            f"/v1/campaigns/{cid}/workers", json={"worker_id": "w1"}, headers=bearer(key)
        ).json()["worker_token"]
        # the second process reads the campaign once: its one full load
        assert second.get(f"/v1/campaigns/{cid}/status", headers=bearer(key)).status_code == 200
        assert stores[1].activity["loads"] == 1
        rounds = 3
        for _ in range(rounds):
            handed = first.post(f"/v1/campaigns/{cid}/assignments", headers=bearer(token))
            assert handed.status_code == 200, handed.text
            assignment_id = handed.json()["assignment_id"]
            caught_up_before = stores[1].activity["caught_up_events"]
            answered = second.post(
                f"/v1/campaigns/{cid}/assignments/{assignment_id}/label",
                json={"label": "yes"},
                headers=bearer(token),
            )
            assert answered.status_code == 200, answered.text
            # the second process applied the events it missed (at least the assignment)…
            assert stores[1].activity["caught_up_events"] > caught_up_before
        # …and never rebuilt the campaign from its whole history
        assert stores[1].activity["loads"] == 1
        status = second.get(f"/v1/campaigns/{cid}/status", headers=bearer(key)).json()
        assert status["spent"] == rounds and status["pending"] == 0
        truth = Campaign.load(stores[0], cid).status()
        assert truth["spent"] == rounds and truth["pending"] == 0
    finally:
        for store in stores:
            store.dispose()
