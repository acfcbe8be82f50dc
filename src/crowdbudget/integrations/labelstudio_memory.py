"""An in-memory stand-in for the few Label Studio REST calls the integration makes, keeping the
task rules the real server (1.23.2, open source) was seen to keep — for tests and benchmarks
that need no server (``tests/test_labelstudio_e2e.py`` runs the real one):

- ``is_labeled`` is recomputed on every annotation as "distinct finished annotators ≥
  ``overlap``" (skips, ``was_cancelled``, do not count);
- ``/next`` (:meth:`MemoryLabelStudio.next_task`) serves, in task-id order (sequential
  sampling), only ``is_labeled = false`` tasks the asking annotator has not annotated;
- a submission to a closed task is accepted (an over-submission for the campaign);
- a ground-truth annotation (``ground_truth: true``) is a finished annotation like any
  (it counts toward ``overlap``); crowdbudget reads it as the task's known answer.

Plug it into :class:`~crowdbudget.integrations.labelstudio_api.LabelStudioAPI` with
``transport=httpx.MockTransport(memory.handle)`` (:meth:`MemoryLabelStudio.api`).
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from crowdbudget.integrations.labelstudio_api import ChoicesControl, LabelStudioAPI

__all__ = ["MemoryLabelStudio"]


class MemoryLabelStudio:
    """One project (id 1) with ``n_tasks`` tasks (ids 100, 101, …) and a ``<Choices>`` config.

    Args:
        n_tasks: how many tasks.
        config: the project's label config.
        control: its parsed ``<Choices>`` control (for the annotations written here).
        maximum_annotations: the project's fixed overlap (every task's ``overlap``).
    """

    def __init__(
        self,
        n_tasks: int,
        config: str,
        control: ChoicesControl,
        maximum_annotations: int = 1,
    ) -> None:
        self.control = control
        self.project = {
            "id": 1,
            "label_config": config,
            "maximum_annotations": maximum_annotations,
            "overlap_cohort_percentage": 100,
        }
        self.tasks: dict[int, dict[str, Any]] = {
            100 + k: {
                "id": 100 + k,
                "overlap": maximum_annotations,
                "is_labeled": False,
                "annotations": [],
            }
            for k in range(n_tasks)
        }
        self.predictions: dict[int, dict[str, Any]] = {}
        self.patches = 0
        self._next_id = 1

    def api(self) -> LabelStudioAPI:
        """A client of this stand-in."""
        return LabelStudioAPI("http://ls.test", "token", transport=httpx.MockTransport(self.handle))

    # ------------------------------------------------------------------ what annotators do
    def _annotators(self, task: dict[str, Any]) -> set[int]:
        # a ground-truth annotation is a finished annotation too: it counts toward overlap
        return {a["completed_by"] for a in task["annotations"] if not a.get("was_cancelled")}

    def annotate(
        self, task_id: int, user: int, label: str | None, *, ground_truth: bool = False
    ) -> int:
        """``user`` submits ``label`` (None: no choice) on the task; the annotation's id."""
        task = self.tasks[task_id]
        result = [] if label is None else self.control.result(label)
        annotation: dict[str, Any] = {"id": self._next_id, "completed_by": user, "result": result}
        if ground_truth:
            annotation["ground_truth"] = True
        task["annotations"].append(annotation)
        self._next_id += 1
        task["is_labeled"] = len(self._annotators(task)) >= task["overlap"]
        return int(annotation["id"])

    def next_task(self, user: int) -> int | None:
        """The task ``/next`` gives ``user`` (None: "no more tasks")."""
        for task_id, task in self.tasks.items():
            if not task["is_labeled"] and user not in self._annotators(task):
                return task_id
        return None

    def open_tasks(self) -> list[int]:
        return [t for t, task in self.tasks.items() if not task["is_labeled"]]

    # ------------------------------------------------------------------ the REST calls
    def handle(self, request: httpx.Request) -> httpx.Response:
        """Answer one request as Label Studio would (404 for anything else)."""
        path, method = request.url.path, request.method
        if path == "/api/projects/1":
            return httpx.Response(200, json=self.project)
        if path == "/api/tasks":  # the plain list: no annotations in it
            page = int(request.url.params.get("page", 1))
            size = int(request.url.params.get("page_size", 100))
            rows = list(self.tasks.values())[(page - 1) * size : page * size]
            rows = [{k: v for k, v in t.items() if k != "annotations"} for t in rows]
            return httpx.Response(200, json={"tasks": rows, "total": len(self.tasks)})
        if path == "/api/projects/1/export":  # annotated tasks only, skips included
            rows = [t for t in self.tasks.values() if t["annotations"]]
            return httpx.Response(200, json=rows)
        match = re.fullmatch(r"/api/tasks/(\d+)/annotations", path)
        if match:
            annotations = self.tasks[int(match.group(1))]["annotations"]
            finished = [a for a in annotations if not a.get("was_cancelled")]
            return httpx.Response(200, json=finished)
        match = re.fullmatch(r"/api/tasks/(\d+)", path)
        if match and method == "PATCH":
            task = self.tasks[int(match.group(1))]
            task.update(json.loads(request.content))
            self.patches += 1
            return httpx.Response(200, json=task)
        return self._predictions(request, path, method)

    def _predictions(self, request: httpx.Request, path: str, method: str) -> httpx.Response:
        if path == "/api/predictions" and method == "GET":
            return httpx.Response(200, json=list(self.predictions.values()))
        if path == "/api/predictions" and method == "POST":
            body = json.loads(request.content)
            body["id"] = 1000 + len(self.predictions)
            self.predictions[body["id"]] = body
            return httpx.Response(201, json=body)
        match = re.fullmatch(r"/api/predictions/(\d+)", path)
        if match and method == "PATCH":
            self.predictions[int(match.group(1))].update(json.loads(request.content))
            return httpx.Response(200, json=self.predictions[int(match.group(1))])
        return httpx.Response(404, json={"detail": f"no route {method} {path}"})
