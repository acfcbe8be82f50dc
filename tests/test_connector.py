"""The connector surface (``crowdbudget.integrations.connector``) with a second platform.

``MemoryPlatform`` is a whole platform in memory: tasks that are open for a number of
annotators, annotators who take an open task and answer, predictions shown per task. Its
connector module is ``MemorySync`` — the platform calls and nothing else; everything about the
campaign goes through :class:`CampaignConnector`. The conformance run
(:func:`check_platform_connector`) drives a whole campaign through it with a restart halfway
and checks what the surface guarantees: the budget is never exceeded, a restart loses and
duplicates nothing, over-submissions are recorded, and the events read from a sequence number
tell the same story as the campaign.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.integrations.connector import (
    EVENT_KINDS,
    SLOT_WORKER_PREFIX,
    CampaignConnector,
    ConnectorEvent,
    PlatformTasks,
)

CLASSES = ("no", "yes")


@dataclass(frozen=True)
class MemoryAnnotation:
    annotator: int
    label: str | None


class MemoryPlatform:
    """A labeling platform in memory: a task is served to an annotator while fewer than its
    ``capacity`` annotators have answered it (closed at 0), one answer per annotator."""

    def __init__(self, n_tasks: int) -> None:
        self.capacity = {f"t{k}": 0 for k in range(n_tasks)}
        self.answers: dict[str, list[MemoryAnnotation]] = {task: [] for task in self.capacity}
        self.predictions: dict[str, tuple[str, float]] = {}

    # the platform's own behaviour (its annotators)
    def next_task(self, annotator: int) -> str | None:
        for task, capacity in self.capacity.items():
            done = {a.annotator for a in self.answers[task]}
            if len(done) < capacity and annotator not in done:
                return task
        return None

    def annotate(self, task: str, annotator: int, label: str | None) -> None:
        self.answers[task].append(MemoryAnnotation(annotator, label))

    # the platform calls a connector module wraps (PlatformTasks)
    def list_tasks(self) -> list[str]:
        return list(self.capacity)

    def read_annotations(self, task_ids: Sequence[str]) -> dict[str, list[MemoryAnnotation]]:
        return {task: list(self.answers[task]) for task in task_ids}

    def set_open(self, task_id: str, n_annotators: int, n_open_slots: int) -> None:
        self.capacity[task_id] = n_annotators + n_open_slots

    def write_prediction(self, task_id: str, label: str, score: float) -> None:
        self.predictions[task_id] = (label, score)


class MemorySync:
    """The whole connector module of the in-memory platform: platform calls only."""

    def __init__(self, platform: PlatformTasks, campaign: Campaign, open_slots: int) -> None:
        self.platform = platform
        self.connector = CampaignConnector(campaign, annotator_prefix="memory-user-")
        self.campaign = campaign
        self.open_slots = open_slots

    def reconcile(self, task_ids: Sequence[str] | None = None) -> int:
        read = self.platform.read_annotations(task_ids or self.platform.list_tasks())
        recorded, touched = self.connector.reconcile(read, self.open_slots)
        for task_id in touched:
            answered = len(read[task_id]) if task_id in read else self._answered(task_id)
            self.platform.set_open(task_id, answered, self.connector.n_open_slots(task_id))
        return recorded

    def _answered(self, task_id: str) -> int:
        return len(self.platform.read_annotations([task_id])[task_id])

    def write_verdicts(self) -> None:
        for task_id, label, confidence, n_labels in self.campaign.results().itertuples():
            if n_labels > 0:
                self.platform.write_prediction(str(task_id), str(label), float(confidence))


def _campaign(store: EventStore, platform: MemoryPlatform, budget: float) -> Campaign:
    return Campaign.create(
        platform.list_tasks(),
        budget=budget,
        classes=CLASSES,
        policy="opt-kg",
        seed=3,
        ttl=60.0,
        store=store,
        campaign_id="memory",
    )


def check_platform_connector(
    platform: MemoryPlatform, store: EventStore, *, budget: int, seed: int
) -> list[ConnectorEvent]:
    """Run a campaign on ``platform`` through the surface, restarting the connector module
    halfway, and check the surface's guarantees; returns the events a subscriber read."""
    rng = np.random.default_rng(seed)
    sync = MemorySync(platform, _campaign(store, platform, budget), open_slots=3)
    sync.reconcile()
    read: list[ConnectorEvent] = []
    given = 0
    restarted = False
    for step in range(20 * budget):
        if step == budget // 2:  # a restart: a new process loads the campaign from the store
            held = sorted(s.slot_id for s in sync.connector.open_slots())
            sync = MemorySync(platform, Campaign.load(store, "memory"), open_slots=3)
            assert sorted(s.slot_id for s in sync.connector.open_slots()) == held
            restarted = True
        annotator = int(rng.integers(1, 12))
        task = platform.next_task(annotator)
        if task is None:
            if sync.connector.stopped:
                break
            sync.reconcile()
            continue
        label = CLASSES[int(rng.random() < 0.7)] if rng.random() < 0.95 else None
        platform.annotate(task, annotator, label)
        given += label is not None
        if step % 3:  # a third of the notifications are lost: the next full read recovers them
            sync.reconcile([task])
        read.extend(sync.connector.events(after=read[-1].seq if read else 0))
        read = [e for e in read if e.kind != "stopped"]
    # a submission to a closed task (through the platform's API): an over-submission
    closed = next(t for t, c in platform.capacity.items() if len(platform.answers[t]) >= c)
    platform.annotate(closed, 99, "yes")
    given += 1
    sync.reconcile()
    sync.write_verdicts()
    read.extend(sync.connector.events(after=read[-1].seq if read else 0))

    status = sync.campaign.status()
    connector = sync.connector
    assert restarted and status["stopped"]
    assert status["spent"] <= budget  # never over budget
    assert status["n_labels"] == given  # nothing lost, nothing twice
    assert status["n_labels"] == status["spent"] + connector.over_submissions
    assert connector.over_submissions >= 1
    labels = [e for e in read if e.kind in ("label_accepted", "label_free")]
    assert len(labels) == given
    assert sum(e.kind == "label_free" for e in labels) == connector.over_submissions
    assert all(e.slot for e in read if e.kind == "label_accepted")
    assert [e.seq for e in read if e.kind != "stopped"] == sorted(
        e.seq for e in read if e.kind != "stopped"
    )
    labeled = {t for t, rows in platform.answers.items() if any(a.label for a in rows)}
    assert set(platform.predictions) == labeled
    return read


def test_a_whole_campaign_on_a_second_platform() -> None:
    events = check_platform_connector(
        MemoryPlatform(n_tasks=12), EventStore("sqlite://"), budget=30, seed=1
    )
    kinds = {e.kind for e in events}
    assert {"assignment_given", "label_accepted", "label_free"} <= kinds
    assert kinds <= set(EVENT_KINDS)
    # free labels carry the platform's annotator; paid ones the slot they filled
    assert all(e.worker_id.startswith("memory-user-") for e in events if e.kind == "label_free")
    assert all(e.worker_id.startswith(SLOT_WORKER_PREFIX) for e in events if e.slot)


def test_events_resume_from_a_sequence_number_and_report_the_stop() -> None:
    platform = MemoryPlatform(n_tasks=3)
    store = EventStore("sqlite://")
    connector = CampaignConnector(_campaign(store, platform, budget=2))
    assert connector.events() == []  # created: no platform-visible change yet
    opened = connector.fill(5)
    assert len(opened) == 2 and connector.n_open_slots() == 2  # the budget pays for two
    first = connector.events()
    assert [e.kind for e in first] == ["assignment_given", "assignment_given"]
    connector.release(opened[0].slot_id)
    settled = connector.settle(opened[1].item_id, "yes", annotator=7)
    assert settled.slot_id == opened[1].slot_id and not settled.over_submission
    later = connector.events(after=first[-1].seq)
    assert [e.kind for e in later] == ["assignment_released", "label_accepted"]
    assert later[1].label == "yes" and later[1].item_id == opened[1].item_id
    # the released budget opens one more slot; with it settled nothing more can be paid
    (last,) = connector.fill(5)
    connector.settle(last.item_id, "no", annotator=8)
    assert connector.fill(5) == [] and connector.stopped
    assert connector.events(after=connector.last_seq)[-1].kind == "stopped"
    # a label with no open slot is an over-submission, recorded free
    free = connector.settle(last.item_id, "yes", annotator=9)
    assert free.over_submission and connector.over_submissions == 1
    assert connector.labels_recorded(last.item_id) == 2
    # a restarted subscriber reads the same story from the store
    again = CampaignConnector(Campaign.load(store, "memory"))
    assert [e for e in again.events() if e.kind != "stopped"] == [
        e for e in connector.events() if e.kind != "stopped"
    ]


def test_an_expired_slot_takes_no_label_and_its_budget_returns() -> None:
    now = [0.0]
    platform = MemoryPlatform(n_tasks=2)
    campaign = _campaign(EventStore("sqlite://"), platform, budget=1)
    campaign.clock = lambda: now[0]
    connector = CampaignConnector(campaign)
    (slot,) = connector.fill(3)
    now[0] = 61.0  # past the time-to-live
    assert connector.settle(slot.item_id, "yes", annotator=1).over_submission
    assert connector.expire_overdue() == 1
    kinds = [e.kind for e in connector.events()]
    assert kinds == ["assignment_given", "label_free", "assignment_expired"]
    assert len(connector.fill(3)) == 1  # the budget came back


def test_record_is_idempotent_and_adds_new_tasks() -> None:
    platform = MemoryPlatform(n_tasks=2)
    connector = CampaignConnector(_campaign(EventStore("sqlite://"), platform, budget=4))
    connector.fill(2)
    rows = [MemoryAnnotation(1, "yes"), MemoryAnnotation(2, None), MemoryAnnotation(3, "no")]
    assert len(connector.record("t0", rows)) == 2
    assert connector.record("t0", rows) == []  # read again: nothing twice
    assert len(connector.record("t9", rows[:1])) == 1  # a task the platform added meanwhile
    assert "t9" in connector.item_ids and connector.labels_recorded("t9") == 1


def test_a_policy_that_chooses_workers_is_refused() -> None:
    CampaignConnector.check_policy("opt-kg", "the platform")
    with pytest.raises(InvalidParameterError, match="chooses workers; the platform"):
        CampaignConnector.check_policy("bbta", "the platform")
