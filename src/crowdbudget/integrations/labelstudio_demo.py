"""A dry run of the Label Studio integration: a project whose hidden truth is RTE's gold, and
simulated annotators that pull tasks through Label Studio's ``/next`` and submit annotations
through its API, concurrently (the end-to-end test and ``examples/labelstudio/`` use it).

Annotators are one-coin workers: annotator ``j`` gives the true class with probability
``p_j`` and the other class otherwise. The ``p_j`` are drawn (with the caller's generator)
from the empirical accuracies of the RTE workers who gave at least ``min_labels`` labels
(Snow et al. 2008 data, bundled), so the simulated crowd is as reliable as RTE's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from crowdbudget.datasets import load_dataset
from crowdbudget.integrations.labelstudio import LabelStudioAPI, LabelStudioError

BINARY_CONFIG = (
    '<View><Header value="Does the first sentence entail the second?"/>'
    '<Text name="text" value="$text"/>'
    '<Choices name="entailment" toName="text" choice="single" required="true">'
    '<Choice value="no"/><Choice value="yes"/></Choices></View>'
)
"""A binary ``Choices`` config (RTE: does the text entail the hypothesis?)."""
RTE_CLASSES = ("no", "yes")  # RTE's gold 0 and 1


def rte_reliabilities(
    n_annotators: int, rng: np.random.Generator, min_labels: int = 20
) -> list[float]:
    """``n_annotators`` accuracies drawn with replacement from those of the RTE workers with at
    least ``min_labels`` labels (their share of labels agreeing with the gold)."""
    data = load_dataset("rte")
    gold = np.asarray(data.gold)
    items, workers, labels = (np.asarray(a) for a in (data.items, data.workers, data.labels))
    known = gold[items] >= 0
    correct = (labels == gold[items]) & known
    n = np.bincount(workers[known], minlength=data.n_workers)
    hits = np.bincount(workers, weights=correct.astype(float), minlength=data.n_workers)
    accuracies = (hits / np.maximum(n, 1))[n >= min_labels]
    return [float(a) for a in rng.choice(accuracies, size=n_annotators, replace=True)]


def rte_tasks(n_tasks: int, rng: np.random.Generator) -> tuple[list[dict[str, object]], list[str]]:
    """``n_tasks`` RTE items chosen at random: Label Studio task data (no truth in it) and
    the hidden true class of each, in the same order."""
    data = load_dataset("rte")
    gold = np.asarray(data.gold)
    candidates = np.flatnonzero(gold >= 0)
    chosen = np.sort(rng.choice(candidates, size=n_tasks, replace=False))
    tasks: list[dict[str, object]] = [
        {"text": f"RTE item {data.item_ids[k]}", "rte_item": str(data.item_ids[k])} for k in chosen
    ]
    return tasks, [RTE_CLASSES[int(gold[k])] for k in chosen]


def create_project(
    api: LabelStudioAPI, title: str, tasks: Sequence[dict[str, object]], maximum_annotations: int
) -> tuple[int, dict[str, int]]:
    """Create a project with :data:`BINARY_CONFIG` and import ``tasks``; its id and the task
    id of each ``rte_item``."""
    project = api.request(
        "POST",
        "/api/projects",
        json={
            "title": title,
            "label_config": BINARY_CONFIG,
            "maximum_annotations": maximum_annotations,
        },
    )
    project_id = int(project["id"])
    api.request("POST", f"/api/projects/{project_id}/import", json=list(tasks))
    ids = {str(task["data"]["rte_item"]): int(task["id"]) for task in api.tasks(project_id)}
    return project_id, ids


def add_ground_truth(api: LabelStudioAPI, truth: dict[int, str], control: Any) -> None:
    """Give each task of ``truth`` (Label Studio task id -> class) a ground-truth annotation
    by the API token's user (a reviewer): posted, then marked ``ground_truth``."""
    for task_id, label in sorted(truth.items()):
        created = api.request(
            "POST", f"/api/tasks/{task_id}/annotations", json={"result": control.result(label)}
        )
        api.request("PATCH", f"/api/annotations/{created['id']}", json={"ground_truth": True})


def user_id(url: str, token: str) -> int:
    """The Label Studio user id of ``token``'s user."""
    api = LabelStudioAPI(url, token)
    try:
        return int(api.request("GET", "/api/current-user/whoami")["id"])
    finally:
        api.close()


@dataclass
class AnnotatorLog:
    """What one simulated annotator did."""

    annotations: int = 0
    empty_polls: int = 0
    errors: list[str] = field(default_factory=list)


class SimulatedAnnotators:
    """Annotators working concurrently through ``/next`` (one thread each) until ``stop`` is
    set or ``deadline`` (seconds) passes.

    Args:
        url: Label Studio base URL.
        tokens: one legacy API token per annotator.
        reliabilities: probability each annotator gives the true class.
        truth: hidden true class per Label Studio task id.
        rng: generator; each annotator gets its own stream from it.
        from_name, to_name: the project's Choices control.
        poll: seconds to wait after a first "no task for you"; doubled on each further one
            up to 8 × poll (people do not hammer the server either), reset by a task.
    """

    def __init__(
        self,
        url: str,
        tokens: Sequence[str],
        reliabilities: Sequence[float],
        truth: dict[int, str],
        rng: np.random.Generator,
        *,
        from_name: str = "entailment",
        to_name: str = "text",
        classes: Sequence[str] = RTE_CLASSES,
        poll: float = 0.25,
    ) -> None:
        if len(tokens) != len(reliabilities):
            raise ValueError("one reliability per token")
        self.url, self.tokens, self.reliabilities = url, list(tokens), list(reliabilities)
        self.truth, self.classes = truth, list(classes)
        self.from_name, self.to_name, self.poll = from_name, to_name, poll
        self.seeds = rng.integers(0, 2**63 - 1, size=len(tokens))
        self.logs = [AnnotatorLog() for _ in tokens]
        self.stop = threading.Event()
        # cleared by :meth:`pause`: annotators finish the task in hand and ask for no new one
        self._working = threading.Event()
        self._working.set()
        self._threads: list[threading.Thread] = []

    def start(self, project_id: int, deadline: float) -> SimulatedAnnotators:
        self.stop.clear()
        end = time.monotonic() + deadline
        self._threads = [
            threading.Thread(target=self._work, args=(j, project_id, end), daemon=True)
            for j in range(len(self.tokens))
        ]
        for thread in self._threads:
            thread.start()
        return self

    def pause(self) -> None:
        """Ask for no new task until :meth:`resume` (a task in hand is still submitted)."""
        self._working.clear()

    def resume(self) -> None:
        """Take tasks again after :meth:`pause`."""
        self._working.set()

    def running(self) -> bool:
        """Whether any annotator is still working."""
        return any(thread.is_alive() for thread in self._threads)

    def join(self) -> None:
        self.stop.set()
        self._working.set()
        for thread in self._threads:
            thread.join(timeout=60)

    def _work(self, j: int, project_id: int, end: float) -> None:
        rng = np.random.default_rng(self.seeds[j])
        api = LabelStudioAPI(self.url, self.tokens[j])
        log = self.logs[j]
        wait = self.poll
        try:
            while not self.stop.is_set() and time.monotonic() < end:
                if not self._working.wait(timeout=self.poll):
                    continue
                try:
                    task = api.request("GET", f"/api/projects/{project_id}/next")
                except LabelStudioError as error:
                    if " 404 " not in str(error):
                        log.errors.append(str(error))
                    log.empty_polls += 1
                    self.stop.wait(wait)
                    wait = min(2 * wait, 8 * self.poll)
                    continue
                wait = self.poll
                true_class = self.truth[int(task["id"])]
                if rng.random() < self.reliabilities[j]:
                    answer = true_class
                else:
                    answer = next(c for c in self.classes if c != true_class)
                result = [
                    {
                        "from_name": self.from_name,
                        "to_name": self.to_name,
                        "type": "choices",
                        "value": {"choices": [answer]},
                    }
                ]
                try:
                    api.request(
                        "POST", f"/api/tasks/{task['id']}/annotations", json={"result": result}
                    )
                    log.annotations += 1
                except LabelStudioError as error:
                    log.errors.append(str(error))
        finally:
            api.close()

    @property
    def annotations(self) -> int:
        return sum(log.annotations for log in self.logs)


def accuracy(verdicts: pd.Series, truth: dict[int, str]) -> float:
    """Share of tasks whose verdict is the true class (tasks without a verdict count wrong)."""
    hits = [verdicts.get(task_id) == label for task_id, label in truth.items()]
    return float(np.mean(hits))
