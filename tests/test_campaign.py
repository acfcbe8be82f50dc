"""Live campaigns: budget never overspent, TTL, idempotency, event-sourced rebuild."""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import pytest

from crowdbudget.campaign import (
    AssignmentError,
    Campaign,
    ConcurrentWriteError,
    EventStore,
    UnknownAssignmentError,
)
from crowdbudget.exceptions import (
    BudgetError,
    DataFormatError,
    InvalidParameterError,
    UnknownPolicyError,
)
from service_helpers import FakeClock


def _items(n: int) -> list[str]:
    return [f"item-{i}" for i in range(n)]


def test_budget_counts_pending_assignments() -> None:
    c = Campaign.create(_items(5), budget=3)
    held = [c.next_assignment(f"w{k}") for k in range(3)]
    assert all(a is not None for a in held)
    assert c.next_assignment("w9") is None  # 3 pending use the whole budget
    assert c.status()["remaining"] == 0 and c.status()["pending"] == 3
    c.cancel_assignment(held[0].assignment_id)  # type: ignore[union-attr]
    assert c.next_assignment("w9") is not None  # the cancelled one's budget came back
    assert c.next_assignment("w10") is None


def test_money_budget_with_worker_prices() -> None:
    c = Campaign.create(_items(4), budget=5, worker_prices={"pricey": 3.0}, default_price=1.0)
    a = c.next_assignment("pricey")
    assert a is not None and a.price == 3.0
    assert c.next_assignment("pricey") is not None or c.status()["remaining"] < 3
    c.record_label(a.assignment_id, "1")
    assert c.status()["spent"] == 3.0
    assert c.status()["spent"] + c.status()["committed"] <= 5


def test_a_worker_never_gets_an_item_twice() -> None:
    c = Campaign.create(_items(4), budget=100, policy="opt-kg")
    seen = []
    while (a := c.next_assignment("solo")) is not None:
        seen.append(a.item_id)
        c.record_label(a.assignment_id, "1")
    assert sorted(seen) == _items(4)  # each item once, then nothing left for this worker
    assert c.next_assignment("other") is not None


def test_expired_assignment_returns_budget_and_refuses_late_label() -> None:
    clock = FakeClock(1000.0)
    c = Campaign.create(_items(2), budget=1, ttl=30, clock=clock)
    a = c.next_assignment("slow")
    assert a is not None and c.next_assignment("fast") is None
    clock.now += 31
    b = c.next_assignment("fast")
    assert b is not None  # the expired one's budget is free again
    with pytest.raises(AssignmentError, match="is expired"):
        c.record_label(a.assignment_id, "0")
    assert c.assignment(a.assignment_id).status == "expired"


def test_label_errors_and_idempotency() -> None:
    c = Campaign.create(_items(3), budget=10, classes=["cat", "dog"])
    a = c.next_assignment("w1")
    assert a is not None
    with pytest.raises(DataFormatError, match="label 'cow' is not a class; classes: cat, dog"):
        c.record_label(a.assignment_id, "cow")
    with pytest.raises(AssignmentError, match="belongs to another worker"):
        c.record_label(a.assignment_id, "cat", worker_id="w2")
    c.record_label(a.assignment_id, "cat")
    c.record_label(a.assignment_id, "cat")  # a retry: recorded once
    assert c.status()["n_labels"] == 1 and c.status()["spent"] == 1
    with pytest.raises(AssignmentError, match="already answered with 'cat'"):
        c.record_label(a.assignment_id, "dog")
    with pytest.raises(UnknownAssignmentError, match="no assignment 'nope'"):
        c.record_label("nope", "cat")
    b = c.next_assignment("w1")
    assert b is not None
    c.cancel_assignment(b.assignment_id)
    with pytest.raises(AssignmentError, match="is cancelled"):
        c.record_label(b.assignment_id, "dog")


@pytest.mark.parametrize(
    ("budget", "words"),
    [
        (-1, "budget must be a number > 0, got -1"),
        (0, "budget must be a number > 0, got 0"),
        (float("inf"), "budget must be a finite number > 0, got inf"),
        (float("nan"), "budget must be a finite number > 0, got nan"),
        ("x", "budget must be a number > 0, got 'x'"),
    ],
)
def test_a_bad_budget_is_named_as_everywhere_else(budget: object, words: str) -> None:
    """The campaign checks its budget as the library does (one check, one wording)."""
    from crowdbudget._validation import check_budget

    for check in (lambda: Campaign.create(_items(2), budget=budget), lambda: check_budget(budget)):
        with pytest.raises(BudgetError) as refused:
            check()
        assert str(refused.value) == words


def test_bad_configuration_is_refused_before_any_write() -> None:
    store = EventStore("sqlite://")
    with pytest.raises(BudgetError, match="budget must be a number > 0"):
        Campaign.create(_items(2), budget=-1, store=store)
    with pytest.raises(DataFormatError, match="appears more than once"):
        Campaign.create(["a", "a"], budget=1, store=store)
    with pytest.raises(UnknownPolicyError, match="unknown policy"):
        Campaign.create(_items(2), budget=1, policy="nope", store=store)
    assert store.campaign_ids() == []


def _drive(c: Campaign, rng: np.random.Generator, clock: FakeClock, steps: int) -> None:
    open_ids: list[str] = []
    for step in range(steps):
        action = rng.random()
        clock.now += float(rng.exponential(2.0))
        if action < 0.5 or not open_ids:
            a = c.next_assignment(f"w{int(rng.integers(8))}")
            if a is not None:
                open_ids.append(a.assignment_id)
        elif action < 0.85:
            aid = open_ids.pop(int(rng.integers(len(open_ids))))
            with contextlib.suppress(AssignmentError):  # expired meanwhile
                c.record_label(aid, str(int(rng.integers(2))))
        elif action < 0.92:
            aid = open_ids.pop(int(rng.integers(len(open_ids))))
            with contextlib.suppress(AssignmentError):
                c.cancel_assignment(aid)
        elif action < 0.96:
            c.add_items([f"late-{step}"])
        else:
            c.import_labels(
                pd.DataFrame({"task": ["item-0"], "worker": [f"ext-{step}"], "label": ["1"]})
            )


def test_rebuilt_state_equals_live_state(db_url: str) -> None:
    store = EventStore(db_url)
    clock = FakeClock(1000.0)
    live = Campaign.create(
        _items(12), budget=60, ttl=20, policy="kg-random", clock=clock, store=store
    )
    _drive(live, np.random.default_rng(4), clock, 300)
    again = Campaign.load(EventStore(store.url), live.campaign_id, clock=clock)
    for name in ("label_counts", "pending", "eligible"):
        np.testing.assert_array_equal(getattr(again.state, name), getattr(live.state, name))
    assert again.state.spent == live.state.spent
    assert again.state.committed == pytest.approx(live.state.committed)
    assert again.item_ids == live.item_ids and again.worker_ids == live.worker_ids
    pd.testing.assert_frame_equal(again.results(), live.results())
    pd.testing.assert_frame_equal(again.export_labels(), live.export_labels())
    assert again.status() == live.status()
    assert live.state.spent + live.state.committed <= 60 + 1e-9


def test_second_writer_is_told_to_reload() -> None:
    store = EventStore("sqlite://")
    first = Campaign.create(_items(3), budget=10, store=store)
    second = Campaign.load(store, first.campaign_id)
    first.next_assignment("a")
    with pytest.raises(ConcurrentWriteError, match="reload the campaign"):
        second.next_assignment("b")
    second.refresh()
    assert second.next_assignment("b") is not None
    assert Campaign.load(store, first.campaign_id).status()["pending"] == 2


def test_a_copy_whose_staged_event_lost_its_number_is_diverged_and_never_refreshed(
    tmp_path,
) -> None:
    """Two processes: the second stages an assignment under deferred durability while the
    first writes that event number; the first then labels its assignment. The second copy
    holds a decision the store refused: refreshing it would apply the label of an
    assignment it never saw (a KeyError in the service). It is diverged instead, refuses to
    refresh, and a reload sees both of the first process's events."""
    url = f"sqlite:///{tmp_path / 'two.db'}"
    store = EventStore(url)  # one store object per process
    first = Campaign.create(_items(3), budget=10, store=store)
    second = Campaign.load(EventStore(url), first.campaign_id)
    with second.deferred_durability():
        assert second.next_assignment("b") is not None
    ticket = second.durability_ticket()
    got = first.next_assignment("a")
    assert got is not None
    with pytest.raises(ConcurrentWriteError):
        second.wait_durable(ticket)
    first.record_label(got.assignment_id, "1")
    assert second.diverged and not second.can_refresh()
    with pytest.raises(ConcurrentWriteError, match="reload the campaign"):
        second.refresh()
    fresh = Campaign.load(store, first.campaign_id)
    assert not fresh.diverged and fresh.status()["n_labels"] == 1
    assert fresh.assignment(got.assignment_id).status == "answered"


def test_pull_mode_tells_the_policy_who_asks_requallo_blocks_a_spammer_live() -> None:
    """Requallo (workers=spammer) blocks a worker whose labels disagree with the completed
    items' majority; live, that worker then gets no work while the others still do."""
    rng = np.random.default_rng(0)
    truth = rng.integers(2, size=60)
    c = Campaign.create(
        [f"i{k}" for k in range(60)],
        budget=600,
        # the smallest index among tied items (random since issue 15): items complete one
        # after the other, so the spammer's record against completed items grows fast
        policy="requallo:workers=spammer:fisher=0.2:tie-break=first",
        max_pending_per_worker=1,
    )
    workers = ["spam"] + [f"good{k}" for k in range(6)]
    for step in range(420):
        w = workers[step % len(workers)]
        a = c.next_assignment(w)
        if a is None:
            continue
        item = int(a.item_id[1:])
        good = truth[item] if rng.random() < 0.9 else 1 - truth[item]
        label = int(rng.integers(2)) if w == "spam" else int(good)
        c.record_label(a.assignment_id, str(label))
    assert c.status()["policy_status"]["blocked_workers"] == 1
    assert c.next_assignment("spam") is None  # blocked: no work for the spammer
    assert c.next_assignment("newcomer") is not None  # the others still get work


@pytest.mark.parametrize("policy", ["opt-kg", "uniform", "opt-kg:verdict=ds", "kos", "requallo"])
def test_results_label_and_confidence_come_from_one_verdict(policy: str) -> None:
    rng = np.random.default_rng(3)
    c = Campaign.create(_items(12), budget=40, policy=policy)
    for k in range(40):
        a = c.next_assignment(f"w{k % 7}")
        if a is None:
            break
        c.record_label(a.assignment_id, str(int(rng.integers(2))))
    for verdict in (None, "posterior", "ds", "mv", "one-coin-em"):
        labels, probabilities = c.verdict_probabilities(verdict)
        table = c.results(verdict)
        rows = np.arange(labels.shape[0])
        assert np.allclose(table["confidence"].to_numpy(), probabilities[rows, labels])
        assert list(table["label"]) == [c.config.classes[k] for k in labels]
        assert np.all(probabilities[rows, labels] >= probabilities.max(axis=1) - 1e-12)
    with pytest.raises(InvalidParameterError, match="verdict"):
        c.results("no-such-aggregator")


def test_a_campaign_verdict_is_a_setting_and_validated() -> None:
    store = EventStore("sqlite://")
    c = Campaign.create(_items(3), budget=6, verdict="ds", store=store)
    assert Campaign.load(store, c.campaign_id).config.verdict == "ds"
    with pytest.raises(InvalidParameterError, match="verdict"):
        Campaign.create(_items(3), budget=6, verdict="nope", store=store)
    assert store.campaign_ids() == [c.campaign_id]


def test_a_campaign_without_its_created_event_has_no_configuration() -> None:
    store = EventStore("sqlite://")
    with pytest.raises(InvalidParameterError, match="no created event"):
        _ = Campaign(store).config
    with pytest.raises(InvalidParameterError, match="no campaign 'missing'"):
        Campaign.load(store, "missing")


def test_the_read_model_reads_every_label_once_imported_or_answered() -> None:
    c = Campaign.create(_items(4), budget=6, verdict="mv")
    a = c.next_assignment("w0")
    assert a is not None
    c.record_label(a.assignment_id, "1")
    c.import_labels(pd.DataFrame({"task": ["item-3"], "worker": ["ext"], "label": ["0"]}))
    exported = c.export_labels()
    assert list(exported.itertuples(index=False, name=None)) == [
        (a.item_id, "w0", "1"),
        ("item-3", "ext", "0"),
    ]
    assert c.read_model.status()["n_labels"] == 2
    fit_input = c.verdict_fit_input()
    assert fit_input is not None and fit_input[1].labels.tolist() == [1, 0]
    agreement = c.worker_reliability().set_index("worker")
    assert agreement.loc["w0", "n_labels"] == 1 and agreement.loc["ext", "agreement"] == 1.0
