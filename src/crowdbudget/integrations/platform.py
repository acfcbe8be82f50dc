"""A platform connector from platform calls alone, and the conformance run every one must pass.

:class:`PlatformSync` is the controller a new platform needs when its module provides the four
calls of :class:`~crowdbudget.integrations.connector.PlatformTasks`: a reconciliation reads
the tasks' annotations, settles them through the connector surface, opens slots up to a target
and writes each touched task's open state back; :meth:`PlatformSync.write_verdicts` shows the
campaign's verdicts. (Label Studio has its own controller,
:class:`~crowdbudget.integrations.labelstudio.LabelStudioSync`, on the same surface: it caches
what the server shows, batches webhooks and sends its requests concurrently.)

:func:`check_platform_connector` runs a whole campaign on a platform stand-in — the platform
calls plus a way to let its annotators work (:class:`SimulatedPlatform`) — with a restart
halfway, lost notifications, unusable answers and a submission to a closed task, and checks
the surface's guarantees (:mod:`crowdbudget.integrations.connector`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.integrations.connector import (
    CampaignConnector,
    ConnectorEvent,
    PlatformTasks,
)

__all__ = ["PlatformSync", "SimulatedPlatform", "check_platform_connector"]


class PlatformSync:
    """Keeps a platform's open tasks where a campaign wants labels, through
    :class:`~crowdbudget.integrations.connector.CampaignConnector`.

    Parameters
    ----------
    platform : PlatformTasks
        The platform module's calls.
    campaign : Campaign
        The campaign (created or loaded with a durable store); this object is its only writer.
    open_slots : int
        How many slots are kept open at once (the tasks the policy wants most).
    annotator_prefix : str
        Campaign worker-id prefix of the platform's annotators (over-submissions).
    """

    def __init__(
        self,
        platform: PlatformTasks,
        campaign: Campaign,
        *,
        open_slots: int = 10,
        annotator_prefix: str = "annotator-",
    ) -> None:
        self.platform = platform
        self.campaign = campaign
        self.connector = CampaignConnector(campaign, annotator_prefix=annotator_prefix)
        self.open_slots = open_slots

    def reconcile(self, task_ids: Sequence[str] | None = None) -> int:
        """Read the annotations of ``task_ids`` (None: every task), record what is new, open
        slots and write the open state of every task that may have changed; returns the
        labels recorded."""
        ids = list(task_ids) if task_ids is not None else self.platform.list_tasks()
        read = dict(self.platform.read_annotations(ids))
        recorded, touched = self.connector.reconcile(read, self.open_slots)
        unread = sorted(touched - set(read))
        if unread:
            read.update(self.platform.read_annotations(unread))
        for task_id in sorted(touched):
            n_open = self.connector.n_open_slots(task_id)
            self.platform.set_open(task_id, len(read[task_id]), n_open)
        return recorded

    def write_verdicts(self) -> int:
        """Write every labeled task's final label and its probability; returns how many."""
        n = 0
        for task_id, label, confidence, n_labels in self.campaign.results().itertuples():
            if n_labels > 0:
                self.platform.write_prediction(str(task_id), str(label), float(confidence))
                n += 1
        return n


class SimulatedPlatform(PlatformTasks, Protocol):
    """A platform stand-in for :func:`check_platform_connector`: the platform calls, plus
    ``serve`` (the task the platform would give ``annotator`` now, None: none open to them)
    and ``submit`` (the annotator's answer; None: an unusable one, e.g. no choice made)."""

    def serve(self, annotator: int) -> str | None: ...

    def submit(self, task_id: str, annotator: int, label: str | None) -> None: ...


def check_platform_connector(
    platform: SimulatedPlatform,
    *,
    classes: Sequence[str] = ("no", "yes"),
    budget: int = 30,
    seed: int = 0,
    n_annotators: int = 11,
) -> list[ConnectorEvent]:
    """Run a campaign on ``platform`` (fresh, no annotations yet) through
    :class:`PlatformSync` and check the connector guarantees; returns the events a subscriber
    read from sequence numbers. Raises AssertionError naming the broken guarantee.

    The run: annotators drawn with ``np.random.default_rng(seed)`` take served tasks; two
    notifications in three reach the sync (the rest are recovered by full reconciliations);
    one answer in twenty is unusable; the sync restarts (a new object loading the campaign
    from the store) after ``budget // 2`` steps; at the end a closed task gets one more answer.
    """
    rng = np.random.default_rng(seed)
    store = EventStore("sqlite://")
    campaign = Campaign.create(
        platform.list_tasks(), budget=budget, classes=classes, seed=seed, ttl=600.0, store=store
    )
    campaign_id = campaign.campaign_id
    sync = PlatformSync(platform, campaign, open_slots=3, annotator_prefix="platform-user-")
    sync.reconcile()
    read: list[ConnectorEvent] = []
    given = 0
    restarted = False
    for step in range(40 * budget):
        if step == budget // 2:
            held = sorted(s.slot_id for s in sync.connector.open_slots())
            sync = PlatformSync(
                platform,
                Campaign.load(store, campaign_id),
                open_slots=3,
                annotator_prefix="platform-user-",
            )
            loaded = sorted(s.slot_id for s in sync.connector.open_slots())
            assert loaded == held, "a restart lost or invented open slots"
            restarted = True
        annotator = int(rng.integers(1, n_annotators + 1))
        task_id = platform.serve(annotator)
        if task_id is None:
            if sync.connector.stopped:
                break
            sync.reconcile()
            continue
        usable = rng.random() >= 0.05
        label = str(classes[int(rng.integers(len(classes)))]) if usable else None
        platform.submit(task_id, annotator, label)
        given += usable
        if step % 3:
            sync.reconcile([task_id])
        read.extend(e for e in sync.connector.events(read[-1].seq if read else 0))
        read = [e for e in read if e.kind != "stopped"]
    assert restarted, "the campaign ended before the restart: raise the budget"
    assert sync.connector.stopped, "the campaign did not stop"
    # a submission to a closed task (through the platform's API): an over-submission
    done = next(iter(e.item_id for e in read if e.kind == "label_accepted"))
    assert done is not None
    assert platform.serve(n_annotators + 1) is None, "a stopped campaign left a task open"
    platform.submit(done, n_annotators + 1, str(classes[0]))
    given += 1
    sync.reconcile()
    sync.write_verdicts()
    read.extend(sync.connector.events(read[-1].seq if read else 0))

    status = sync.campaign.status()
    connector = sync.connector
    assert status["spent"] <= budget, "the budget was exceeded"
    assert status["n_labels"] == given, "labels were lost or recorded twice"
    assert status["n_labels"] == status["spent"] + connector.over_submissions
    assert connector.over_submissions >= 1, "the over-submission was not recorded"
    labels = [e for e in read if e.kind in ("label_accepted", "label_free")]
    assert len(labels) == given, "the events miss labels"
    assert all(e.slot for e in read if e.kind == "label_accepted"), "a paid label had no slot"
    seqs = [e.seq for e in read if e.kind != "stopped"]
    assert seqs == sorted(seqs), "events out of order"
    return read
