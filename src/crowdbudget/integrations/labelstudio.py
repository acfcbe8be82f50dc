"""Budget-optimal dynamic overlap for a Label Studio project.

Label Studio's overlap is fixed: every task gets ``maximum_annotations`` annotators. Here a
crowdbudget :class:`~crowdbudget.campaign.Campaign` decides, annotation by annotation, which
tasks stay open, and Label Studio keeps serving them to its annotators through its own
interface (``GET /api/projects/{id}/next``). Only plain HTTP (httpx) is used; Label Studio is
never imported.

How the two models meet (verified against Label Studio 1.23.2 open source, PostgreSQL):

- **Tasks ↔ items, annotators ↔ workers.** Item ids are Label Studio task ids (as strings).
  Open source Label Studio has no per-annotator task assignment: ``/next`` hands any open task
  to whichever annotator asks. So the campaign decides *which task* gets the next annotation,
  not who gives it: each campaign assignment is an **open slot** held by a placeholder worker
  ``slot-…`` (pull mode, :meth:`Campaign.next_assignment`), and the next annotation Label
  Studio receives on that task fills it (:meth:`Campaign.record_label`). Only item-only
  policies fit (Opt-KG, …); policies that choose workers are refused, because the worker they
  choose could not be made to come. The annotator's identity is kept by Label Studio and comes
  back in :func:`export_labels` (``worker`` = the Label Studio user id).
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
  is recorded with :meth:`Campaign.import_labels` (it informs the posterior, costs nothing from
  the budget) and reported, so ``annotations ≤ budget + over-submissions`` always holds.
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
"""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pandas as pd

from crowdbudget.campaign import AssignmentError, Campaign, EventStore
from crowdbudget.exceptions import CrowdBudgetError, DataFormatError, InvalidParameterError
from crowdbudget.registry import make_policy, split_verdict

SLOT_WORKER_PREFIX = "slot-"
"""Campaign worker ids of open slots (placeholders: Label Studio picks the annotator)."""
LABELSTUDIO_WORKER_PREFIX = "ls-user-"
"""Campaign worker ids of over-submissions: ``ls-user-<Label Studio user id>``."""
MODEL_VERSION = "crowdbudget"
"""The ``model_version`` of the predictions carrying the verdict."""
WEBHOOK_SECRET_HEADER = "X-Crowdbudget-Secret"

_WEBHOOK_ACTIONS = ("ANNOTATION_CREATED", "ANNOTATION_UPDATED", "ANNOTATIONS_CREATED")
_PAGE_SIZE = 100


class LabelStudioError(CrowdBudgetError):
    """Label Studio refused a request or could not be reached (one line: what and why)."""


# ---------------------------------------------------------------------------------------------
# The label config and the project settings
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ChoicesControl:
    """The single ``<Choices>`` control of a project: its name, its object, its classes.

    ``classes`` are the values annotation results carry (a ``<Choice>``'s ``alias`` when it
    has one, else its ``value``), in config order; they become the campaign's classes.
    """

    from_name: str
    to_name: str
    classes: tuple[str, ...]

    def result(self, label: str) -> list[dict[str, Any]]:
        """An annotation/prediction ``result`` choosing ``label``."""
        return [
            {
                "from_name": self.from_name,
                "to_name": self.to_name,
                "type": "choices",
                "value": {"choices": [label]},
            }
        ]

    def label_of(self, result: Iterable[Any]) -> str | None:
        """The class an annotation ``result`` chose with this control; None when it chose
        nothing, several things, or something that is not a class."""
        chosen: list[str] = []
        for region in result or ():
            if not isinstance(region, dict) or region.get("from_name") != self.from_name:
                continue
            value = region.get("value")
            choices = value.get("choices") if isinstance(value, dict) else None
            if isinstance(choices, list):
                chosen.extend(str(c) for c in choices)
        if len(chosen) != 1 or chosen[0] not in self.classes:
            return None
        return chosen[0]


def parse_label_config(label_config: str) -> ChoicesControl:
    """Find the one single-choice ``<Choices>`` control of a Label Studio label config.

    Raises :class:`DataFormatError` (one line) for anything else: no or several ``Choices``,
    ``choice="multiple"``, fewer than two choices, duplicate choices.
    """
    try:
        root = ElementTree.fromstring(label_config)
    except ElementTree.ParseError as error:
        raise DataFormatError(f"the project's label config is not valid XML ({error})") from None
    controls = [element for element in root.iter() if element.tag == "Choices"]
    if len(controls) != 1:
        raise DataFormatError(
            f"the label config has {len(controls)} <Choices> controls; crowdbudget needs "
            "exactly one (one class per task), and no other control"
        )
    others = sorted(
        {
            element.tag
            for element in root.iter()
            if element.tag in _OTHER_CONTROLS and element is not controls[0]
        }
    )
    if others:
        raise DataFormatError(
            f"the label config also has {', '.join(others)}; crowdbudget reads a config with "
            "a single <Choices> control"
        )
    control = controls[0]
    if control.get("choice", "single") not in ("single", "single-radio"):
        raise DataFormatError(
            f"<Choices name={control.get('name')!r}> has choice={control.get('choice')!r}; "
            "allowed: single or single-radio (one class per annotation)"
        )
    name, to_name = control.get("name"), control.get("toName")
    if not name or not to_name:
        raise DataFormatError("the <Choices> control needs both name and toName attributes")
    classes = [
        choice.get("alias") or choice.get("value") or ""
        for choice in control.iter()
        if choice.tag == "Choice"
    ]
    if len(classes) < 2 or "" in classes or len(set(classes)) != len(classes):
        raise DataFormatError(
            f"<Choices name={name!r}> has choices {classes}; it needs at least 2 distinct, "
            "non-empty values"
        )
    return ChoicesControl(from_name=name, to_name=to_name, classes=tuple(classes))


# Label Studio control tags besides Choices (a config with any of them is not one class per
# task); object tags (Text, Image, HyperText, …) and layout tags (View, Header, …) are fine.
_OTHER_CONTROLS = frozenset(
    {
        "Labels",
        "RectangleLabels",
        "PolygonLabels",
        "KeyPointLabels",
        "BrushLabels",
        "EllipseLabels",
        "HyperTextLabels",
        "ParagraphLabels",
        "TimeSeriesLabels",
        "VideoRectangle",
        "Taxonomy",
        "TextArea",
        "Rating",
        "Number",
        "DateTime",
        "Ranker",
        "Pairwise",
        "Relations",
    }
)


def check_project_settings(project: dict[str, Any]) -> None:
    """Refuse project settings under which Label Studio rewrites per-task overlaps itself.

    ``maximum_annotations`` ≠ 1 or ``overlap_cohort_percentage`` < 100: Label Studio then sets
    every task's ``overlap`` from these on each settings save, undoing what crowdbudget wrote.
    """
    maximum = project.get("maximum_annotations", 1)
    cohort = project.get("overlap_cohort_percentage", 100)
    if maximum != 1:
        raise InvalidParameterError(
            f"project {project.get('id')} has 'Annotations per task' (maximum_annotations) = "
            f"{maximum}; set it to 1: crowdbudget sets each task's overlap itself, and Label "
            "Studio would overwrite it"
        )
    if cohort is not None and cohort < 100:
        raise InvalidParameterError(
            f"project {project.get('id')} has overlap_cohort_percentage = {cohort}; set it to "
            "100: a cohort below 100 makes Label Studio rewrite task overlaps"
        )


# ---------------------------------------------------------------------------------------------
# Reading tasks: the pure part of reconciliation
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TaskAnnotation:
    """One annotator's first finished annotation of a task (``label`` None: no usable choice)."""

    annotation_id: int
    annotator: int
    label: str | None


def task_annotations(task: dict[str, Any], control: ChoicesControl) -> list[TaskAnnotation]:
    """The finished annotations of a task as crowdbudget counts them: skips
    (``was_cancelled``) and ground-truth copies dropped, the first annotation of each annotator
    kept (Label Studio's ``is_labeled`` counts distinct annotators too), in id order."""
    seen: set[int] = set()
    out: list[TaskAnnotation] = []
    rows = [a for a in task.get("annotations") or () if isinstance(a, dict)]
    for annotation in sorted(rows, key=lambda a: int(a["id"])):
        if annotation.get("was_cancelled") or annotation.get("ground_truth"):
            continue
        annotator = annotation.get("completed_by")
        if isinstance(annotator, dict):  # some Label Studio views expand the user
            annotator = annotator.get("id")
        if annotator is None or int(annotator) in seen:
            continue
        seen.add(int(annotator))
        out.append(
            TaskAnnotation(
                int(annotation["id"]), int(annotator), control.label_of(annotation["result"])
            )
        )
    return out


def unrecorded(annotations: list[TaskAnnotation], n_recorded: int) -> list[TaskAnnotation]:
    """The usable annotations of a task the campaign has not recorded yet.

    The campaign records a task's usable annotations in id order, one event each, so its label
    count ``n_recorded`` for the task is the length of the recorded prefix: the rest is new.
    (A count above the usable annotations — Label Studio lost one, e.g. deleted — records
    nothing; labels are never taken back.)
    """
    usable = [a for a in annotations if a.label is not None]
    return usable[n_recorded:]


def desired_task_state(n_annotators: int, n_open_slots: int) -> dict[str, Any]:
    """What Label Studio should hold for a task with ``n_annotators`` distinct finished
    annotators and ``n_open_slots`` open slots: open for exactly that many more annotators,
    or closed. ``overlap`` stays ≥ 1 (Label Studio's minimum)."""
    return {
        "overlap": max(1, n_annotators + n_open_slots),
        "is_labeled": n_open_slots == 0,
    }


# ---------------------------------------------------------------------------------------------
# HTTP
# ---------------------------------------------------------------------------------------------
class LabelStudioAPI:
    """The few Label Studio REST calls the integration needs (plain httpx).

    ``token`` is a legacy API token ("Account & Settings → Legacy Token"; the server must allow
    legacy tokens: ``--enable-legacy-api-token`` or the organization setting).
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout: float = 30.0,
        transport: Any = None,
    ) -> None:
        import httpx

        if not url.startswith(("http://", "https://")):
            raise InvalidParameterError(f"--url must start with http:// or https://, got {url!r}")
        if not token or any(c.isspace() for c in token):
            raise InvalidParameterError("the Label Studio token must be one word (no spaces)")
        self.url = url.rstrip("/")
        self.requests = 0  # how many requests, and the seconds spent waiting on them
        self.request_seconds = 0.0
        self._count_lock = threading.Lock()
        self._httpx = httpx
        self._http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Token {token}"},
            timeout=timeout,
            transport=transport,
        )

    def close(self) -> None:
        self._http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; any failure becomes a one-line :class:`LabelStudioError`."""
        start = time.monotonic()
        try:
            response = self._http.request(method, path, **kwargs)
        except self._httpx.HTTPError as error:
            raise LabelStudioError(
                f"cannot reach Label Studio at {self.url} ({type(error).__name__}: {error})"
            ) from None
        finally:
            with self._count_lock:
                self.requests += 1
                self.request_seconds += time.monotonic() - start
        if response.status_code >= 400:
            detail = response.text[:200].replace("\n", " ")
            try:
                body = response.json()
                if isinstance(body, dict):
                    detail = str(body.get("detail") or body.get("validation_errors") or body)
            except ValueError:
                pass
            hint = " (is the token a legacy API token?)" if response.status_code == 401 else ""
            raise LabelStudioError(
                f"Label Studio {method} {path}: {response.status_code} {detail[:200]}{hint}"
            )
        return response.json() if response.content else None

    def project(self, project_id: int) -> dict[str, Any]:
        result: dict[str, Any] = self.request("GET", f"/api/projects/{project_id}")
        return result

    def tasks(self, project_id: int) -> list[dict[str, Any]]:
        """Every task of the project with its ``overlap`` and ``is_labeled`` (paged; the number
        of pages is bounded by the task count the first page reports)."""
        out: list[dict[str, Any]] = []
        page, n_pages = 1, 1
        while page <= n_pages:
            body = self.request(
                "GET",
                "/api/tasks",
                params={"project": project_id, "page": page, "page_size": _PAGE_SIZE},
            )
            out.extend(body["tasks"])
            n_pages = max(1, -(-int(body.get("total", 0)) // _PAGE_SIZE))
            page += 1
        return out

    def annotations_by_task(self, project_id: int) -> dict[int, list[dict[str, Any]]]:
        """The annotations (skips included, flagged ``was_cancelled``) of every annotated
        task, in one request (the project's JSON export: far cheaper than the task list with
        ``fields=all``, which Label Studio computes per task)."""
        exported = self.request(
            "GET", f"/api/projects/{project_id}/export", params={"exportType": "JSON"}
        )
        return {int(task["id"]): list(task.get("annotations") or ()) for task in exported}

    def task_annotations(self, task_id: int) -> list[dict[str, Any]]:
        """One task's finished annotations (skips left out by Label Studio)."""
        result: list[dict[str, Any]] = self.request("GET", f"/api/tasks/{task_id}/annotations")
        return result

    def predictions(self, project_id: int) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self.request(
            "GET", "/api/predictions", params={"project": project_id}
        )
        return result

    def set_task_state(self, task_id: int, state: dict[str, Any]) -> None:
        self.request("PATCH", f"/api/tasks/{task_id}", json=state)

    def write_prediction(
        self,
        task_id: int,
        result: list[dict[str, Any]],
        score: float,
        prediction_id: int | None = None,
    ) -> int:
        """Create (or, given its id, update) the task's crowdbudget prediction; its id."""
        body = {"result": result, "score": score, "model_version": MODEL_VERSION}
        if prediction_id is not None:
            self.request("PATCH", f"/api/predictions/{prediction_id}", json=body)
            return prediction_id
        created = self.request("POST", "/api/predictions", json={"task": task_id, **body})
        return int(created["id"])

    def ensure_webhook(self, project_id: int, url: str, secret: str) -> int:
        """Register (or update) the project's webhook to ``url`` for annotation events,
        sending ``secret`` in :data:`WEBHOOK_SECRET_HEADER`; its id."""
        body = {
            "project": project_id,
            "url": url,
            "send_payload": True,
            "send_for_all_actions": False,
            "actions": list(_WEBHOOK_ACTIONS),
            "headers": {WEBHOOK_SECRET_HEADER: secret},
            "is_active": True,
        }
        for hook in self.request("GET", "/api/webhooks", params={"project": project_id}):
            if hook.get("url") == url and hook.get("project") == project_id:
                self.request("PATCH", f"/api/webhooks/{hook['id']}", json=body)
                return int(hook["id"])
        return int(self.request("POST", "/api/webhooks", json=body)["id"])


# ---------------------------------------------------------------------------------------------
# The webhook receiver
# ---------------------------------------------------------------------------------------------
class WebhookReceiver:
    """A small HTTP server that takes Label Studio's annotation webhooks and queues the task
    ids for the controller (it writes nothing itself: the controller is the only writer).

    It answers at once (Label Studio waits 1 s at most) and checks the shared secret header.
    Bind it to 127.0.0.1 unless Label Studio runs elsewhere.
    """

    def __init__(self, host: str, port: int, secret: str) -> None:
        self.secret = secret
        self.task_ids: queue.Queue[int] = queue.Queue()
        self.received = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                if self.headers.get(WEBHOOK_SECRET_HEADER) != receiver.secret:
                    self.send_response(403)
                    self.end_headers()
                    return
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    payload = json.loads(self.rfile.read(min(length, 1 << 22)) or b"{}")
                except ValueError:
                    payload = {}
                for task_id in webhook_task_ids(payload):
                    receiver.task_ids.put(task_id)
                receiver.received += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"ok": true}')

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

        try:
            self.server = ThreadingHTTPServer((host, port), Handler)
        except OSError as error:
            raise InvalidParameterError(
                f"cannot listen for webhooks on {host}:{port} ({error.strerror})"
            ) from None
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> WebhookReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def webhook_task_ids(payload: Any) -> list[int]:
    """The task ids an annotation webhook payload names (empty for other events)."""
    if not isinstance(payload, dict) or payload.get("action") not in _WEBHOOK_ACTIONS:
        return []
    annotations = payload.get("annotations")
    if not isinstance(annotations, list):
        annotations = [payload.get("annotation")]
    ids = []
    for annotation in annotations:
        if isinstance(annotation, dict) and isinstance(annotation.get("task"), int):
            ids.append(int(annotation["task"]))
    if not ids and isinstance(payload.get("task"), dict) and "id" in payload["task"]:
        ids.append(int(payload["task"]["id"]))
    return ids


# ---------------------------------------------------------------------------------------------
# The controller
# ---------------------------------------------------------------------------------------------
@dataclass
class SyncReport:
    """Where a sync stands (``over_submissions``: annotations on tasks with no open slot,
    recorded free; ``unusable``: finished annotations without one valid choice)."""

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
        self.control = control
        self.open_slots = open_slots
        self.concurrency = concurrency  # requests in flight at once (PATCHes, webhook reads)
        self.clock = clock
        self._item_index = {item: k for k, item in enumerate(campaign.item_ids)}
        # open slots per item (assignment ids, oldest first), from the campaign's pending
        # assignments (those of placeholder workers; over-submissions never hold one)
        self._slots: dict[int, list[str]] = {}
        for pending in campaign.pending_assignments():
            if pending.worker_id.startswith(SLOT_WORKER_PREFIX):
                item = self._item_index[pending.item_id]
                self._slots.setdefault(item, []).append(pending.assignment_id)
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

    # ------------------------------------------------------------------ set-up
    @classmethod
    def connect(
        cls,
        api: LabelStudioAPI,
        project_id: int,
        store: EventStore,
        *,
        budget: float | None,
        policy: str = "opt-kg",
        seed: int = 0,
        max_labels_per_task: int | None = None,
        slot_ttl: float | None = 1800.0,
        open_slots: int = 10,
        campaign_id: str | None = None,
    ) -> LabelStudioSync:
        """Check the project, then create its campaign (first run: ``budget`` needed) or load
        it (later runs: ``budget``, when given, must match)."""
        # unknown ids fail here with the known ones; ``…:verdict=ds`` names the verdict
        policy_object = make_policy(split_verdict(policy)[0])
        if type(policy_object).chooses_workers:
            raise InvalidParameterError(
                f"policy {policy!r} chooses workers; Label Studio's /next lets any annotator "
                "take an open task, so only item-only policies (opt-kg, …) can run here"
            )
        project = api.project(project_id)
        check_project_settings(project)
        control = parse_label_config(str(project.get("label_config", "")))
        cid = campaign_id or campaign_id_for(project_id)
        if cid in store.campaign_ids():
            campaign = Campaign.load(store, cid)
            assert campaign.config is not None
            if budget is not None and float(budget) != campaign.config.budget:
                raise InvalidParameterError(
                    f"campaign {cid!r} already has budget {campaign.config.budget:g}; "
                    f"--budget {budget:g} differs (omit it to resume)"
                )
            if campaign.config.policy != policy:
                raise InvalidParameterError(
                    f"campaign {cid!r} runs policy {campaign.config.policy!r}, not {policy!r}"
                )
            if tuple(campaign.config.classes) != control.classes:
                raise InvalidParameterError(
                    f"the project's choices {list(control.classes)} differ from campaign "
                    f"{cid!r}'s classes {campaign.config.classes}"
                )
        else:
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
                classes=control.classes,
                policy=policy,
                seed=seed,
                max_labels_per_item=max_labels_per_task,
                ttl=slot_ttl,
                store=store,
                campaign_id=cid,
                name=f"Label Studio project {project_id} at {api.url}",
            )
        return cls(api, project_id, campaign, control, open_slots=open_slots)

    # ------------------------------------------------------------------ slots
    def _prune_slots(self) -> None:
        for item in list(self._slots):
            alive = [
                a for a in self._slots[item] if self.campaign.assignment(a).status == "pending"
            ]
            if alive:
                self._slots[item] = alive
            else:
                del self._slots[item]

    def n_open_slots(self) -> int:
        return sum(len(v) for v in self._slots.values())

    def _fill_slots(self) -> set[int]:
        """Open slots (campaign assignments to placeholder workers) up to ``open_slots``;
        the items that got one. The campaign picks by its policy and never commits more
        than its budget."""
        opened: set[int] = set()
        while self.n_open_slots() < self.open_slots:
            assignment = self.campaign.next_assignment(SLOT_WORKER_PREFIX + uuid.uuid4().hex)
            if assignment is None:
                break
            item = self._item_index[assignment.item_id]
            self._slots.setdefault(item, []).append(assignment.assignment_id)
            opened.add(item)
        return opened

    # ------------------------------------------------------------------ reconciliation
    def _record(self, task_id: int, annotations: list[dict[str, Any]]) -> tuple[int, int]:
        """Record a task's new annotations; (labels recorded, distinct annotators)."""
        key = str(task_id)
        if key not in self._item_index:  # a task imported into Label Studio meanwhile
            self.campaign.add_items([key])
            self._item_index[key] = len(self._item_index)
        item = self._item_index[key]
        counted = task_annotations({"annotations": annotations}, self.control)
        self._unusable[item] = sum(a.label is None for a in counted)
        n_recorded = int(self.campaign.state.label_counts[item].sum())
        new = unrecorded(counted, n_recorded)
        for annotation in new:
            assert annotation.label is not None
            if not self._fill_slot(item, annotation.label):
                # no open slot: an over-submission, recorded free and reported
                worker = f"{LABELSTUDIO_WORKER_PREFIX}{annotation.annotator}"
                self.campaign.import_labels(
                    pd.DataFrame({"task": [key], "worker": [worker], "label": [annotation.label]})
                )
        return len(new), len(counted)

    def _fill_slot(self, item: int, label: str) -> bool:
        """Record ``label`` on the item's oldest open slot; False if it has none left (a slot
        past its time-to-live that housekeeping has not released yet takes no label)."""
        slots = self._slots.get(item, [])
        while slots:
            assignment_id = slots.pop(0)
            try:
                self.campaign.record_label(assignment_id, label)
            except AssignmentError:
                continue
            finally:
                if not slots:
                    self._slots.pop(item, None)
            return True
        return False

    def _push_states(self, items: Iterable[int]) -> None:
        """Write each item's desired open/closed state where Label Studio differs (the
        PATCHes go out concurrently: each is one round trip the annotators wait on)."""
        changes: dict[int, dict[str, Any]] = {}
        for item in sorted(set(items)):
            task_id = int(self.campaign.item_ids[item])
            overlap, is_labeled, annotators = self._seen.get(task_id, (0, False, 0))
            state = desired_task_state(annotators, len(self._slots.get(item, ())))
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
        self.campaign.expire_overdue()
        self._prune_slots()
        recorded = 0
        touched: set[int] = set()
        for task_id, rows in annotations.items():
            n_new, annotators = self._record(task_id, rows)
            recorded += n_new
            if states is not None:
                overlap, is_labeled = states[task_id]
            else:
                overlap = self._seen.get(task_id, (1, False, 0))[0]
                is_labeled = annotators >= overlap
            self._seen[task_id] = (overlap, is_labeled, annotators)
            touched.add(self._item_index[str(task_id)])
        touched |= self._fill_slots()
        touched |= set(self._slots)
        self._push_states(touched)
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
        self._prune_slots()
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
            # one annotation costs 1, so the labels beyond the spending came in free
            over_submissions=round(status["n_labels"] - status["spent"]),
            unusable=int(sum(self._unusable.values())),
            tasks=len(self._item_index),
            tasks_open=open_tasks,
            done=self.n_open_slots() == 0,
            reconciliations=self.reconciliations,
            webhook_tasks=self.webhook_tasks,
            recorded_by_reconciliation=self.recorded_by_reconciliation,
            predictions_written=self.predictions_written,
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


# ---------------------------------------------------------------------------------------------
# Export
# ---------------------------------------------------------------------------------------------
def export_labels(api: LabelStudioAPI, project_id: int) -> pd.DataFrame:
    """Every usable annotation of the project as crowd-kit's ``task, worker, label`` table
    (task: Label Studio task id; worker: Label Studio user id; first annotation per annotator
    and task, skips and annotations without one valid choice left out)."""
    project = api.project(project_id)
    control = parse_label_config(str(project.get("label_config", "")))
    rows = [
        (str(task_id), str(a.annotator), a.label)
        for task_id, annotations in sorted(api.annotations_by_task(project_id).items())
        for a in task_annotations({"annotations": annotations}, control)
        if a.label is not None
    ]
    frame = pd.DataFrame(rows, columns=["task", "worker", "label"])
    return frame.astype({"task": object, "worker": object, "label": object})


def read_token_file(path: str) -> str:
    """The token in the first line of ``path`` (keep tokens out of shell history)."""
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.readline().strip()
    except OSError as error:
        raise InvalidParameterError(f"cannot read token file {path!r} ({error.strerror})") from None
    if not token:
        raise InvalidParameterError(f"token file {path!r} is empty; put the API token on line 1")
    return token
