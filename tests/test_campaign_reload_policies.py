"""Every live policy reloads to the same decisions, select-side state included.

A live campaign reloaded from its store (:meth:`Campaign.load`, what a restarted service
does) must make the decisions the never-restarted campaign makes. Beside the random stream
(tests/test_campaign_reload.py), some policies change state in ``select`` that replaying the
labels does not rebuild (a cursor, a plan position, a bucket order); the campaign logs the
questions asked of such a policy and a reload asks them again
(``campaign/problem_build.py``, "Select-side state"). Each check compares the whole sequence
of decisions of one campaign run straight through with the same campaign reloaded at a step
(after a label, or between an assignment and its label), for every registered policy id in
every live mode it declares, the crowd giving the same answers.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.campaign.problem_build import PENDING_RUNS
from crowdbudget.exceptions import CrowdBudgetError
from crowdbudget.registry import parse_policy, registered_policies
from service_helpers import CampaignApi
from test_campaign_reload import simulated_answer

N_ITEMS, N_WORKERS, BUDGET, STEPS, SEED = 8, 4, 16.0, 18, 1
RELOADS = ((3, False), (3, True), (11, False), (11, True))  # (step, mid-assignment)


#: beside the registered ids, the default policy and its refit variant (as the golden
#: live cases: tests/golden/record.py)
VARIANTS = ("opt-kg:posterior=one-coin", "opt-kg:posterior=one-coin:refit=10")


def _live_pairs() -> list[tuple[str, str]]:
    """Every registered id (and :data:`VARIANTS`) in every live mode it declares."""
    return [
        (policy_id, mode)
        for policy_id in [*sorted(registered_policies()), *VARIANTS]
        for mode in parse_policy(policy_id).capabilities.live_modes()
    ]


def _create(
    policy: str, mode: str, store: EventStore, budget: float = BUDGET, **settings: object
) -> Campaign:
    dp = policy == "dp"
    return Campaign.create(
        [f"i{k}" for k in range(4 if dp else N_ITEMS)],
        budget=8.0 if dp else budget,
        policy=policy,
        seed=SEED,
        workers=[f"w{k}" for k in range(N_WORKERS)],
        mode=mode,
        store=store,
        clock=lambda: 0.0,
        **settings,  # type: ignore[arg-type]
    )


#: the busy campaign: a label cap, one pending assignment per worker, two pushed per step
#: (the second may be refused: a question that writes no event), labels a step late
BUSY = {"max_labels_per_item": 2, "max_pending_per_worker": 1}
#: pull, busy: from this step on a new worker asks each time (nothing closed to them, after
#: items left at the label cap)
NEWCOMERS_FROM = 13


def _run(
    policy: str,
    mode: str,
    *,
    busy: bool = False,
    reload_at: int | None = None,
    mid: bool = False,
) -> tuple[list[tuple[int, int | None]], Campaign]:
    """The (worker, item) of every assignment or empty request (item None; push: worker −1)
    and the campaign at the end. Pull: the workers ask in turn;
    push: one assignment pushed per step. Labels come back at once; ``busy``: the campaign
    has :data:`BUSY`'s settings, push asks for two assignments per step, pull has a new
    worker ask from step :data:`NEWCOMERS_FROM` on, and each step's assignments are answered
    at the next step (the first one of step 5 cancelled instead).
    ``reload_at``: the step at which the campaign is reloaded from its store (``mid``: after
    that step's assignments, before their labels; else before the step's request — busy:
    right after the last step's requests, a refused push among them)."""
    store = EventStore("sqlite://")
    campaign = _create(policy, mode, store, **(BUSY if busy else {}))
    cid = campaign.campaign_id
    sequence: list[tuple[int, int | None]] = []
    held: list[tuple[str, int, int, int]] = []  # (assignment id, item, worker, step)
    for step in range(STEPS):
        if step == reload_at and not mid:
            campaign = Campaign.load(store, cid, clock=lambda: 0.0)
        if busy:  # last step's work comes back now
            held = _settle(campaign, held, busy=busy)
        if mode == "push":
            given = campaign.push_assignments(2 if busy else 1)
        else:
            newcomer = busy and step >= NEWCOMERS_FROM  # holds no item: nothing closed
            one = campaign.next_assignment(f"n{step}" if newcomer else f"w{step % N_WORKERS}")
            given = [] if one is None else [one]
        if not given:
            sequence.append((step % N_WORKERS if mode == "pull" else -1, None))
        for assignment in given:
            worker, item = int(assignment.worker_id[1:]), int(assignment.item_id[1:])
            sequence.append((worker, item))
            held.append((assignment.assignment_id, item, worker, step))
        if step == reload_at and mid:
            campaign = Campaign.load(store, cid, clock=lambda: 0.0)
        if not busy:
            held = _settle(campaign, held, busy=busy)
    return sequence, campaign


def _settle(campaign: Campaign, held: list[tuple[str, int, int, int]], *, busy: bool) -> list[Any]:
    """Answer the ``held`` assignments (``busy``: the first one given at step 5 cancelled
    instead)."""
    for k, (assignment_id, item, worker, given_at) in enumerate(held):
        if busy and given_at == 5 and k == 0:
            campaign.cancel_assignment(assignment_id)
        else:
            campaign.record_label(assignment_id, simulated_answer(item, worker, given_at))
    return []


@pytest.mark.parametrize("busy", [False, True], ids=["plain", "busy"])
@pytest.mark.parametrize(("policy", "mode"), _live_pairs())
def test_every_live_policy_reloads_to_the_same_decisions(
    policy: str, mode: str, busy: bool
) -> None:
    try:
        straight, _ = _run(policy, mode, busy=busy)
    except CrowdBudgetError:  # needs what this campaign has not (contexts, features)
        pytest.skip(f"{policy} does not run live on this campaign")
    reloads = [_run(policy, mode, busy=busy, reload_at=step, mid=mid) for step, mid in RELOADS]
    for (step, mid), (reloaded, _) in zip(RELOADS, reloads, strict=True):
        assert reloaded == straight, (step, "mid" if mid else "after")
    for _, campaign in reloads:  # every replayed question answered as its log says
        assert campaign._questions.mismatches == 0


def _copy(
    store: EventStore, cid: str, edit: dict[int, dict[str, object]] | None = None
) -> EventStore:
    """A new store holding ``cid``'s events (the payloads of ``edit``'s event numbers
    updated): a backup another process loads, so the two never write to one store."""
    copy = EventStore("sqlite://")
    for event in store.events(cid):
        payload = {**event.payload, **(edit or {}).get(event.seq, {})}
        copy.append(cid, event.seq, event.kind, payload)
    return copy


def _questions_of(store: EventStore, cid: str) -> list[object]:
    return [e.payload["asked"] for e in store.events(cid) if "asked" in e.payload]


def test_a_policy_without_select_state_logs_no_question() -> None:
    """Only a policy that declares select-side state has its questions in the events."""
    store = EventStore("sqlite://")
    campaign = _create("opt-kg", "pull", store)
    for step in range(6):
        given = campaign.next_assignment(f"w{step % N_WORKERS}")
        assert given is not None
        campaign.record_label(given.assignment_id, "1")
    assert _questions_of(store, campaign.campaign_id) == []


def test_a_request_answered_with_nothing_logs_its_question_in_an_event_of_its_own() -> None:
    """A worker who can take no open item asks again and again: the policy is asked, no
    assignment follows; the first request writes a ``no_work`` event with its question (not
    one of the policy's stream: its stop reason stays), the later ones ride on the next
    event; a reload asks them all again and decides as the running campaign."""
    store = EventStore("sqlite://")
    campaign = _create("round-robin", "pull", store, budget=30.0, max_labels_per_item=2)
    cid = campaign.campaign_id
    for worker in ("w0", "w1"):
        for _ in range(N_ITEMS):
            given = campaign.next_assignment(worker)
            assert given is not None
            campaign.record_label(given.assignment_id, "1")
    for _ in range(3):  # every item has its two labels: nothing is open
        assert campaign.next_assignment("w2") is None
    assert campaign.no_work_reason("w2") == "done"
    events = list(store.events(cid))[-1:]
    assert [(e.kind, e.payload["asked"]) for e in events] == [("no_work", [["w2", 1]])]
    campaign.add_items(["j0", "j1"])
    added = list(store.events(cid))[-1]
    assert (added.kind, added.payload["asked"]) == ("items_added", [["w2", 2]])
    twin = Campaign.load(_copy(store, cid), cid)
    assert twin._questions.mismatches == 0
    for worker in ("w3", "w2", "w3"):
        mine, theirs = campaign.next_assignment(worker), twin.next_assignment(worker)
        assert mine is not None and theirs is not None and mine.item_id == theirs.item_id


def test_a_copy_that_refreshes_asks_the_writers_questions(tmp_path: Path) -> None:
    """Two processes on one store (push, KOS: its graph is drawn at the first question and
    walked in the next ones): the copy that caught up with :meth:`Campaign.refresh` asked the
    writer's questions again and decides as a copy loaded from a backup of the store."""
    url = f"sqlite:///{tmp_path / 'two.db'}"
    writer = _create("kos", "push", EventStore(url), max_pending_per_worker=1)
    cid = writer.campaign_id
    reader = Campaign.load(EventStore(url), cid, clock=lambda: 0.0)
    for step in range(5):
        for given in writer.push_assignments(2):  # the second may be refused: no_work
            worker, item = int(given.worker_id[1:]), int(given.item_id[1:])
            writer.record_label(given.assignment_id, simulated_answer(item, worker, step))
    kinds = [e.kind for e in EventStore(url).events(cid)]
    assert "no_work" in kinds
    assert reader.refresh() == len(kinds) - 1 and reader._questions.mismatches == 0
    twin = Campaign.load(_copy(EventStore(url), cid), cid, clock=lambda: 0.0)
    for step in range(5, 8):  # the writer has stopped: the reader writes now
        mine, theirs = reader.push_assignments(1), twin.push_assignments(1)
        assert [(a.item_id, a.worker_id) for a in mine] == [
            (a.item_id, a.worker_id) for a in theirs
        ]
        for campaign, (given,) in ((reader, mine), (twin, theirs)):
            worker, item = int(given.worker_id[1:]), int(given.item_id[1:])
            campaign.record_label(given.assignment_id, simulated_answer(item, worker, step))


def test_a_question_answered_otherwise_is_counted_and_the_events_stay_the_truth() -> None:
    """A store whose logged question a replay answers otherwise (here: the log edited to name
    another worker) loads with a warning, counts the mismatch, and applies the logged event
    as it is."""
    store = EventStore("sqlite://")
    campaign = _create("round-robin", "pull", store)
    cid = campaign.campaign_id
    for step in range(4):
        given = campaign.next_assignment(f"w{step}")
        assert given is not None
        campaign.record_label(given.assignment_id, "0")
    last = list(store.events(cid))[-2]  # the last assignment: asked by w3, item i3
    assert last.kind == "assigned" and last.payload["asked"] == [["w3"]]
    forged = _copy(store, cid, {last.seq: {"asked": [["w3", 1], ["w3"]]}})  # one more
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reloaded = Campaign.load(forged, cid)
    assert reloaded._questions.mismatches == 1
    assert any("replayed question" in str(w.message) for w in caught)
    assert reloaded.status()["n_labels"] == campaign.status()["n_labels"] == 4


def test_the_service_refuses_client_supplied_policy_keys(tmp_path: Path) -> None:
    """A client cannot put the policy's keys into an event: every request body is strict
    (unknown fields are refused, the store unchanged), and the questions in the events are
    the server's own — the worker who asked, as its credentials say."""
    api = CampaignApi(
        tmp_path,
        {"items": [f"i{k}" for k in range(4)], "budget": 8, "policy": "round-robin"},
    )
    token = api.worker("ann")
    work = api.call("POST", "/assignments", key=token)
    assert work.status_code == 200
    label = f"/assignments/{work.json()['assignment_id']}/label"
    for key in ("asked", "rng"):
        api.refused("POST", label, 422, key=token, json={"label": "1", key: [["bob"]]})
        api.refused("PATCH", "", 422, json={"ttl": 60, key: [["bob"]]})
    assert api.call("POST", label, key=token, json={"label": "1"}).status_code == 200
    store = EventStore(api.url)
    assert _questions_of(store, api.cid) == [[["ann"]]]
    reloaded = Campaign.load(store, api.cid)
    assert reloaded._questions.mismatches == 0


def divergences(*, busy: bool) -> tuple[list[str], int]:
    """The pairs whose decisions differ after some reload (each with its reloads: step, ``a``
    after or ``m`` mid, ``@`` the first request that differs), and the pairs that run — the
    count docs/decisions.md reports before and after a change (runs on code without the
    question log too: it compares decisions only)."""
    diverged, runs = [], 0
    for policy, mode in _live_pairs():
        try:
            straight, _ = _run(policy, mode, busy=busy)
        except CrowdBudgetError:
            continue
        runs += 1
        bad = []
        for step, mid in RELOADS:
            reloaded, _ = _run(policy, mode, busy=busy, reload_at=step, mid=mid)
            if reloaded != straight:
                pairs = enumerate(zip(reloaded, straight, strict=False))
                first = next((k for k, (a, b) in pairs if a != b), len(straight))
                bad.append(f"{step}{'m' if mid else 'a'}@{first}")
        if bad:
            diverged.append(f"{policy}/{mode} [{' '.join(bad)}]")
    return diverged, runs


if __name__ == "__main__":  # python tests/test_campaign_reload_policies.py
    warnings.simplefilter("ignore")
    for busy in (False, True):
        found, runs = divergences(busy=busy)
        print(f"{'busy' if busy else 'plain'}: {len(found)} of {runs} diverge:", ", ".join(found))


def test_polling_a_campaign_with_nothing_open_does_not_grow_the_store() -> None:
    """Workers polling a flagged campaign with nothing open write one ``no_work`` event, then
    one per :data:`PENDING_RUNS` runs of askers; a reload after the next event asks every
    poll again and decides as the running campaign."""
    store = EventStore("sqlite://")
    campaign = _create("round-robin", "pull", store, budget=30.0, max_labels_per_item=1)
    cid = campaign.campaign_id
    for _ in range(N_ITEMS):
        given = campaign.next_assignment("w0")
        assert given is not None
        campaign.record_label(given.assignment_id, "1")
    before = len(list(store.events(cid)))
    polls = 3 * PENDING_RUNS
    for k in range(polls):  # two workers in turn: every poll a run of its own
        assert campaign.next_assignment(f"w{1 + k % 2}") is None
    kinds = [e.kind for e in store.events(cid)][before:]
    assert kinds == ["no_work"] * 3
    campaign.add_items(["j0"])
    twin = Campaign.load(_copy(store, cid), cid)
    assert twin._questions.mismatches == 0
    mine, theirs = campaign.next_assignment("w1"), twin.next_assignment("w1")
    assert mine is not None and theirs is not None and mine.item_id == theirs.item_id
