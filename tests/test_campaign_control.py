"""Control tasks and blocking in a live campaign (crowdbudget.campaign.control): the control
rule serves every new worker its first tasks on control items, control answers cost budget,
a spammer is blocked (pull: no work, cause ``blocked``; push: never chosen), the requester
unblocks and blocks by hand and chooses whether the verdict drops the blocked workers'
labels — all events, replayed by ``Campaign.load`` and ``refresh``; a refused request
stores nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.campaign.read_models import fit_verdict, fitted_with_truth
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import CrowdBudgetError

ITEMS = [f"i{k}" for k in range(16)]
TRUTH = {item: str(k % 2) for k, item in enumerate(ITEMS)}
CONTROL = {item: TRUTH[item] for item in ITEMS[:4]}


def _create(store: EventStore | None = None, **kw: Any) -> Campaign:
    control = {"items": CONTROL, "first_k": 2, "rate": 0.0, "block_below": 0.7, "min_answers": 2}
    args: dict[str, Any] = {"budget": 60, "seed": 1, "control": control, **kw}
    return Campaign.create(ITEMS, store=store or EventStore("sqlite://"), **args)


def _answer(campaign: Campaign, worker: str, *, spammer: bool = False) -> str | None:
    """One request of ``worker``, answered right (a spammer: always wrong); the item."""
    work = campaign.next_assignment(worker)
    if work is None:
        return None
    right = TRUTH[work.item_id]
    campaign.record_label(work.assignment_id, str(1 - int(right)) if spammer else right)
    return work.item_id


def _kinds(store: EventStore, campaign: Campaign) -> list[str]:
    return [e.kind for e in store.events(campaign.campaign_id)]


def test_a_new_worker_gets_control_tasks_first_and_pays_for_them() -> None:
    campaign = _create(worker_prices={"alice": 2.0})
    first = [_answer(campaign, "alice") for _ in range(3)]
    assert first[0] in CONTROL and first[1] in CONTROL  # first_k = 2
    assert first[2] not in CONTROL  # rate 0: the policy's item after that
    assert _answer(campaign, "bob") in CONTROL  # every new worker starts with control
    status = campaign.status()
    assert status["spent"] == 2.0 * 3 + 1.0
    control = status["control"]
    assert (control["answers"], control["spent"], control["n_items"]) == (3, 5.0, 4)
    assert control["first_k"] == 2 and control["blocked_labels"] == "drop"
    assert status["blocked_workers"] == []
    # the assignment shows nothing of control: the same fields as any other
    work = campaign.next_assignment("carol")
    assert work is not None and work.item_id in CONTROL
    assert set(work.__dataclass_fields__) == {
        "assignment_id",
        "item_id",
        "worker_id",
        "price",
        "expires_at",
        "status",
        "label",
    }


def test_the_rate_serves_control_tasks_later() -> None:
    campaign = _create(control={"items": CONTROL, "first_k": 1, "rate": 0.5})
    items = [_answer(campaign, "w") for _ in range(5)]
    # the first, then every second task: tasks 1, 3, 5
    assert [item in CONTROL for item in items] == [True, False, True, False, True]


def test_a_spammer_is_blocked_with_the_evidence() -> None:
    store = EventStore("sqlite://")
    campaign = _create(store)
    assert _answer(campaign, "spam", spammer=True) in CONTROL
    assert not campaign.is_blocked("spam")
    assert _answer(campaign, "spam", spammer=True) in CONTROL  # 0 of 2: P(a < 0.7) = 0.973
    assert campaign.is_blocked("spam")
    assert campaign.next_assignment("spam") is None
    assert campaign.no_work_reason("spam") == "blocked"
    assert _answer(campaign, "good") in CONTROL  # others still get work
    (blocked,) = campaign.status()["blocked_workers"]
    assert blocked["worker"] == "spam" and blocked["by"] == "rule"
    assert (blocked["correct"], blocked["answered"], blocked["level"]) == (0, 2, 0.7)
    assert blocked["p_below"] == pytest.approx(1 - 0.3**3)  # Beta(1, 3) below 0.7
    assert blocked["spent"] == 2.0
    (event,) = [e for e in store.events(campaign.campaign_id) if e.kind == "worker_blocked"]
    assert event.payload == {
        "worker": "spam",
        **{k: v for k, v in blocked.items() if k != "worker"},
    }


def test_unblock_reverses_and_the_rule_does_not_block_again() -> None:
    store = EventStore("sqlite://")
    campaign = _create(store)
    for _ in range(2):
        _answer(campaign, "spam", spammer=True)
    assert campaign.unblock_worker("spam") is True
    assert campaign.unblock_worker("spam") is False  # not blocked: nothing stored
    assert not campaign.is_blocked("spam")
    assert _answer(campaign, "spam", spammer=True) is not None
    assert not campaign.is_blocked("spam")  # the requester overrode the rule
    assert campaign.block_worker("spam") is True
    assert campaign.block_worker("spam") is False
    assert campaign.next_assignment("spam") is None
    (blocked,) = campaign.blocked_workers()
    assert blocked["by"] == "requester" and blocked["answered"] >= 2
    kinds = _kinds(store, campaign)
    assert kinds.count("worker_blocked") == 2 and kinds.count("worker_unblocked") == 1


def test_drop_and_keep_change_the_verdicts_input() -> None:
    campaign = _create(verdict="ds")
    for _ in range(3):
        _answer(campaign, "spam", spammer=True)
        _answer(campaign, "good")
        _answer(campaign, "fair")
    assert campaign.is_blocked("spam")
    spam = campaign.worker_ids.index("spam")
    dropped = campaign.verdict_fit_input()
    assert dropped is not None
    assert spam not in dropped[1].workers and len(dropped[1].labels) == 6
    assert dropped[3] == {ITEMS.index(i): int(c) for i, c in CONTROL.items()}
    drop_results = campaign.results()
    campaign.set_blocked_labels("keep")
    kept = campaign.verdict_fit_input()
    assert kept is not None and len(kept[1].labels) == 8  # spam's labels are back
    assert campaign.status()["control"]["blocked_labels"] == "keep"
    assert campaign.results()["n_labels"].tolist() == drop_results["n_labels"].tolist()
    with pytest.raises(CrowdBudgetError, match="'drop' or 'keep'"):
        campaign.set_blocked_labels("ignore")


def test_everything_survives_load_and_refresh(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    first = _create(EventStore(url), verdict="mv")
    second = Campaign.load(EventStore(url), first.campaign_id)
    for _ in range(2):
        _answer(first, "spam", spammer=True)
        _answer(first, "good")
    first.add_control_items({"i5": "1"})
    first.update_control(rate=0.25, block_confidence=0.9)
    first.set_blocked_labels("keep")
    first.block_worker("good")
    first.unblock_worker("good")
    assert second.refresh() > 0
    reloaded = Campaign.load(EventStore(url), first.campaign_id)
    for copy in (second, reloaded):
        assert copy.status() == first.status()
        assert copy.control_items() == first.control_items() == {**CONTROL, "i5": "1"}
        assert copy.blocked_workers() == first.blocked_workers()
        assert copy.blocked_labels == "keep" and copy.is_blocked("spam")
        assert copy.control_ledger is not None and first.control_ledger is not None
        assert copy.control_ledger.tasks == first.control_ledger.tasks
        assert copy.control_ledger.served == first.control_ledger.served
        assert copy.control_ledger.exempt == {copy.worker_ids.index("good")}
    # the reloaded copy goes on; the first catches up with it
    assert _answer(reloaded, "new") in reloaded.control_items()  # i5 included now
    assert _answer(reloaded, "spam") is None and reloaded.no_work_reason("spam") == "blocked"
    assert first.refresh() > 0 and first.status() == reloaded.status()


def test_control_added_later_counts_the_labels_given_before() -> None:
    campaign = Campaign.create(ITEMS, budget=40, seed=2)
    assert campaign.status()["control"] is None and campaign.control_ledger is None
    seen = [_answer(campaign, "spam", spammer=True) for _ in range(3)]
    _answer(campaign, "early")
    campaign.update_control(block_below=0.7, min_answers=3, first_k=1, rate=0.0)
    assert campaign.add_control_items({item: TRUTH[item] for item in seen if item}) == 3
    assert campaign.is_blocked("spam")  # three wrong answers on items now known
    assert campaign.blocked_workers()[0]["answered"] == 3
    # a worker who worked before control tasks began is past first_k: the policy's item;
    # a new worker starts with a control task
    assert _answer(campaign, "early") not in campaign.control_items()
    assert _answer(campaign, "new") in campaign.control_items()


def test_push_never_chooses_a_blocked_worker() -> None:
    campaign = Campaign.create(
        ITEMS[:8],
        budget=40,
        policy="opt-kg:posterior=one-coin",
        mode="push",
        workers=["a", "b", "c"],
        seed=4,
        control={"items": {"i0": "0", "i1": "1"}},
    )
    campaign.block_worker("b")
    chosen = [a.worker_id for a in campaign.push_assignments(12)]
    assert chosen and "b" not in chosen
    campaign.unblock_worker("b")
    more = []
    for _ in range(6):
        batch = campaign.push_assignments(6)
        for work in batch:
            campaign.record_label(work.assignment_id, TRUTH[work.item_id])
        more += [a.worker_id for a in batch]
    assert "b" in more


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ({}, "control is empty"),
        ({"nope": "1"}, "control for unknown item 'nope'"),
        ({"i1": "maybe"}, "control label 'maybe' of item 'i1' is not a class"),
        ({"i0": "1"}, "is a control item with the answer '0' already"),
        ([["i5", "1"], ["i5", "0"]], "more than once"),
        ({f"x{k}": "1" for k in range(17)}, "17 control rows for a campaign of 16"),
        ([["i5"]], "a control row is (item id, label)"),
    ],
)
def test_bad_control_items_are_refused_and_store_nothing(rows: Any, needle: str) -> None:
    store = EventStore("sqlite://")
    campaign = _create(store)
    before = [(e.kind, e.payload) for e in store.events(campaign.campaign_id)]
    with pytest.raises(CrowdBudgetError) as error:
        campaign.add_control_items(rows)
    assert needle in str(error.value)
    assert [(e.kind, e.payload) for e in store.events(campaign.campaign_id)] == before
    assert campaign.control_items() == CONTROL


@pytest.mark.parametrize(
    ("settings", "needle"),
    [
        ({"first_k": -1}, "first_k must be an integer >= 0"),
        ({"first_k": True}, "first_k must be an integer"),
        ({"rate": 1.5}, "control rate must be in [0, 1]"),
        ({"rate": "0.1"}, "rate must be a number"),
        ({"block_below": 1.0}, "block level must be in (0, 1)"),
        ({"block_confidence": float("nan")}, "finite"),
        ({"min_answers": 0}, "min_answers must be an integer >= 1"),
        ({"prior": [1.0]}, "prior must be two numbers"),
        ({"prior": [1.0, 0.0]}, "prior must be two numbers > 0"),
        ({"level": 0.5}, "unknown control setting 'level'"),
    ],
)
def test_bad_control_settings_are_refused(settings: dict[str, Any], needle: str) -> None:
    store = EventStore("sqlite://")
    campaign = _create(store)
    n = len(_kinds(store, campaign))
    with pytest.raises(CrowdBudgetError) as error:
        campaign.update_control(**settings)
    assert needle in str(error.value)
    assert len(_kinds(store, campaign)) == n
    # and at creation: nothing stored at all
    empty = EventStore("sqlite://")
    with pytest.raises(CrowdBudgetError):
        Campaign.create(ITEMS, budget=5, store=empty, control={"items": CONTROL, **settings})
    assert empty.campaign_ids() == []


def test_bad_requests_around_workers_store_nothing() -> None:
    store = EventStore("sqlite://")
    campaign = _create(store)
    n = len(_kinds(store, campaign))
    for call in (
        lambda: campaign.block_worker("nobody"),
        lambda: campaign.unblock_worker("nobody"),
        lambda: campaign.set_blocked_labels("keep "),
        lambda: Campaign.create(ITEMS, budget=5, store=store, control=["i0"]),  # type: ignore[arg-type]
    ):
        with pytest.raises(CrowdBudgetError):
            call()
    assert len(_kinds(store, campaign)) == n and len(store.campaign_ids()) == 1


def test_a_campaign_without_control_stores_what_it_did() -> None:
    store = EventStore("sqlite://")
    campaign = Campaign.create(ITEMS, budget=10, store=store)
    (created,) = list(store.events(campaign.campaign_id))
    assert "control" not in created.payload
    _answer(campaign, "w")
    status = campaign.status()
    assert status["control"] is None and status["blocked_workers"] == []
    assert campaign.verdict_fit_input("mv") is not None
    assert campaign.verdict_fit_input("mv")[3] is None  # type: ignore[index]


def test_the_status_reads_the_verdict() -> None:
    campaign = _create(verdict="mv")
    for worker in ("a", "b", "c", "a", "b", "c", "a"):
        _answer(campaign, worker)
    results = campaign.results()
    assert campaign.status()["estimated_accuracy"] == pytest.approx(results["confidence"].mean())
    # items_confident reads the same fit (mv: a lone label is certain; the vote posterior's
    # Beta(2, 1) says 0.75)
    confident = int((results["confidence"] >= 0.95).sum())
    assert campaign.status()["items_confident"] == confident > 0
    posterior = Campaign.create(ITEMS, budget=10)
    _answer(posterior, "w")
    confidence = posterior.results()["confidence"].mean()
    assert posterior.status()["estimated_accuracy"] == pytest.approx(confidence)


class _Reads:
    """A stand-in aggregator whose fit takes known truth."""

    def __init__(self) -> None:
        self.seen: Any = "unset"

    def fit(self, data: LabelData, *, known_truth: Any = None) -> _Reads:
        self.seen = known_truth
        return self


class _Ignores:
    def fit(self, data: LabelData) -> _Ignores:
        return self


def test_known_truth_is_passed_only_to_a_fit_that_takes_it() -> None:
    data = LabelData(
        items=np.array([0, 1]),
        workers=np.array([0, 0]),
        labels=np.array([1, 0]),
        item_ids=np.array(["a", "b"], dtype=object),
        worker_ids=np.array(["w"], dtype=object),
        classes=("0", "1"),
    )
    reads = _Reads()
    assert fitted_with_truth(reads, data, {0: 1}) is reads and reads.seen == {0: 1}  # type: ignore[arg-type]
    fitted_with_truth(_Ignores(), data, {0: 1})  # type: ignore[arg-type]
    labels, probabilities, _ = fit_verdict("mv", data, 0, {0: 1})
    assert labels.shape == (2,) and probabilities.shape == (2, 2)
