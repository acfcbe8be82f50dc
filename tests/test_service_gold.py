"""Gold labels in a live campaign (issue 19): the requester uploads true classes for a sample
of the items, and the service reports the verdict's calibration on them (``…/calibration``,
the dashboard). Gold is stored as an event, survives a restart, is refused whole when any
row is bad, and never changes an allocation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from crowdbudget.aggregation.calibration import (
    brier_score,
    calibration_metrics,
    expected_calibration_error,
    fit_probability_floor,
    floor_calibration,
    negative_log_likelihood,
)
from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.service import create_app
from service_helpers import CampaignApi, bearer

ITEMS = [f"i{k}" for k in range(8)]
CLASSES = ["no", "yes"]
TRUTH = {item: CLASSES[k % 2] for k, item in enumerate(ITEMS)}


class Api(CampaignApi):
    """A TestClient on a fresh database with one campaign, its requester key and a worker."""

    def __init__(self, tmp_path: Path, name: str = "gold.db", **settings: Any) -> None:
        body = {"items": ITEMS, "budget": 24, "classes": CLASSES, "seed": 3}
        super().__init__(tmp_path, body, name, **settings)

    def label(self, n: int, rng: np.random.Generator) -> None:
        """``n`` answers from four workers right 80% of the time."""
        tokens = [self.worker(f"w{k}") for k in range(4)]

        def label_of(item: str) -> str:
            right = rng.random() < 0.8
            return TRUTH[item] if right else CLASSES[1 - CLASSES.index(TRUTH[item])]

        for k in range(n):
            work = self.label_next(tokens[k % 4], label_of)
            assert work.status_code in (200, 204), work.text

    def events(self) -> int:
        return int(self.call("GET", "/status").json()["events"])


def _rows(gold: dict[str, str]) -> list[dict[str, str]]:
    return [{"item": item, "label": label} for item, label in gold.items()]


@pytest.fixture
def api(tmp_path: Path) -> Api:
    return Api(tmp_path)


def test_put_get_replace_delete(api: Api) -> None:
    assert api.call("GET", "/gold").json() == []
    events = api.events()
    sample = {"i3": "yes", "i0": "no", "i5": "yes"}
    assert api.call("PUT", "/gold", json=_rows(sample)).status_code == 204
    assert api.call("GET", "/gold").json() == _rows({"i0": "no", "i3": "yes", "i5": "yes"})
    assert api.events() == events + 1
    # the same gold again stores nothing (a retried request)
    assert api.call("PUT", "/gold", json=_rows(sample)).status_code == 204
    assert api.events() == events + 1
    # replace semantics: the new list is the whole gold
    assert api.call("PUT", "/gold", json=_rows({"i7": "no"})).status_code == 204
    assert api.call("GET", "/gold").json() == _rows({"i7": "no"})
    assert api.events() == events + 2
    assert api.call("DELETE", "/gold").status_code == 204
    assert api.call("GET", "/gold").json() == []
    assert api.events() == events + 3
    assert api.call("DELETE", "/gold").status_code == 204  # nothing to delete: no event
    assert api.events() == events + 3
    assert api.call("GET", "/calibration").status_code == 404
    assert "calibration" not in api.call("GET", "/dashboard").json()


def test_gold_and_calibration_survive_a_restart(tmp_path: Path) -> None:
    api = Api(tmp_path)
    api.label(12, np.random.default_rng(0))
    sample = {"i1": "yes", "i2": "no", "i4": "no", "i6": "no"}
    assert api.call("PUT", "/gold", json=_rows(sample)).status_code == 204
    calibration = api.call("GET", "/calibration").json()
    # a new process on the same database, and the library's Campaign.load
    restarted = TestClient(create_app(api.url))
    headers = bearer(api.key)
    assert restarted.get(f"{api.base}/gold", headers=headers).json() == _rows(sample)
    assert restarted.get(f"{api.base}/calibration", headers=headers).json() == calibration
    loaded = Campaign.load(EventStore(api.url), api.cid)
    assert loaded.gold() == sample
    assert loaded.calibration() == calibration
    assert api.call("DELETE", "/gold").status_code == 204
    assert Campaign.load(EventStore(api.url), api.cid).gold() == {}


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ([], "empty"),
        ([{"item": "nope", "label": "yes"}], "unknown item 'nope'"),
        ([{"item": "i1", "label": "maybe"}], "'maybe' of item 'i1' is not a class"),
        ([{"item": "i1", "label": "yes"}, {"item": "i1", "label": "no"}], "more than once"),
        ([*_rows(TRUTH), {"item": "i0", "label": "no"}], "9 gold rows for a campaign of 8"),
        ([{"item": "i1", "label": "yes", "weight": 2}], "weight"),
        ([{"item": "i1"}], "label"),
        ([{"item": "i1", "label": 1}], "label"),
        ([{"item": "", "label": "yes"}], "item"),
        ({"i1": "yes"}, "body"),
        ([["i1", "yes"]], "valid dictionary"),
        ([{"item": "i1", "label": "y" * 201}], "at most 200"),
        ([{"item": "i" * 201, "label": "yes"}], "at most 200"),
    ],
)
def test_bad_gold_is_refused_whole_and_changes_nothing(api: Api, body: object, needle: str) -> None:
    api.call("PUT", "/gold", json=_rows({"i2": "no"}))  # earlier gold stays as it was
    detail = api.refused("PUT", "/gold", 422, json=body)
    assert needle in detail, detail
    assert api.call("GET", "/gold").json() == _rows({"i2": "no"})


def test_gold_needs_the_requester_key(api: Api, tmp_path: Path) -> None:
    token = api.worker("w0")
    other = api.client.post("/v1/campaigns", json={"items": ITEMS, "budget": 2}).json()
    sample = _rows({"i1": "yes"})
    for method, path, kw in (
        ("PUT", "/gold", {"json": sample}),
        ("GET", "/gold", {}),
        ("DELETE", "/gold", {}),
        ("GET", "/calibration", {}),
    ):
        api.refused(method, path, 401, key=None, **kw)
        assert "requester" in api.refused(method, path, 403, key=token, **kw)
        api.refused(method, path, 403, key=other["requester_key"], **kw)
        api.refused(method, path, 403, key="not-a-key", **kw)
    unknown = TestClient(create_app(api.url)).put(
        "/v1/campaigns/nope/gold", json=sample, headers=bearer(api.key)
    )
    assert unknown.status_code == 403  # the key is checked first, as for every route


def test_body_over_the_server_limit_is_413(tmp_path: Path) -> None:
    api = Api(tmp_path, max_body_bytes=2000)
    big = [{"item": f"x{k}", "label": "yes"} for k in range(100)]
    assert "limit of 2000 bytes" in api.refused("PUT", "/gold", 413, json=big)
    few = Api(tmp_path, "few.db", max_items_per_request=len(ITEMS))
    body = [*_rows(TRUTH), {"item": "i0", "label": "no"}]
    assert "9 gold rows in one request; this server takes at most 8" in few.refused(
        "PUT", "/gold", 422, json=body
    )


def _probas_from_results(results: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """The binary campaign's labels and class probabilities as ``…/results`` reports them
    (confidence = the probability of the label; two classes, so the other is 1 − it)."""
    labels = np.array([CLASSES.index(r["label"]) for r in results])
    confidence = np.array([r["confidence"] for r in results])
    positive = np.where(labels == 1, confidence, 1 - confidence)
    return labels, np.column_stack([1 - positive, positive])


@pytest.mark.parametrize("verdict", [None, "mv", "ds"])
def test_calibration_equals_the_metrics_on_the_results_probabilities(
    api: Api, verdict: str | None
) -> None:
    api.label(18, np.random.default_rng(1))
    sample = {"i0": "no", "i1": "yes", "i2": "no", "i3": "yes", "i4": "yes", "i6": "no"}
    assert api.call("PUT", "/gold", json=_rows(sample)).status_code == 204
    params = {} if verdict is None else {"verdict": verdict}
    found = api.call("GET", "/calibration", params=params).json()
    results = api.call("GET", "/results", params=params).json()
    labels, probas = _probas_from_results(results)
    counts = {r["task"]: r["n_labels"] for r in results}
    gold = np.array(
        [CLASSES.index(sample[r["task"]]) if r["task"] in sample else -1 for r in results]
    )
    scored = np.where(np.array([counts[r["task"]] for r in results]) > 0, gold, -1)
    assert found["n_gold"] == len(sample)
    assert found["n_scored"] == int((scored >= 0).sum()) > 0
    assert found["verdict"] == (verdict or "posterior")
    expected = calibration_metrics(probas, scored, labels=labels)
    assert expected["ece"] == pytest.approx(
        expected_calibration_error(probas, scored, labels=labels)
    )
    assert expected["nll"] == pytest.approx(negative_log_likelihood(probas, scored))
    assert expected["brier"] == pytest.approx(brier_score(probas, scored))
    for name, value in expected.items():  # ``…/results`` JSON keeps 15 digits
        assert found[name] == pytest.approx(value, rel=1e-6, abs=1e-9), name
    # and exactly, on the probabilities the campaign computes
    campaign = api.client.app.state.service.campaign(api.cid)  # type: ignore[attr-defined]
    labels, probas = campaign.verdict_probabilities(verdict)
    reported = np.array([r["confidence"] for r in results])
    exact_confidence = probas[np.arange(labels.shape[0]), labels]
    np.testing.assert_allclose(reported, exact_confidence, rtol=1e-14, atol=0)
    exact = calibration_metrics(probas, scored, labels=labels)
    assert {name: found[name] for name in exact} == exact
    # the probability floor the gold supports, and its cross-fitted metrics (folds from the
    # campaign's seed)
    floor = floor_calibration(
        probas, scored, labels=labels, rng=np.random.default_rng(campaign.config.seed)
    )
    assert found["floor"]["epsilon"] == floor["floor"] == fit_probability_floor(probas, scored)
    assert found["floor"]["n_folds"] == floor["n_folds"] == min(5, found["n_scored"])
    assert found["floor"]["cross_fitted"] == floor["cross_fitted"]
    # the reliability bins: every scored item once, and they give back the ECE
    bins = found["bins"]
    assert len(bins) == 10 and sum(b["count"] for b in bins) == found["n_scored"]
    ece = sum(b["count"] * abs(b["accuracy"] - b["confidence"]) for b in bins if b["count"]) / max(
        found["n_scored"], 1
    )
    assert ece == pytest.approx(found["ece"])
    if verdict is None:  # the dashboard shows the campaign's own verdict
        assert api.call("GET", "/dashboard").json()["calibration"] == found


def test_gold_items_without_labels_are_not_scored(api: Api) -> None:
    assert api.call("PUT", "/gold", json=_rows({"i0": "no", "i1": "yes"})).status_code == 204
    found = api.call("GET", "/calibration").json()
    assert (found["n_gold"], found["n_scored"]) == (2, 0)
    assert found["accuracy"] is None and found["ece"] is None
    assert all(b["count"] == 0 for b in found["bins"])


def _run(gold_plan: dict[int, dict[str, str] | None], store: EventStore) -> list[tuple[str, str]]:
    """A campaign whose policy breaks ties at random and models workers (slots double as
    workers join: the policy is rebuilt), reloaded from its store halfway; ``gold_plan``
    sets (a dict) or removes (None) gold before the k-th request. Returns its decisions."""
    campaign = Campaign.create(
        ITEMS, budget=30, classes=CLASSES, policy="opt-kg:posterior=one-coin", seed=7, store=store
    )
    rng = np.random.default_rng(0)
    decisions = []
    for k in range(40):
        if k in gold_plan:
            gold = gold_plan[k]
            if gold is None:
                campaign.remove_gold()
            else:
                campaign.set_gold(gold)
        if k == 20:
            campaign = Campaign.load(store, campaign.campaign_id)
        worker = f"w{k % 7}"
        work = campaign.next_assignment(worker)
        if work is not None:
            decisions.append((work.item_id, worker))
            campaign.record_label(work.assignment_id, CLASSES[int(rng.integers(2))])
    return decisions


def test_gold_never_changes_an_allocation() -> None:
    without = _run({}, EventStore("sqlite://"))
    plan: dict[int, dict[str, str] | None] = {0: {"i0": "no"}, 5: {"i1": "yes", "i2": "no"}}
    plan |= {12: None, 18: {"i3": "yes"}, 30: {"i4": "yes"}}
    store = EventStore("sqlite://")
    with_gold = _run(plan, store)
    assert len(without) > 25
    assert with_gold == without
    kinds = [e.kind for e in store.events(store.campaign_ids()[0])]
    assert kinds.count("gold_set") == 4 and kinds.count("gold_removed") == 1


def test_results_with_the_gold_floor(api: Api) -> None:
    """``…/results?floor=true``: the confidences under the floor that ``…/calibration``
    reports (fitted on the gold items with labels), the labels unchanged; refused, changing
    nothing, while no gold item has a label."""
    assert "gold" in api.refused("GET", "/results", 422, params={"floor": "true"})
    api.label(18, np.random.default_rng(1))
    assert "gold" in api.refused("GET", "/results", 422, params={"floor": "true"})
    sample = {"i0": "no", "i1": "yes", "i2": "no", "i3": "yes", "i4": "yes", "i6": "no"}
    assert api.call("PUT", "/gold", json=_rows(sample)).status_code == 204
    for verdict in (None, "ds"):
        params = {} if verdict is None else {"verdict": verdict}
        plain = api.call("GET", "/results", params=params).json()
        floored = api.call("GET", "/results", params={**params, "floor": "true"}).json()
        epsilon = api.call("GET", "/calibration", params=params).json()["floor"]["epsilon"]
        assert epsilon > 0  # this sample's verdicts are overconfident: the floor moves them
        assert [r["label"] for r in floored] == [r["label"] for r in plain]
        assert [r["n_labels"] for r in floored] == [r["n_labels"] for r in plain]
        expected = [(1 - epsilon) * r["confidence"] + epsilon / len(CLASSES) for r in plain]
        np.testing.assert_allclose([r["confidence"] for r in floored], expected, rtol=1e-12)
