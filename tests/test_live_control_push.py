"""Control tasks in live push campaigns and the value rule live (crowdbudget.campaign.control,
crowdbudget.engine.live): in push mode a control task goes to the team worker the rule says
is due (every worker's first ``first_k``, then the rate or the value rule), never chosen by
the policy; a spammer is blocked and never chosen again; the value rule reads the campaign's
budget and serves control past ``first_k`` — in the library and over HTTP (``POST …/push``),
surviving ``load`` and ``refresh``; a refused request changes nothing (the checksum)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.exceptions import CrowdBudgetError
from crowdbudget.service import create_app
from service_helpers import CampaignApi, bearer, db_checksum

ITEMS = [f"i{k}" for k in range(30)]
TRUTH = {item: str(k % 2) for k, item in enumerate(ITEMS)}
CONTROL = {item: TRUTH[item] for item in ITEMS[:8]}
TEAM = ["a", "b", "c", "d"]
POLICY = "opt-kg:posterior=one-coin"


def _push(store: EventStore | None = None, **control: Any) -> Campaign:
    settings = {"items": CONTROL, "first_k": 2, "rate": 0.0, "block_below": 0.7, **control}
    return Campaign.create(
        ITEMS,
        budget=90,
        policy=POLICY,
        mode="push",
        workers=TEAM,
        seed=5,
        control={"min_answers": 2, **settings},
        store=store or EventStore("sqlite://"),
    )


def _run(campaign: Campaign, rounds: int, spammer: str = "b", count: int = 2) -> list[Any]:
    """Push ``count`` at a time and answer each (``spammer``: always wrong); the work."""
    done = []
    for _ in range(rounds):
        batch = campaign.push_assignments(count)
        if not batch:
            break
        for work in batch:
            right = TRUTH[work.item_id]
            label = str(1 - int(right)) if work.worker_id == spammer else right
            campaign.record_label(work.assignment_id, label)
            done.append(work)
    return done


def test_push_serves_every_team_worker_its_first_control_tasks() -> None:
    campaign = _push(block_below=None)
    first = campaign.push_assignments(8)
    # fewest served first: every worker gets one, then every worker a second
    assert [w.worker_id for w in first] == TEAM + TEAM
    assert all(campaign.is_control_item(w.item_id) for w in first)
    assert len({(w.item_id, w.worker_id) for w in first}) == 8  # never the same pair twice
    for work in first:
        campaign.record_label(work.assignment_id, TRUTH[work.item_id])
    later = _run(campaign, 10, spammer="")
    assert later and not any(campaign.is_control_item(w.item_id) for w in later)  # rate 0
    status = campaign.status()["control"]
    assert status["answers"] == 8 and status["spent"] == 8.0


def test_push_blocks_a_spammer_and_never_chooses_them_again() -> None:
    campaign = _push()
    work = _run(campaign, 60)
    assert campaign.is_blocked("b")
    (blocked,) = campaign.blocked_workers()
    assert (blocked["by"], blocked["correct"], blocked["answered"]) == ("rule", 0, 2)
    after = [w.worker_id for w in work if w.assignment_id not in _first_of(campaign, "b", 2)]
    assert after.count("b") == 0 and len(after) > 20
    # the rest of the team takes every pair outside the control items (22 items x 3) after
    # the 8 control tasks: the control items stay closed to the policy
    assert campaign.status()["spent"] == 22 * 3 + 8


def _first_of(campaign: Campaign, worker: str, n: int) -> set[str]:
    ids = [a for a, r in campaign._records.items() if campaign.worker_ids[r.worker] == worker]
    return set(ids[:n])


def test_the_rate_goes_to_the_worker_who_is_due() -> None:
    campaign = _push(first_k=1, rate=0.25, block_below=None)
    work = _run(campaign, 40, spammer="")
    for worker in TEAM:
        mine = [campaign.is_control_item(w.item_id) for w in work if w.worker_id == worker]
        # task 1, then every fourth after it (5, 9, ...) while control items are left
        expected = [n == 1 or (n - 1) % 4 == 0 for n in range(1, len(mine) + 1)]
        assert mine[:9] == expected[:9], worker


def test_push_control_respects_listed_pairs() -> None:
    pairs = [[item, w] for item in ITEMS for w in TEAM if not (item in CONTROL and w == "a")]
    campaign = Campaign.create(
        ITEMS,
        budget=20,
        policy=POLICY,
        mode="push",
        pairs=pairs,
        seed=1,
        control={"items": CONTROL, "first_k": 2, "rate": 0.0},
    )
    work = campaign.push_assignments(8)
    control = [(w.worker_id, w.item_id) for w in work if campaign.is_control_item(w.item_id)]
    assert len(control) == 6 and all(worker != "a" for worker, _ in control)


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_the_value_rule_serves_control_live_and_blocks_a_spammer(mode: str) -> None:
    control = {"items": CONTROL, "first_k": 1, "rule": "value", "block_below": 0.7}
    kw: dict[str, Any] = {}
    if mode == "push":
        kw = {"mode": "push", "workers": TEAM, "policy": POLICY}
    campaign = Campaign.create(
        ITEMS, budget=120, seed=4, control={**control, "min_answers": 3}, **kw
    )
    ledger = campaign.control_ledger
    assert ledger is not None and ledger.budget == 120.0
    served: dict[str, list[bool]] = {}
    for _ in range(60):
        if mode == "push":
            batch = campaign.push_assignments(2)
        else:
            batch = [w for w in (campaign.next_assignment(x) for x in TEAM) if w is not None]
        if not batch:
            break
        for work in batch:
            right = TRUTH[work.item_id]
            label = str(1 - int(right)) if work.worker_id == "b" else right
            campaign.record_label(work.assignment_id, label)
            served.setdefault(work.worker_id, []).append(campaign.is_control_item(work.item_id))
    # past first_k = 1 the value rule buys the spammer's answers until the block decides
    assert served["b"] == [True, True, True]
    assert campaign.is_blocked("b")
    (blocked,) = campaign.blocked_workers()
    assert (blocked["correct"], blocked["answered"]) == (0, 3)
    # and stops testing the good workers once nothing can change the decision
    assert all(sum(served[w]) < len(served[w]) // 2 for w in ("a", "c", "d"))
    status = campaign.status()["control"]
    assert status["rule"] == "value" and status["horizon"] == 20


def test_the_value_rule_without_a_level_or_with_a_bad_horizon_is_refused() -> None:
    store = EventStore("sqlite://")
    campaign = _push(store, block_below=None)
    n = len(list(store.events(campaign.campaign_id)))
    for settings, needle in (
        ({"rule": "value"}, "give a block level"),
        ({"rule": "best"}, "control rule must be one of fixed, value"),
        ({"horizon": 0}, "horizon must be an integer >= 1"),
        ({"horizon": 2.5}, "horizon must be an integer"),
    ):
        with pytest.raises(CrowdBudgetError, match=needle):
            campaign.update_control(**settings)
    assert len(list(store.events(campaign.campaign_id))) == n
    campaign.update_control(rule="value", block_below=0.6)
    assert campaign.control_status()["rule"] == "value"  # type: ignore[index]


def test_push_control_survives_load_and_refresh(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'push.db'}"
    first = _push(EventStore(url), rule="value", first_k=1)
    second = Campaign.load(EventStore(url), first.campaign_id)
    _run(first, 12)
    assert second.refresh() > 0
    reloaded = Campaign.load(EventStore(url), first.campaign_id)
    for copy in (second, reloaded):
        assert copy.status() == first.status()
        assert copy.blocked_workers() == first.blocked_workers()
        assert copy.control_ledger is not None and first.control_ledger is not None
        assert copy.control_ledger.served == first.control_ledger.served
        assert copy.control_ledger.offered == first.control_ledger.offered
        assert copy.control_ledger.tasks == first.control_ledger.tasks
    # the reloaded copy goes on; the other catches up with its decisions
    pushed = reloaded.push_assignments(3)
    assert pushed and second.refresh() == len(pushed)
    assert second.pending_assignments() == reloaded.pending_assignments()
    assert second.control_ledger.served == reloaded.control_ledger.served  # type: ignore[union-attr]


# ------------------------------------------------------------------ HTTP
class PushApi(CampaignApi):
    def __init__(self, tmp_path: Path) -> None:
        body = {
            "items": ITEMS,
            "budget": 40,
            "policy": POLICY,
            "mode": "push",
            "workers": TEAM,
            "seed": 2,
            "max_pending_per_worker": 100,
            "control": {
                "items": [{"item": i, "label": c} for i, c in CONTROL.items()],
                "first_k": 2,
                "rate": 0.0,
                "block_below": 0.7,
                "min_answers": 2,
            },
        }
        super().__init__(tmp_path, body, "push.db", setup_timeout=300.0)
        self.headers = bearer(self.key)
        self.tokens = {worker: self.worker(worker) for worker in TEAM}

    def push(self, count: int, spammer: str = "b") -> list[dict[str, Any]]:
        response = self.call("POST", "/push", json={"count": count})
        assert response.status_code == 200, response.text
        work: list[dict[str, Any]] = response.json()
        for a in work:
            right = TRUTH[a["item_id"]]
            label = str(1 - int(right)) if a["worker_id"] == spammer else right
            path = f"{self.base}/assignments/{a['assignment_id']}/label"
            token = bearer(self.tokens[a["worker_id"]])
            answer = self.client.post(path, headers=token, json={"label": label})
            assert answer.status_code == 200, answer.text
        return work


def test_http_push_serves_control_and_blocks(tmp_path: Path) -> None:
    api = PushApi(tmp_path)
    first = api.push(8)
    assert [a["worker_id"] for a in first] == TEAM + TEAM
    assert {a["item_id"] for a in first} <= set(CONTROL)
    (blocked,) = api.call("GET", "/blocked-workers").json()
    assert blocked["worker"] == "b" and blocked["answered"] == 2
    later = api.push(20)
    assert later and all(a["worker_id"] != "b" for a in later)
    assert all(a["item_id"] not in CONTROL for a in later)
    # the value rule by PATCH, read back in the settings
    assert api.call("PATCH", "/control", json={"rule": "value", "horizon": 5}).status_code == 204
    settings = api.call("GET", "/control").json()["settings"]
    assert (settings["rule"], settings["horizon"]) == ("value", 5)
    restarted = TestClient(create_app(api.url))
    again = restarted.get(f"{api.base}/control", headers=api.headers).json()
    assert again == api.call("GET", "/control").json()


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"rule": "best"}, "rule"),
        ({"rule": 1}, "rule"),
        ({"horizon": 0}, "horizon must be an integer >= 1"),
        ({"horizon": "5"}, "horizon"),
        ({"rule": "value", "block_below": None}, "give a block level"),
    ],
)
def test_http_bad_rule_settings_change_nothing(tmp_path: Path, body: Any, needle: str) -> None:
    api = PushApi(tmp_path)
    before = db_checksum(api.url)
    response = api.call("PATCH", "/control", json=body)
    assert response.status_code == 422, response.text
    assert needle in response.json()["detail"]
    assert db_checksum(api.url) == before


def test_the_live_ledgers_crowd_value_is_the_rules() -> None:
    """The live ledger's v̄ (one sum per ledger state, the worker's own taken out) equals
    the rule's (a mean over the other workers), blocked workers left out."""
    from crowdbudget.campaign.control import CampaignControlLedger
    from crowdbudget.engine.control import ControlLedger, ControlTasks

    tasks = ControlTasks(n_items=1, block_below=0.7, min_answers=2, rule="value")
    truth = np.zeros(10, dtype=np.int64)
    ledger = CampaignControlLedger(tasks, np.arange(10), truth, budget=50.0)
    rng = np.random.default_rng(0)
    for step in range(40):
        worker = int(rng.integers(6))
        ledger.answer(worker, int(rng.integers(10)), int(rng.random() < 0.3 * worker), step)
        for w in (None, *range(7)):
            assert ledger._replacement(w) == pytest.approx(ControlLedger._replacement(ledger, w))
    assert ledger.blocked  # the check covered blocked workers too


@pytest.mark.parametrize(
    ("control", "needle"),
    [
        ({"rule": "value"}, "give a block level"),
        ({"rule": "value", "block_below": 0.7, "horizon": 0}, "horizon must be an integer >= 1"),
        ({"rule": "fastest"}, "rule"),
    ],
)
def test_http_a_bad_rule_at_creation_stores_nothing(
    tmp_path: Path, control: dict[str, Any], needle: str
) -> None:
    api = PushApi(tmp_path)
    before = db_checksum(api.url)
    body = {"items": ITEMS, "budget": 4, "control": control}
    response = api.client.post("/v1/campaigns", json=body)
    assert response.status_code == 422, response.text
    assert needle in response.json()["detail"]
    assert db_checksum(api.url) == before
