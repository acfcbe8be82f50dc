"""Budget-optimal dynamic overlap for a Label Studio project.

Label Studio's overlap is fixed: every task gets ``maximum_annotations`` annotators. Here a
crowdbudget :class:`~crowdbudget.campaign.Campaign` decides, annotation by annotation, which
tasks stay open, and Label Studio keeps serving them to its annotators through its own
interface (``GET /api/projects/{id}/next``). Only plain HTTP (httpx) is used; Label Studio is
never imported.

How the two models meet (verified against Label Studio 1.23.2 open source, PostgreSQL):

- **Tasks ↔ items, annotators ↔ workers.** Item ids are Label Studio task ids (as strings);
  every annotation is recorded under its annotator, campaign worker ``ls-user-<id>`` (the
  annotation's ``completed_by``). Open source Label Studio has no per-annotator task
  assignment: ``/next`` hands any open task to whichever annotator asks. So the campaign
  decides *which task* gets the next annotation, not who gives it: it opens **slots**
  (committed budget for one more annotation on a task, held by a placeholder worker
  ``slot-<k>``: :mod:`crowdbudget.integrations.connector`), and the next annotation Label
  Studio receives on that task settles one (:meth:`CampaignConnector.settle`).
- **A slot settled by its annotator** (the decision): the slot's pending assignment is
  answered by the annotator — one ``labeled`` event naming them
  (:func:`crowdbudget.campaign.slots.record_answer`): the slot's reservation is paid (the
  ledger moves it from committed to spent, once), the holder lets go of the task, and the
  label is the annotator's own, so the policy's and the verdict's worker models read every
  annotator's labels as theirs (a careless annotator weighs what their agreement shows).
  Exactly one label per slot, one slot (or none: an over-submission) per label, and each
  label attributed to the annotation's ``completed_by``: an annotation is new when its
  annotator has no label on the task yet (campaigns recorded by earlier versions, whose
  labels sit under the slots, keep the recorded-prefix rule).
- **Policies.** Item-only policies (Opt-KG, …) choose the slot's task as in a simulation. A
  worker-aware one (``opt-kg:posterior=one-coin``, the default for new campaigns) ranks the
  tasks by its pair score's expectation over the annotators who are active, weighted by their
  share of recent annotations (:mod:`crowdbudget.integrations.crowd_choice`). Policies that
  choose a worker otherwise (BBTA, KOS, …) are refused: the annotator they pick could not be
  made to come.
- **Open and closed.** A task with ``p`` open slots and ``n`` distinct annotators so far is
  written as ``{"overlap": n + p, "is_labeled": p == 0}`` (``PATCH /api/tasks/{id}``). Label
  Studio's picker serves only ``is_labeled = false`` tasks and never more annotators than
  ``overlap`` at once (its locks count), and on every saved annotation it recomputes
  ``is_labeled`` as "distinct finished annotators ≥ overlap", so a task whose last slot is
  filled closes by itself. Patching ``overlap`` alone does not recompute ``is_labeled``, hence
  both fields are always sent.
- **Budget.** One annotation costs 1. Open slots are committed budget (the campaign never
  commits more than it has), so the annotators already holding a task are covered. An
  annotation arriving on a task with no open slot (a submission to a closed task through the
  API, a slot that expired while its holder was still working) is an **over-submission**: it
  is recorded free by the connector (it informs the posterior, costs nothing from the budget)
  and reported, so ``annotations ≤ budget + over-submissions`` always holds.
- **Restarts lose nothing.** Every label is one event in the campaign's store, and the label
  count per task in the campaign says how many of that task's annotations (finished, first per
  annotator, in id order) were recorded; a restart or a reconciliation records the rest. So a
  webhook that never arrived (Label Studio sends it once, inside the annotation request, with
  a 1 s timeout) is recovered by the next periodic reconciliation.
- **Verdict.** The campaign's final label and its posterior probability are written back as
  one prediction per task (``model_version`` "crowdbudget", ``score`` the posterior
  probability of the final label).
- **Priority.** Which tasks are open is the policy's priority (only the ``open_slots`` tasks
  it wants most are open); the project keeps Label Studio's default sequential sampling.

Project settings that would fight this are refused (:func:`check_project_settings`):
``maximum_annotations`` ≠ 1 or ``overlap_cohort_percentage`` < 100 make Label Studio rewrite
every task's overlap itself.

The controller touches the campaign only through the connector surface and the campaign's
public reports (:meth:`Campaign.results`, :meth:`Campaign.status`); the REST calls are in
:mod:`crowdbudget.integrations.labelstudio_api`.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.integrations.connector import SLOT_WORKER_PREFIX, CampaignConnector, unrecorded
from crowdbudget.integrations.labelstudio_api import (
    MODEL_VERSION,
    WEBHOOK_SECRET_HEADER,
    ChoicesControl,
    LabelStudioAPI,
    LabelStudioError,
    TaskAnnotation,
    WebhookReceiver,
    check_project_settings,
    desired_task_state,
    distinct_annotators,
    export_labels,
    ground_truth_label,
    parse_label_config,
    read_token_file,
    task_annotations,
    webhook_task_ids,
)

__all__ = [
    "DEFAULT_POLICY",
    "LABELSTUDIO_WORKER_PREFIX",
    "MODEL_VERSION",
    "SLOT_WORKER_PREFIX",
    "WEBHOOK_SECRET_HEADER",
    "ChoicesControl",
    "LabelStudioAPI",
    "LabelStudioError",
    "LabelStudioSync",
    "SyncReport",
    "TaskAnnotation",
    "WebhookReceiver",
    "campaign_id_for",
    "check_project_settings",
    "desired_task_state",
    "export_labels",
    "parse_label_config",
    "read_token_file",
    "task_annotations",
    "unrecorded",
    "webhook_task_ids",
]

LABELSTUDIO_WORKER_PREFIX = "ls-user-"
"""Campaign worker ids of Label Studio annotators: ``ls-user-<Label Studio user id>``."""
DEFAULT_POLICY = "opt-kg:posterior=one-coin"
"""The policy of a new campaign when none is named: worker-aware Opt-KG (its slots ranked by
the expected score over the active annotators), its verdict the registry's default."""


# ---------------------------------------------------------------------------------------------
# The controller
# ---------------------------------------------------------------------------------------------
@dataclass
class SyncReport:
    """Where a sync stands (``over_submissions``: annotations on tasks with no open slot,
    recorded free; ``unusable``: finished annotations without one valid choice;
    ``control_items``: tasks with a ground truth, ``control_answers`` the annotations of them;
    ``blocked``: the blocked annotators with their evidence (:meth:`Campaign.blocked_workers`,
    and ``agreement``: the worker-aware posterior's when agreement blocked them, None else);
    ``not_counted``: annotations of blocked annotators left unrecorded;
    ``ground_truth_conflicts``: tasks whose ground truth changed after it became a control
    item, the first answer kept)."""

    project: int
    campaign_id: str
    budget: float
    spent: float
    open_slots: int
    labels: int
    over_submissions: int
    unusable: int
    tasks: int
    tasks_open: int
    done: bool
    reconciliations: int = 0
    webhook_tasks: int = 0
    recorded_by_reconciliation: int = 0
    predictions_written: int = 0
    control_items: int = 0
    control_answers: int = 0
    blocked: list[dict[str, Any]] = field(default_factory=list)
    not_counted: int = 0
    ground_truth_conflicts: list[int] = field(default_factory=list)
    elapsed_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def campaign_id_for(project_id: int) -> str:
    return f"labelstudio-project-{project_id}"


class LabelStudioSync:
    """Keeps a Label Studio project's open tasks where a crowdbudget campaign wants labels.

    Use :meth:`connect` (creates the campaign on first use, resumes it after). One controller
    per project at a time: it is the campaign's only writer.
    """

    def __init__(
        self,
        api: LabelStudioAPI,
        project_id: int,
        campaign: Campaign,
        control: ChoicesControl,
        *,
        open_slots: int = 10,
        concurrency: int = 8,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if open_slots < 1:
            raise InvalidParameterError(f"open slots must be >= 1, got {open_slots}")
        self.api = api
        self.project_id = project_id
        self.campaign = campaign
        #: the campaign as this platform sees it: open slots, settlements, its events
        self.connector = CampaignConnector(campaign, annotator_prefix=LABELSTUDIO_WORKER_PREFIX)
        self.control = control
        self.open_slots = open_slots
        self.concurrency = concurrency  # requests in flight at once (PATCHes, webhook reads)
        self.clock = clock
        # what Label Studio last showed or was told, per task: (overlap, is_labeled, annotators)
        self._seen: dict[int, tuple[int, bool, int]] = {}
        self._unusable: dict[int, int] = {}
        self._written: dict[int, tuple[str, float]] = {}
        self._prediction_ids: dict[int, int] = {}
        self._predictions_loaded = False
        self.reconciliations = 0
        self.webhook_tasks = 0
        self.recorded_by_reconciliation = 0
        self.predictions_written = 0
        #: tasks whose ground truth differs from the answer the campaign holds (kept)
        self.ground_truth_conflicts: set[int] = set()

    # ------------------------------------------------------------------ set-up
    @classmethod
    def connect(
        cls,
        api: LabelStudioAPI,
        project_id: int,
        store: EventStore,
        *,
        budget: float | None,
        policy: str | None = None,
        seed: int = 0,
        max_labels_per_task: int | None = None,
        slot_ttl: float | None = 1800.0,
        open_slots: int = 10,
        campaign_id: str | None = None,
        control: Mapping[str, Any] | None = None,
    ) -> LabelStudioSync:
        """Check the project, then create its campaign (first run: ``budget`` needed) or load
        it (later runs: ``budget`` and ``policy``, when given, must match). ``policy`` None:
        :data:`DEFAULT_POLICY` for a new campaign, the stored one on resume. ``control``: the
        control rule and blocking settings (``first_k``, ``rate``, ``block_below``,
        ``block_confidence``, ``min_answers``, ``prior``, ``blocked_labels``:
        :mod:`crowdbudget.campaign.control`; the control items are the tasks with a ground
        truth, read at every reconciliation); on resume the rule's settings given change it."""
        if policy is not None:
            CampaignConnector.check_policy(policy, "Label Studio's /next")
        project = api.project(project_id)
        check_project_settings(project)
        choices = parse_label_config(str(project.get("label_config", "")))
        cid = campaign_id or campaign_id_for(project_id)
        if cid in store.campaign_ids():
            sync = cls(api, project_id, Campaign.load(store, cid), choices, open_slots=open_slots)
            known = sync.connector
            if budget is not None and float(budget) != known.budget:
                raise InvalidParameterError(
                    f"campaign {cid!r} already has budget {known.budget:g}; "
                    f"--budget {budget:g} differs (omit it to resume)"
                )
            if policy is not None and known.policy != policy:
                raise InvalidParameterError(
                    f"campaign {cid!r} runs policy {known.policy!r}, not {policy!r}"
                )
            if known.classes != choices.classes:
                raise InvalidParameterError(
                    f"the project's choices {list(choices.classes)} differ from campaign "
                    f"{cid!r}'s classes {list(known.classes)}"
                )
            rule = {k: v for k, v in (control or {}).items() if k != "blocked_labels"}
            if rule:
                sync.campaign.update_control(**rule)
            if control and "blocked_labels" in control:
                sync.campaign.set_blocked_labels(control["blocked_labels"])
            return sync
        if budget is None:
            raise InvalidParameterError(
                f"no campaign {cid!r} yet: give --budget (annotations to spend) to start one"
            )
        task_ids = [str(task["id"]) for task in api.tasks(project_id)]
        if not task_ids:
            raise InvalidParameterError(f"project {project_id} has no tasks; import some")
        campaign = Campaign.create(
            task_ids,
            budget=budget,
            classes=choices.classes,
            policy=policy or DEFAULT_POLICY,
            seed=seed,
            max_labels_per_item=max_labels_per_task,
            ttl=slot_ttl,
            store=store,
            campaign_id=cid,
            name=f"Label Studio project {project_id} at {api.url}",
            control=None if control is None else dict(control),
        )
        return cls(api, project_id, campaign, choices, open_slots=open_slots)

    # ------------------------------------------------------------------ slots
    def n_open_slots(self) -> int:
        return self.connector.n_open_slots()

    def _fill_slots(self) -> set[int]:
        """Open slots up to ``open_slots``; the tasks that got one (the campaign picks by
        its policy and never commits more than its budget)."""
        return {int(slot.item_id) for slot in self.connector.fill(self.open_slots)}

    # ------------------------------------------------------------------ reconciliation
    def _push_states(self, task_ids: Iterable[int]) -> None:
        """Write each task's desired open/closed state where Label Studio differs (the
        PATCHes go out concurrently: each is one round trip the annotators wait on)."""
        changes: dict[int, dict[str, Any]] = {}
        for task_id in sorted(set(task_ids)):
            overlap, is_labeled, annotators = self._seen.get(task_id, (0, False, 0))
            state = desired_task_state(annotators, self.connector.n_open_slots(str(task_id)))
            if (overlap, is_labeled) != (state["overlap"], state["is_labeled"]):
                changes[task_id] = state
        self._concurrently(
            lambda task_id: self.api.set_task_state(task_id, changes[task_id]), list(changes)
        )
        for task_id, state in changes.items():
            annotators = self._seen.get(task_id, (0, False, 0))[2]
            self._seen[task_id] = (state["overlap"], state["is_labeled"], annotators)

    def _concurrently(self, call: Callable[[int], Any], task_ids: list[int]) -> list[Any]:
        """``call`` on each task id, at most :attr:`concurrency` requests at a time, results
        in order; the first error is raised (after the others finished)."""
        if len(task_ids) <= 1 or self.concurrency <= 1:
            return [call(task_id) for task_id in task_ids]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(task_ids))) as pool:
            return list(pool.map(call, task_ids))

    def _reconcile(
        self,
        annotations: dict[int, list[dict[str, Any]]],
        states: dict[int, tuple[int, bool]] | None,
    ) -> int:
        """Record the new annotations of the tasks in ``annotations``, open slots, and push
        the open/closed states that differ. ``states``: each task's (overlap, is_labeled) as
        Label Studio shows it; None (a webhook) takes the last known overlap and applies
        Label Studio's own rule, ``is_labeled`` = distinct annotators ≥ overlap."""
        counted: dict[str, list[TaskAnnotation]] = {}
        truth: dict[str, str] = {}
        for task_id, rows in annotations.items():
            finished = task_annotations({"annotations": rows}, self.control)
            counted[str(task_id)] = finished
            self._unusable[task_id] = sum(a.label is None for a in finished)
            known = ground_truth_label({"annotations": rows}, self.control)
            if known is not None:
                truth[str(task_id)] = known
            # Label Studio counts every distinct annotator (the reviewer of a ground truth too)
            n_annotators = distinct_annotators({"annotations": rows})
            if states is not None:
                overlap, is_labeled = states[task_id]
            else:
                overlap = self._seen.get(task_id, (1, False, 0))[0]
                is_labeled = n_annotators >= overlap
            self._seen[task_id] = (overlap, is_labeled, n_annotators)
        if truth:
            # ground truth first: the annotations read now are control answers already
            _, conflicts = self.connector.add_control(truth)
            self.ground_truth_conflicts.update(int(t) for t in conflicts)
        recorded, touched = self.connector.reconcile(counted, self.open_slots)
        self._push_states(int(item_id) for item_id in touched)
        return recorded

    def reconcile_all(self) -> int:
        """Read every task, record what is new, reopen/close tasks to match the campaign;
        returns the labels recorded (those a lost webhook would otherwise have lost)."""
        if not self._predictions_loaded:
            for prediction in self.api.predictions(self.project_id):
                if prediction.get("model_version") == MODEL_VERSION:
                    self._prediction_ids[int(prediction["task"])] = int(prediction["id"])
            self._predictions_loaded = True
        states = {
            int(task["id"]): (int(task["overlap"]), bool(task["is_labeled"]))
            for task in self.api.tasks(self.project_id)
        }
        exported = self.api.annotations_by_task(self.project_id)
        recorded = self._reconcile({t: exported.get(t, []) for t in states}, states)
        self.reconciliations += 1
        self.recorded_by_reconciliation += recorded
        return recorded

    def reconcile_tasks(self, task_ids: Iterable[int]) -> int:
        """The same for a few tasks (those a webhook named), from their annotations alone."""
        ids = sorted(set(task_ids))
        self.webhook_tasks += len(ids)
        fetched = self._concurrently(self.api.task_annotations, ids)
        return self._reconcile(dict(zip(ids, fetched, strict=True)), None)

    # ------------------------------------------------------------------ verdicts
    def write_verdicts(self, *, precision: int = 3) -> int:
        """Write each labeled task's final label and confidence as its crowdbudget
        prediction where it changed (confidence compared at ``precision`` decimals)."""
        results = self.campaign.results()
        changed: dict[int, tuple[str, float]] = {}
        for task_id, label, confidence, n_labels in results.itertuples():
            verdict = (str(label), round(float(confidence), precision))
            if n_labels > 0 and self._written.get(int(task_id)) != verdict:
                changed[int(task_id)] = verdict

        def write(task_id: int) -> int:
            label, score = changed[task_id]
            return self.api.write_prediction(
                task_id, self.control.result(label), score, self._prediction_ids.get(task_id)
            )

        ids = list(changed)
        for task_id, prediction_id in zip(ids, self._concurrently(write, ids), strict=True):
            self._prediction_ids[task_id] = prediction_id
            self._written[task_id] = changed[task_id]
        self.predictions_written += len(ids)
        return len(ids)

    # ------------------------------------------------------------------ the loop
    def done(self) -> bool:
        """No slot open and none can be opened (budget spent, every task capped, or the
        policy stopped)."""
        self.connector.expire_overdue()
        if self.n_open_slots() > 0:
            return False
        opened = self._fill_slots()
        if opened:
            self._push_states(opened)
            return False
        return True

    def run(
        self,
        *,
        events: queue.Queue[int] | None = None,
        interval: float = 10.0,
        verdict_interval: float = 30.0,
        max_seconds: float | None = None,
        stop: threading.Event | None = None,
        max_failures: int = 5,
    ) -> SyncReport:
        """Reconcile, then follow webhook task ids from ``events`` (if any) with a full
        reconciliation every ``interval`` seconds, until :meth:`done`, ``max_seconds`` or
        ``stop``; the verdicts are written every ``verdict_interval`` s and at the end.

        A failed request (Label Studio restarting, a timeout) does not end the run: every
        label already recorded is in the store, so the next round starts with a full
        reconciliation; ``max_failures`` failures in a row do end it (the error is raised).
        """
        start = self.clock()
        self.reconcile_all()
        last_full = last_verdict = self.clock()
        failures = 0
        while not (stop is not None and stop.is_set()):
            try:
                if self.done():
                    break
                now = self.clock()
                if max_seconds is not None and now - start >= max_seconds:
                    break
                task_ids = _drain(events, timeout=max(0.0, interval - (now - last_full)))
                if task_ids:
                    self.reconcile_tasks(task_ids)
                if self.clock() - last_full >= interval:
                    self.reconcile_all()
                    last_full = self.clock()
                if self.clock() - last_verdict >= verdict_interval:
                    self.write_verdicts()
                    last_verdict = self.clock()
                failures = 0
            except LabelStudioError:
                failures += 1
                if failures >= max_failures:
                    raise
                last_full = -float("inf")  # what Label Studio holds is unknown: re-read all
                if stop is not None:
                    stop.wait(min(interval, 2.0**failures))
                else:
                    time.sleep(min(interval, 2.0**failures))
        self.reconcile_all()
        self.write_verdicts()
        report = self.report()
        report.elapsed_seconds = self.clock() - start
        return report

    def report(self) -> SyncReport:
        status = self.campaign.status()
        open_tasks = sum(1 for _, is_labeled, _ in self._seen.values() if not is_labeled)
        return SyncReport(
            project=self.project_id,
            campaign_id=self.campaign.campaign_id,
            budget=float(status["budget"]),
            spent=float(status["spent"]),
            open_slots=self.n_open_slots(),
            labels=int(status["n_labels"]),
            over_submissions=self.connector.over_submissions,
            unusable=int(sum(self._unusable.values())),
            tasks=len(self.connector.item_ids),
            tasks_open=open_tasks,
            done=self.n_open_slots() == 0,
            reconciliations=self.reconciliations,
            webhook_tasks=self.webhook_tasks,
            recorded_by_reconciliation=self.recorded_by_reconciliation,
            predictions_written=self.predictions_written,
            control_items=len(self.campaign.control_items()),
            control_answers=int((status.get("control") or {}).get("answers", 0)),
            blocked=[
                {
                    **entry,
                    # the event's evidence (it survives a restart, unlike the sync's memory)
                    "agreement": entry.get("evidence") if entry["by"] == "agreement" else None,
                }
                for entry in status.get("blocked_workers") or []
            ],
            not_counted=sum(len(w) for w in self.connector.not_counted.values()),
            ground_truth_conflicts=sorted(self.ground_truth_conflicts),
            extra={
                "requests": self.api.requests,
                "request_seconds": round(self.api.request_seconds, 3),
            },
        )


def _drain(events: queue.Queue[int] | None, timeout: float, window: float = 0.25) -> list[int]:
    """Wait up to ``timeout`` s for the first task id, then gather what arrives within
    ``window`` s more: a batch costs two concurrent rounds of requests (read, then write)
    instead of two per annotation."""
    if events is None:
        time.sleep(timeout)
        return []
    try:
        first = events.get(timeout=timeout)
    except queue.Empty:
        return []
    ids = [first]
    end = time.monotonic() + window
    while (left := end - time.monotonic()) > 0:
        try:
            ids.append(events.get(timeout=left))
        except queue.Empty:
            break
    while True:
        try:
            ids.append(events.get_nowait())
        except queue.Empty:
            return ids
