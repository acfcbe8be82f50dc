"""Control tasks and blocking over HTTP (routers/control.py): control items at creation and
later, a spammer blocked by the rule (pull: 204 with ``X-No-Work-Reason: blocked``), block
and unblock by hand, ``blocked_labels``, the status and dashboard listing the blocked
workers with their evidence — all surviving a restart; every refused request changes
nothing in the database (the checksum)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.service import create_app
from service_helpers import CampaignApi
from service_helpers import db_checksum as _checksum

ITEMS = [f"i{k}" for k in range(10)]
CLASSES = ["no", "yes"]
TRUTH = {item: CLASSES[k % 2] for k, item in enumerate(ITEMS)}
CONTROL = [{"item": item, "label": TRUTH[item]} for item in ITEMS[:3]]


class Api(CampaignApi):
    """A TestClient on a fresh database with one campaign with control tasks."""

    def __init__(self, tmp_path: Path, **settings: Any) -> None:
        control = {"items": CONTROL, "first_k": 2, "rate": 0.0, "block_below": 0.7}
        body = {
            "items": ITEMS,
            "budget": 40,
            "classes": CLASSES,
            "seed": 3,
            "verdict": "mv",
            "control": {**control, "min_answers": 2},
        }
        super().__init__(tmp_path, body, "control.db", **settings)

    def answer(self, token: str, *, spammer: bool = False) -> Any:
        """One request of the worker, answered right (a spammer: wrong); the response."""

        def label_of(item: str) -> str:
            right = TRUTH[item]
            return CLASSES[1 - CLASSES.index(right)] if spammer else right

        return self.label_next(token, label_of)


@pytest.fixture
def api(tmp_path: Path) -> Api:
    return Api(tmp_path)


def test_a_spammer_is_blocked_and_told_why(api: Api) -> None:
    spam, good = api.worker("spam"), api.worker("good")
    for _ in range(2):
        assert api.answer(spam, spammer=True).json()["item_id"] in TRUTH
        api.answer(good)
    response = api.call("POST", "/assignments", key=spam)
    assert response.status_code == 204 and response.headers["x-no-work-reason"] == "blocked"
    assert api.answer(good).status_code == 200
    (blocked,) = api.call("GET", "/blocked-workers").json()
    assert blocked["worker"] == "spam" and blocked["by"] == "rule"
    assert (blocked["correct"], blocked["answered"], blocked["level"]) == (0, 2, 0.7)
    status = api.call("GET", "/status").json()
    assert status["blocked_workers"] == [blocked]
    assert status["control"]["answers"] == 4 and status["control"]["spent"] == 4.0
    control = api.call("GET", "/control").json()
    assert control["items"] == CONTROL and control["blocked_workers"] == [blocked]
    workers = api.call("GET", "/dashboard").json()["workers"]
    assert [w.get("blocked", False) for w in workers if w["worker"] == "spam"] == [True]
    # by hand: unblock, block again
    assert api.call("DELETE", "/blocked-workers/spam").status_code == 204
    assert api.answer(spam).status_code == 200
    assert api.call("PUT", "/blocked-workers/spam").status_code == 204
    assert api.call("GET", "/blocked-workers").json()[0]["by"] == "requester"
    # everything survives a restart
    restarted = TestClient(create_app(api.url))
    headers = {"Authorization": f"Bearer {api.key}"}
    assert (
        restarted.get(f"{api.base}/control", headers=headers).json()
        == api.call("GET", "/control").json()
    )
    again = restarted.post(f"{api.base}/assignments", headers={"Authorization": f"Bearer {spam}"})
    assert again.status_code == 204 and again.headers["x-no-work-reason"] == "blocked"
    loaded = Campaign.load(EventStore(api.url), api.cid)
    assert loaded.is_blocked("spam")
    assert loaded.control_items() == {row["item"]: row["label"] for row in CONTROL}


def test_control_items_settings_and_blocked_labels(api: Api) -> None:
    events = api.call("GET", "/status").json()["events"]
    assert (
        api.call("POST", "/control/items", json=[{"item": "i7", "label": "yes"}]).status_code == 204
    )
    # the same again stores nothing
    assert (
        api.call("POST", "/control/items", json=[{"item": "i7", "label": "yes"}]).status_code == 204
    )
    assert api.call("GET", "/status").json()["events"] == events + 1
    body = {"rate": 0.25, "block_below": None, "blocked_labels": "keep"}
    assert api.call("PATCH", "/control", json=body).status_code == 204
    settings = api.call("GET", "/control").json()["settings"]
    assert settings["rate"] == 0.25 and settings["block_below"] is None
    assert settings["blocked_labels"] == "keep" and settings["first_k"] == 2
    assert settings["n_items"] == 4


@pytest.mark.parametrize(
    ("method", "path", "body", "needle"),
    [
        ("POST", "/control/items", [], "control is empty"),
        ("POST", "/control/items", [{"item": "nope", "label": "yes"}], "unknown item 'nope'"),
        ("POST", "/control/items", [{"item": "i1", "label": "maybe"}], "'maybe' of item 'i1'"),
        ("POST", "/control/items", [{"item": "i0", "label": "yes"}], "with the answer 'no'"),
        (
            "POST",
            "/control/items",
            [{"item": "i5", "label": "yes"}, {"item": "i5", "label": "no"}],
            "more than once",
        ),
        (
            "POST",
            "/control/items",
            [{"item": f"x{k}", "label": "yes"} for k in range(11)],
            "11 control rows for a campaign of 10",
        ),
        ("POST", "/control/items", [{"item": "i1", "label": 1}], "label"),
        ("POST", "/control/items", [{"item": "i1"}], "label"),
        ("POST", "/control/items", {"i1": "yes"}, "body"),
        ("POST", "/control/items", [{"item": "i1", "label": "y" * 201}], "at most 200"),
        ("PATCH", "/control", {"rate": 2.0}, "control rate must be in [0, 1]"),
        ("PATCH", "/control", {"first_k": -1}, "first_k must be an integer >= 0"),
        ("PATCH", "/control", {"first_k": "3"}, "first_k"),
        ("PATCH", "/control", {"prior": [1.0]}, "prior must be two numbers"),
        ("PATCH", "/control", {"min_answers": 0}, "min_answers must be an integer >= 1"),
        ("PATCH", "/control", {"blocked_labels": "ignore"}, "blocked_labels"),
        ("PATCH", "/control", {"rate": 0.5, "block_confidence": 1.0}, "block confidence"),
        ("PATCH", "/control", {"level": 0.5}, "level"),
        ("PUT", "/blocked-workers/nobody", None, "no worker 'nobody'"),
        ("DELETE", "/blocked-workers/nobody", None, "no worker 'nobody'"),
        ("PUT", "/blocked-workers/" + "w" * 201, None, "takes at most 200"),
        ("PUT", "/blocked-workers/w0", {"reason": "r" * 201}, "reason must be 1 to 200"),
        ("PUT", "/blocked-workers/w0", {"reason": "   "}, "reason must be 1 to 200"),
        ("PUT", "/blocked-workers/w0", {"reason": "two\nlines"}, "one line"),
        ("PUT", "/blocked-workers/w0", {"reason": 3}, "reason"),
        ("PUT", "/blocked-workers/w0", {"why": "spam"}, "why"),
        ("PUT", "/blocked-workers/nobody", {"reason": "spam"}, "no worker 'nobody'"),
    ],
)
def test_bad_requests_are_refused_and_change_nothing(
    api: Api, method: str, path: str, body: Any, needle: str
) -> None:
    api.worker("w0")
    kw = {} if body is None else {"json": body}
    detail = api.refused(method, path, 422, **kw)
    assert needle in detail, detail


def test_the_requesters_reason_is_stored_shown_and_lifted(api: Api) -> None:
    """``PUT …/blocked-workers/{w}`` with a ``reason``: in the event, the blocked workers,
    the status, after a restart; blocked already: the new reason stores nothing; unblocked:
    the reason goes with the block."""
    api.worker("w0"), api.worker("w1")
    reason = "  copied answers from another worker (ticket 12)  "
    assert api.call("PUT", "/blocked-workers/w0", json={"reason": reason}).status_code == 204
    (blocked,) = api.call("GET", "/blocked-workers").json()
    assert blocked["by"] == "requester" and blocked["reason"] == reason.strip()
    assert api.call("GET", "/status").json()["blocked_workers"] == [blocked]
    events = list(EventStore(api.url).events(api.cid))
    assert [e.payload.get("reason") for e in events if e.kind == "worker_blocked"] == [
        reason.strip()
    ]
    before = _checksum(api.url)
    assert api.call("PUT", "/blocked-workers/w0", json={"reason": "other"}).status_code == 204
    assert _checksum(api.url) == before  # blocked already: nothing stored
    # without a body (as before) and with a null reason: no reason recorded
    assert api.call("PUT", "/blocked-workers/w1", json={"reason": None}).status_code == 204
    assert "reason" not in api.call("GET", "/blocked-workers").json()[1]
    restarted = TestClient(create_app(api.url))
    headers = {"Authorization": f"Bearer {api.key}"}
    listed = restarted.get(f"{api.base}/blocked-workers", headers=headers).json()
    assert listed == api.call("GET", "/blocked-workers").json()
    assert api.call("DELETE", "/blocked-workers/w0").status_code == 204
    assert api.call("PUT", "/blocked-workers/w0").status_code == 204
    assert "reason" not in api.call("GET", "/blocked-workers").json()[0]


def test_control_needs_the_requester_key(api: Api) -> None:
    token = api.worker("w0")
    for method, path, kw in (
        ("GET", "/control", {}),
        ("POST", "/control/items", {"json": CONTROL}),
        ("PATCH", "/control", {"json": {"rate": 0.1}}),
        ("GET", "/blocked-workers", {}),
        ("PUT", "/blocked-workers/w0", {}),
        ("DELETE", "/blocked-workers/w0", {}),
    ):
        api.refused(method, path, 401, key=None, **kw)
        assert "requester" in api.refused(method, path, 403, key=token, **kw)


@pytest.mark.parametrize(
    ("control", "needle"),
    [
        ({"items": [{"item": "nope", "label": "yes"}]}, "unknown item 'nope'"),
        ({"items": [{"item": "i1", "label": "maybe"}]}, "is not a class"),
        ({"items": []}, "control is empty"),
        ({"rate": -0.1}, "control rate"),
        ({"block_below": 0.0}, "block level"),
        ({"first_k": 1.5}, "first_k"),
        ({"blocked_labels": "both"}, "blocked_labels"),
        ({"cheat": 1}, "cheat"),
    ],
)
def test_a_bad_control_at_creation_stores_nothing(
    tmp_path: Path, control: dict[str, Any], needle: str
) -> None:
    api = Api(tmp_path)
    before = _checksum(api.url)
    body = {"items": ITEMS, "budget": 4, "classes": CLASSES, "control": control}
    response = api.client.post("/v1/campaigns", json=body)
    assert response.status_code == 422, response.text
    assert needle in response.json()["detail"]
    assert _checksum(api.url) == before


def test_the_client_methods(api: Api) -> None:
    """The Python client's control methods against the app (the TestClient's transport)."""
    from crowdbudget.client import Client, ServiceError

    boss = Client("http://testserver", api.key, transport=api.client._transport)
    spammer = boss.with_key(api.worker("spam"))
    for _ in range(2):
        work = spammer.next_assignment(api.cid)
        assert work is not None and spammer.no_work_reason is None
        wrong = CLASSES[1 - CLASSES.index(TRUTH[work["item_id"]])]
        spammer.submit_label(api.cid, work["assignment_id"], wrong)
    assert spammer.next_assignment(api.cid) is None and spammer.no_work_reason == "blocked"
    assert [b["worker"] for b in boss.blocked_workers(api.cid)] == ["spam"]
    boss.unblock_worker(api.cid, "spam")
    assert boss.blocked_workers(api.cid) == []
    boss.block_worker(api.cid, "spam", reason="wrong on every control item")
    blocked = boss.control(api.cid)["blocked_workers"][0]
    assert blocked["by"] == "requester" and blocked["reason"] == "wrong on every control item"
    boss.add_control_items(api.cid, {"i8": "no"})
    boss.update_control(api.cid, first_k=1, blocked_labels="keep")
    control = boss.control(api.cid)
    assert control["settings"]["first_k"] == 1 and control["settings"]["blocked_labels"] == "keep"
    assert {"item": "i8", "label": "no"} in control["items"]
    with pytest.raises(ServiceError) as refused:
        boss.add_control_items(api.cid, {"i8": "yes"})
    assert refused.value.status == 422 and "with the answer 'no'" in refused.value.detail


def test_the_status_reads_the_verdict_fitted_in_a_child(api: Api) -> None:
    good = api.worker("good")
    for _ in range(5):
        api.answer(good)
    status = api.call("GET", "/status").json()
    results = api.call("GET", "/results").json()
    confidence = sum(row["confidence"] for row in results) / len(results)
    assert status["estimated_accuracy"] == pytest.approx(confidence)
    confident = sum(row["confidence"] >= 0.95 for row in results)
    assert status["items_confident"] == confident > 0  # the verdict's (mv), not the votes'
    listed = api.client.get("/v1/campaigns", headers={"Authorization": f"Bearer {api.key}"})
    assert listed.json() == [status]
