"""The Label Studio integration against a real Label Studio server (issue 20).

Needs a running Label Studio (open source, on PostgreSQL, SSRF protection off so it may call
the loopback webhook receiver), named by three environment variables that
``.ci/labelstudio.sh`` sets after starting one:

- ``CROWDBUDGET_LABELSTUDIO_URL``: its base URL (loopback);
- ``CROWDBUDGET_LABELSTUDIO_TOKEN_FILE``: a file holding an admin's legacy API token;
- ``CROWDBUDGET_LABELSTUDIO_ANNOTATORS``: a TSV of ``email<TAB>token`` for 8 annotators.

Without them every test here is skipped, unless ``CROWDBUDGET_REQUIRE_LABELSTUDIO=1`` (CI),
which makes a missing server a failure. ``CROWDBUDGET_LABELSTUDIO_TASKS`` (default 200) scales
the run down when CPU is short; ``CROWDBUDGET_LABELSTUDIO_SEED`` (default 20) picks the tasks
and the annotators' reliabilities.

The run: a project with a binary Choices config and N tasks whose hidden truth is RTE's gold,
the first ``N_CONTROL`` of them with a ground-truth annotation by the admin (control tasks);
8 simulated annotators pull tasks through ``/next`` and submit concurrently — 7 with RTE-like
reliabilities and one careless (answers at random); ``crowdbudget labelstudio serve-webhook``
runs worker-aware Opt-KG (``opt-kg:posterior=one-coin``) at 3 annotations per task on average
with blocking at level 0.7, is killed with SIGKILL mid-run (the webhooks sent meanwhile are
lost) and restarted. Every annotation must be recorded under its annotator, the careless
annotator blocked and their later annotations not counted. Then the same annotators label a
second project under Label Studio's own fixed overlap (``maximum_annotations=3``), finished by
majority vote, with the same number of annotations. Both accuracies (on the tasks that are not
control tasks) go to stdout and to ``CROWDBUDGET_LABELSTUDIO_REPORT`` (JSON) if set.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crowdbudget.aggregation import MajorityVote
from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.integrations.labelstudio import (
    LabelStudioAPI,
    campaign_id_for,
    export_labels,
    parse_label_config,
    read_token_file,
)
from crowdbudget.integrations.labelstudio_demo import (
    BINARY_CONFIG,
    RTE_CLASSES,
    SimulatedAnnotators,
    accuracy,
    add_ground_truth,
    create_project,
    rte_reliabilities,
    rte_tasks,
    user_id,
)
from crowdbudget.service.local import free_port as _free_port

URL = os.environ.get("CROWDBUDGET_LABELSTUDIO_URL")
TOKEN_FILE = os.environ.get("CROWDBUDGET_LABELSTUDIO_TOKEN_FILE")
ANNOTATORS = os.environ.get("CROWDBUDGET_LABELSTUDIO_ANNOTATORS")
if not (URL and TOKEN_FILE and ANNOTATORS):
    if os.environ.get("CROWDBUDGET_REQUIRE_LABELSTUDIO"):
        raise RuntimeError(
            "CROWDBUDGET_REQUIRE_LABELSTUDIO is set but no Label Studio server is named "
            "(CROWDBUDGET_LABELSTUDIO_URL, _TOKEN_FILE, _ANNOTATORS; .ci/labelstudio.sh sets them)"
        )
    pytest.skip(
        "no Label Studio server (run .ci/labelstudio.sh, which starts one)",
        allow_module_level=True,
    )

N_TASKS = int(os.environ.get("CROWDBUDGET_LABELSTUDIO_TASKS", "200"))
LABELS_PER_TASK = 3
N_CONTROL = 10  # tasks with a ground truth (control tasks)
CARELESS = 7  # the annotator who answers at random
SEED = int(os.environ.get("CROWDBUDGET_LABELSTUDIO_SEED", "20"))


_START = time.monotonic()


def _log(message: str) -> None:  # timings in the CI log
    print(f"[{time.monotonic() - _START:6.1f}s] {message}", flush=True)


def _wait_for(condition, timeout: float, step: float = 0.5) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(step)
    return bool(condition())


def _usable_annotations(api: LabelStudioAPI, project_id: int) -> pd.DataFrame:
    return export_labels(api, project_id)


def test_dynamic_overlap_against_fixed_overlap(tmp_path: Path) -> None:
    assert URL and TOKEN_FILE and ANNOTATORS
    rng = np.random.default_rng(SEED)
    api = LabelStudioAPI(URL, read_token_file(TOKEN_FILE))
    tokens = [line.split("\t")[1] for line in Path(ANNOTATORS).read_text().splitlines() if line]
    assert len(tokens) == 8
    reliabilities = rte_reliabilities(8, rng)
    reliabilities[CARELESS] = 0.5  # answers at random
    careless = f"ls-user-{user_id(URL, tokens[CARELESS])}"
    tasks, hidden = rte_tasks(N_TASKS, rng)
    budget = LABELS_PER_TASK * N_TASKS

    # ---- crowdbudget's dynamic overlap -------------------------------------------------
    project_id, ids = create_project(api, f"crowdbudget dynamic {SEED}", tasks, 1)
    truth = {ids[str(t["rte_item"])]: label for t, label in zip(tasks, hidden, strict=True)}
    control_tasks = sorted(truth)[:N_CONTROL]
    add_ground_truth(api, {t: truth[t] for t in control_tasks}, parse_label_config(BINARY_CONFIG))
    scored = {t: label for t, label in truth.items() if t not in control_tasks}
    db = f"sqlite:///{tmp_path / 'campaign.db'}"
    port = _free_port()
    command = [
        sys.executable,
        "-m",
        "crowdbudget",
        "labelstudio",
        "serve-webhook",
        "--url",
        URL,
        "--token-file",
        TOKEN_FILE,
        "--project",
        str(project_id),
        "--budget",
        str(budget),
        "--policy",
        "opt-kg:posterior=one-coin",
        "--block-below",
        "0.7",
        "--db",
        db,
        "--open-slots",
        "16",
        "--max-labels-per-task",
        "8",
        "--webhook-listen",
        f"127.0.0.1:{port}",
        "--interval",
        "5",
        "--verdict-interval",
        "1000",
        "--max-seconds",
        "900",
        "--json",
    ]
    annotators = SimulatedAnnotators(URL, tokens, reliabilities, truth, rng)
    first = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def steered() -> bool:  # the first reconciliation closed every task without an open slot
        return sum(not t["is_labeled"] for t in api.tasks(project_id)) <= 16

    assert _wait_for(steered, timeout=120), "the sync never closed the tasks it does not want"
    _log("sync steering; annotators start")
    annotators.start(project_id, deadline=1200)
    # kill -9 the sync mid-run: nothing it held in memory may be lost
    assert _wait_for(lambda: annotators.annotations >= budget // 3, timeout=600), (
        f"annotators stalled at {annotators.annotations}: {annotators.logs}"
    )
    # kill it while Label Studio shows open slots, so that annotations do arrive while it is
    # down: annotators faster than a loaded sync can drain every slot, and a kill at that moment
    # left nothing to label for two minutes once (CI). Pause them, let the sync catch up, kill.
    annotators.pause()

    def open_tasks() -> int:
        return sum(not t["is_labeled"] for t in api.tasks(project_id))

    assert _wait_for(lambda: open_tasks() >= 4, timeout=120), (
        f"the sync did not reopen slots while the annotators paused: {open_tasks()} open"
    )
    _log(f"kill -9 the sync at {annotators.annotations} annotations, {open_tasks()} tasks open")
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    at_kill = annotators.annotations
    annotators.resume()
    # annotators fill the slots that were open; their webhooks reach nobody
    _wait_for(lambda: annotators.annotations > at_kill, timeout=120, step=0.2)
    time.sleep(2)
    during_downtime = annotators.annotations - at_kill
    second = subprocess.run(
        [*command[: command.index("--budget")], *command[command.index("--budget") + 2 :]],
        capture_output=True,
        text=True,
        timeout=900,
    )
    annotators.join()
    _log(f"restarted sync finished: {second.stdout!r}")
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert not any(log.errors for log in annotators.logs), [log.errors for log in annotators.logs]

    campaign = Campaign.load(EventStore(db), campaign_id_for(project_id))
    labels = export_labels(api, project_id, campaign)
    counted = labels[labels["counted"]]
    # the budget is never overspent: every annotation is paid from it, reported, or (of a
    # blocked annotator) not counted
    assert report["done"]
    assert report["spent"] <= budget
    assert len(counted) <= budget + report["over_submissions"]
    assert len(counted) == report["labels"]
    assert len(labels) == report["labels"] + report["not_counted"]
    # the control tasks are the campaign's; the careless annotator is blocked
    assert campaign.control_items() == {str(t): truth[t] for t in control_tasks}
    blocked = {entry["worker"]: entry for entry in report["blocked"]}
    assert careless in blocked, (careless, report["blocked"])
    not_counted = labels[~labels["counted"]]
    assert set("ls-user-" + not_counted["worker"]) <= set(blocked)
    # nothing lost across the kill and the lost webhooks: every counted annotation is in the
    # campaign under its annotator, once
    recorded = campaign.export_labels()
    key = ["task", "worker", "label"]
    mine = counted.assign(worker="ls-user-" + counted["worker"])[key]
    assert sorted(map(tuple, recorded[key].to_numpy())) == sorted(map(tuple, mine.to_numpy()))
    per_task = counted.groupby("task").size()
    assert during_downtime > 0, "no annotation arrived while the sync was down"
    # (an annotation of the blocked annotator is read and left out, not recorded)
    assert report["recorded_by_reconciliation"] + report["not_counted"] >= during_downtime
    # the verdict as written back: one crowdbudget prediction per labeled task
    verdicts = {}
    for prediction in api.predictions(project_id):
        if prediction.get("model_version") == "crowdbudget":
            verdicts[int(prediction["task"])] = prediction["result"][0]["value"]["choices"][0]
    final = campaign.results()
    for task_id, label in verdicts.items():
        assert final.loc[str(task_id), "label"] == label
    labeled = {int(t) for t in per_task.index}
    assert set(verdicts) == labeled
    dynamic_accuracy = accuracy(pd.Series(verdicts), scored)
    n_dynamic = len(labels)

    # ---- Label Studio's fixed overlap, same annotators, same number of annotations ----------
    fixed_id, fixed_ids = create_project(api, f"fixed overlap {SEED}", tasks, LABELS_PER_TASK)
    fixed_truth = {
        fixed_ids[str(t["rte_item"])]: label for t, label in zip(tasks, hidden, strict=True)
    }
    fixed_scored = {
        fixed_ids[str(t["rte_item"])]: label
        for t, label in zip(tasks, hidden, strict=True)
        if ids[str(t["rte_item"])] not in control_tasks
    }
    fixed = SimulatedAnnotators(URL, tokens, reliabilities, fixed_truth, rng)
    _log("fixed-overlap project: annotators start")
    fixed.start(fixed_id, deadline=900)
    assert _wait_for(lambda: fixed.annotations >= budget, timeout=900)
    fixed.join()
    _log("fixed-overlap project done")
    fixed_labels = _usable_annotations(api, fixed_id)
    assert len(fixed_labels) == budget
    majority = MajorityVote(rng=SEED).fit_predict(fixed_labels)
    majority.index = majority.index.astype(int)
    fixed_accuracy = accuracy(majority, fixed_scored)

    summary = {
        "tasks": N_TASKS,
        "budget": budget,
        "seed": SEED,
        "reliabilities": reliabilities,
        "dynamic": {
            "policy": "opt-kg:posterior=one-coin",
            "annotations": n_dynamic,
            "over_submissions": report["over_submissions"],
            "annotations_while_down": during_downtime,
            "recorded_by_reconciliation": report["recorded_by_reconciliation"],
            "accuracy": dynamic_accuracy,
            "blocked": report["blocked"],
            "not_counted": report["not_counted"],
            "control_answers": report["control_answers"],
            "empty_polls": sum(log.empty_polls for log in annotators.logs),
        },
        "fixed_overlap_majority_vote": {
            "annotations": len(fixed_labels),
            "accuracy": fixed_accuracy,
        },
    }
    print(json.dumps(summary, indent=2))
    if os.environ.get("CROWDBUDGET_LABELSTUDIO_REPORT"):
        Path(os.environ["CROWDBUDGET_LABELSTUDIO_REPORT"]).write_text(json.dumps(summary, indent=2))
    # both are real verdicts, far above chance on RTE-like annotators
    assert set(RTE_CLASSES) >= set(verdicts.values())
    assert dynamic_accuracy > 0.7 and fixed_accuracy > 0.7, summary
