"""The connector surface (``crowdbudget.integrations.connector``) with a second platform.

``MemoryPlatform`` is a whole platform in memory: tasks that are open for a number of
annotators, annotators who take an open task and answer, predictions shown per task. It
provides the platform calls and nothing else; everything about the campaign goes through
:class:`CampaignConnector` (driven by ``PlatformSync``). The conformance run
(:func:`check_platform_connector`) drives a whole campaign through it with a restart halfway
and checks what the surface guarantees: the budget is never exceeded, a restart loses and
duplicates nothing, over-submissions are recorded, and the events read from a sequence number
tell the same story as the campaign.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.integrations.connector import (
    EVENT_KINDS,
    SLOT_WORKER_PREFIX,
    CampaignConnector,
)
from crowdbudget.integrations.platform import check_platform_connector

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

    # the platform's own behaviour (its annotators): SimulatedPlatform
    def serve(self, annotator: int) -> str | None:
        for task, capacity in self.capacity.items():
            done = {a.annotator for a in self.answers[task]}
            if len(done) < capacity and annotator not in done:
                return task
        return None

    def submit(self, task: str, annotator: int, label: str | None) -> None:
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


def test_a_whole_campaign_on_a_second_platform() -> None:
    platform = MemoryPlatform(n_tasks=12)
    events = check_platform_connector(platform, classes=CLASSES, budget=30, seed=1)
    kinds = {e.kind for e in events}
    assert {"assignment_given", "label_accepted", "label_free"} <= kinds
    assert kinds <= set(EVENT_KINDS)
    # every label carries the platform's annotator, paid (a slot filled) or free; the slots
    # are held by placeholder workers
    labels = [e for e in events if e.kind in ("label_free", "label_accepted")]
    assert all(str(e.worker_id).startswith("platform-user-") for e in labels)
    assert all(e.slot for e in labels if e.kind == "label_accepted")
    given = [e for e in events if e.kind == "assignment_given"]
    assert all(str(e.worker_id).startswith(SLOT_WORKER_PREFIX) and e.slot for e in given)
    # the verdict is shown on every task with a usable answer
    labeled = {t for t, rows in platform.answers.items() if any(a.label for a in rows)}
    assert set(platform.predictions) == labeled


@pytest.mark.parametrize("seed", [2, 3])
def test_the_conformance_run_catches_a_broken_platform(seed: int) -> None:
    class ForgetfulPlatform(MemoryPlatform):
        """Loses every second annotation when read: the campaign then misses labels."""

        def read_annotations(self, task_ids: Sequence[str]) -> dict[str, list[MemoryAnnotation]]:
            return {task: self.answers[task][::2] for task in task_ids}

    with pytest.raises(AssertionError):
        check_platform_connector(ForgetfulPlatform(n_tasks=12), budget=30, seed=seed)


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
