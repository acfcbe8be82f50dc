"""The Label Studio side of the integration (:mod:`crowdbudget.integrations.labelstudio`): the
few REST calls it makes (:class:`LabelStudioAPI`, plain httpx; Label Studio is never
imported), the webhook receiver, and the reading of a project — its one ``<Choices>``
control, the settings that would fight a per-task overlap, the annotations crowdbudget
counts — and of its labels (:func:`export_labels`).

Verified against Label Studio 1.23.2 open source (PostgreSQL).
"""

from __future__ import annotations

import json
import queue
import threading
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pandas as pd

from crowdbudget.exceptions import CrowdBudgetError, DataFormatError, InvalidParameterError

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


def ground_truth_label(task: dict[str, Any], control: ChoicesControl) -> str | None:
    """The class of the task's ground-truth annotation (``ground_truth: true``, not a skip;
    the latest by id when a reviewer made several), None when it has none with one valid
    choice. Such a task becomes a control item of the campaign."""
    rows = [
        a
        for a in task.get("annotations") or ()
        if isinstance(a, dict) and a.get("ground_truth") and not a.get("was_cancelled")
    ]
    for annotation in sorted(rows, key=lambda a: int(a["id"]), reverse=True):
        label = control.label_of(annotation.get("result") or ())
        if label is not None:
            return label
    return None


def distinct_annotators(task: dict[str, Any]) -> int:
    """Distinct annotators with a finished annotation (ground truth included), as Label
    Studio counts them for ``is_labeled``."""
    users = set()
    for annotation in task.get("annotations") or ():
        if isinstance(annotation, dict) and not annotation.get("was_cancelled"):
            user = annotation.get("completed_by")
            users.add(user.get("id") if isinstance(user, dict) else user)
    users.discard(None)
    return len(users)


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
# Export
# ---------------------------------------------------------------------------------------------
def export_labels(
    api: LabelStudioAPI, project_id: int, campaign: Any = None, worker_prefix: str = "ls-user-"
) -> pd.DataFrame:
    """Every usable annotation of the project as crowd-kit's ``task, worker, label`` table
    (task: Label Studio task id; worker: Label Studio user id; first annotation per annotator
    and task, skips, ground truth and annotations without one valid choice left out).

    With the project's ``campaign`` (a :class:`~crowdbudget.campaign.Campaign`), two more
    columns: ``counted`` (the campaign recorded the annotation; False for an annotation of a
    blocked annotator left out, or one not read yet) and ``blocked`` (its annotator is blocked
    now); the campaign's worker of user ``u`` is ``worker_prefix + u``."""
    project = api.project(project_id)
    control = parse_label_config(str(project.get("label_config", "")))
    rows = [
        (str(task_id), str(a.annotator), a.label)
        for task_id, annotations in sorted(api.annotations_by_task(project_id).items())
        for a in task_annotations({"annotations": annotations}, control)
        if a.label is not None
    ]
    frame = pd.DataFrame(rows, columns=["task", "worker", "label"])
    frame = frame.astype({"task": object, "worker": object, "label": object})
    if campaign is not None:
        recorded = campaign.export_labels()
        have = set(zip(recorded["task"], recorded["worker"], strict=True))
        workers = worker_prefix + frame["worker"].astype(str)
        frame["counted"] = [(t, w) in have for t, w in zip(frame["task"], workers, strict=True)]
        frame["blocked"] = [bool(campaign.is_blocked(w)) for w in workers]
    return frame


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
