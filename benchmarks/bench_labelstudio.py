"""Label Studio with real annotators: dynamic overlap and a worker-aware verdict against Label
Studio's fixed overlap and majority vote, at the same number of annotations.

The project runs on the in-memory Label Studio (:mod:`crowdbudget.integrations.
labelstudio_memory`: the task rules of the real server, no HTTP server) so that many seeds are
cheap; ``tests/test_labelstudio_e2e.py`` runs the same comparison once against a real Label
Studio. Per seed: ``--tasks`` RTE items drawn at random (their gold is the hidden truth),
``--annotators`` one-coin annotators whose accuracies are drawn from those of the RTE workers
with ≥ 20 labels, except ``--careless`` of them who answer at random (accuracy 1/2), at random
positions. Annotators arrive one at a time, uniformly at random; each takes the task Label
Studio's ``/next`` gives them and answers; the sync reads the task at once (a webhook).

Arms (``--budget-per-task`` × tasks annotations each):

- ``fixed-mv``: Label Studio's fixed overlap (``maximum_annotations`` = budget per task),
  majority vote, ties at random — what a project does without crowdbudget;
- ``opt-kg``: the sync with item-only Opt-KG and its own verdict (Beta posterior: every
  annotator weighs the same) — the integration before annotators were recorded;
- ``opt-kg+bds-oc``: the same allocation, the default worker-aware verdict on the annotators'
  labels (each annotation recorded under its annotator);
- ``worker-aware``: ``opt-kg:posterior=one-coin`` (slots ranked by the expected score over
  the active annotators) and its default verdict (``bds-oc``);
- ``worker-aware-holder``: the same, each slot chosen for its holder (a worker with the prior
  reliability) instead of by the expected score — the ablation of that choice;
- ``worker-aware+block``: the same with blocking (``--block-below``): an annotator whose
  agreement with the verdict puts their accuracy below the level with probability 0.95 is
  blocked (no ground truth);
- with ``--control N``: ``worker-aware+control``: the first N tasks carry a ground-truth
  annotation (control tasks, served by the campaign's rule ``--first-k`` / ``--rate`` through
  the slot holders, paid from the same budget) and an annotator whose control answers put
  their accuracy below ``--block-below`` with probability 0.95 (after ``--min-answers``) is
  blocked, and so is one whose agreement does.

Every arm is scored on the tasks that are not control tasks (all of them without
``--control``). Run from the repository root:

    python benchmarks/bench_labelstudio.py [--tasks 200] [--annotators 8] [--careless 1]
        [--seeds 0 1 2 3 4] [--budget-per-task 3] [--open-slots 16] [--control 0]
        [--first-k 3] [--rate 0.05] [--block-below 0.7] [--min-answers 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from typing import Any

import numpy as np
import pandas as pd

from crowdbudget.aggregation import MajorityVote
from crowdbudget.campaign import EventStore
from crowdbudget.integrations.labelstudio import LabelStudioSync
from crowdbudget.integrations.labelstudio_api import parse_label_config
from crowdbudget.integrations.labelstudio_demo import (
    BINARY_CONFIG,
    RTE_CLASSES,
    rte_reliabilities,
    rte_tasks,
)
from crowdbudget.integrations.labelstudio_memory import MemoryLabelStudio

CONTROL = parse_label_config(BINARY_CONFIG)


def _answer(rng: np.random.Generator, truth: str, reliability: float) -> str:
    if rng.random() < reliability:
        return truth
    return next(c for c in RTE_CLASSES if c != truth)


def _accuracy(verdicts: pd.Series, truth: dict[int, str], scored: set[int]) -> float:
    """Share of the ``scored`` tasks whose verdict is the true class."""
    return float(np.mean([verdicts.get(str(t)) == truth[t] for t in scored]))


def fixed_overlap(
    truth: dict[int, str],
    reliabilities: list[float],
    budget: int,
    per_task: int,
    seed: int,
    scored: set[int],
) -> float:
    """Label Studio's fixed overlap and majority vote (ties at random)."""
    rng = np.random.default_rng([seed, 1])
    memory = MemoryLabelStudio(len(truth), BINARY_CONFIG, CONTROL, maximum_annotations=per_task)
    given, stalls = 0, 0
    rows = []
    while given < budget and stalls < 1000:
        user = int(rng.integers(len(reliabilities)))
        task_id = memory.next_task(user)
        if task_id is None:
            stalls += 1
            continue
        label = _answer(rng, truth[task_id], reliabilities[user])
        memory.annotate(task_id, user, label)
        rows.append((str(task_id), str(user), label))
        given += 1
    frame = pd.DataFrame(rows, columns=["task", "worker", "label"])
    verdicts = MajorityVote(rng=seed).fit_predict(frame)
    return _accuracy(verdicts, truth, scored)


def dynamic_overlap(
    truth: dict[int, str],
    reliabilities: list[float],
    budget: int,
    seed: int,
    *,
    policy: str,
    verdicts: tuple[str | None, ...],
    open_slots: int,
    scored: set[int],
    control: dict[str, Any] | None = None,
    crowd_choice: bool = True,
    ground_truth: bool = False,
) -> dict[str, Any]:
    """The sync on the in-memory project; accuracy of each verdict (None: the campaign's)
    on the ``scored`` tasks. With ``control``, the other tasks carry a ground truth (a
    reviewer's annotation) and are the campaign's control tasks, under these settings."""
    rng = np.random.default_rng([seed, 2])
    memory = MemoryLabelStudio(len(truth), BINARY_CONFIG, CONTROL)
    if control is not None and ground_truth:
        for task_id in sorted(set(truth) - scored):
            memory.annotate(task_id, -1, truth[task_id], ground_truth=True)
    sync = LabelStudioSync.connect(
        memory.api(),
        1,
        EventStore("sqlite://"),
        budget=budget,
        policy=policy,
        seed=seed,
        max_labels_per_task=len(reliabilities),
        open_slots=open_slots,
        control=control,
    )
    sync.connector.crowd_choice = crowd_choice
    start = time.process_time()
    sync.reconcile_all()
    given, stalls = 0, 0
    while stalls < 1000:
        user = int(rng.integers(len(reliabilities)))
        task_id = memory.next_task(user)
        if task_id is None:
            if sync.done():
                break
            stalls += 1
            continue
        memory.annotate(task_id, user, _answer(rng, truth[task_id], reliabilities[user]))
        given += 1
        sync.reconcile_tasks([task_id])
    sync.reconcile_all()
    report = sync.report()
    out: dict[str, Any] = {
        "annotations": given,
        "spent": report.spent,
        "over_submissions": report.over_submissions,
        "cpu_seconds": round(time.process_time() - start, 2),
        "blocked": [b["worker"] for b in report.blocked],
        "not_counted": report.not_counted,
        "control_answers": report.control_answers,
    }
    for verdict in verdicts:
        results = sync.campaign.results(verdict)
        out[verdict or "own"] = _accuracy(results["label"], truth, scored)
    return out


def run_seed(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    n_good = args.annotators - args.careless
    reliabilities = rte_reliabilities(n_good, rng) + [0.5] * args.careless
    reliabilities = [reliabilities[k] for k in rng.permutation(args.annotators)]
    _, hidden = rte_tasks(args.tasks, rng)
    truth = {100 + k: label for k, label in enumerate(hidden)}
    # the first --control tasks carry a ground truth in the control arm; every arm is scored
    # on the others
    scored = set(list(truth)[args.control :])
    budget = args.budget_per_task * args.tasks
    fixed = fixed_overlap(truth, reliabilities, budget, args.budget_per_task, seed, scored)
    common = {"open_slots": args.open_slots, "scored": scored}
    arms = {
        "opt-kg": ("opt-kg", (None, "bds-oc"), None, True),
        "worker-aware": ("opt-kg:posterior=one-coin", (None,), None, True),
        "worker-aware-holder": ("opt-kg:posterior=one-coin", (None,), None, False),
    }
    settings = {
        "first_k": args.first_k,
        "rate": args.rate,
        "block_below": args.block_below,
        "min_answers": args.min_answers,
    }
    arms["worker-aware+block"] = ("opt-kg:posterior=one-coin", (None,), settings, True)
    if args.control:
        arms["worker-aware+control"] = ("opt-kg:posterior=one-coin", (None,), settings, True)
    runs = {
        name: dynamic_overlap(
            truth,
            reliabilities,
            budget,
            seed,
            policy=policy,
            verdicts=verdicts,
            control=control,
            crowd_choice=crowd,
            ground_truth=name.endswith("+control"),
            **common,
        )
        for name, (policy, verdicts, control, crowd) in arms.items()
    }
    careless = [f"ls-user-{k}" for k, r in enumerate(reliabilities) if r == 0.5]
    row: dict[str, Any] = {
        "seed": seed,
        "reliabilities": [round(r, 3) for r in reliabilities],
        "careless": careless,
        "fixed-mv": fixed,
        "opt-kg": runs["opt-kg"]["own"],
        "opt-kg+bds-oc": runs["opt-kg"]["bds-oc"],
    }
    for name in list(arms)[1:]:
        row[name] = runs[name]["own"]
    row["details"] = {
        name: {k: v for k, v in run.items() if k not in ("own", "bds-oc")}
        for name, run in runs.items()
    }
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--annotators", type=int, default=8)
    parser.add_argument("--careless", type=int, default=1)
    parser.add_argument("--budget-per-task", type=int, default=3)
    parser.add_argument("--open-slots", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--control", type=int, default=0, help="ground-truth tasks (0: none)")
    parser.add_argument("--first-k", type=int, default=3)
    parser.add_argument("--rate", type=float, default=0.05)
    parser.add_argument("--block-below", type=float, default=0.7)
    parser.add_argument("--min-answers", type=int, default=5)
    args = parser.parse_args()
    rows = [run_seed(args, seed) for seed in args.seeds]
    arms = ["fixed-mv", "opt-kg", "opt-kg+bds-oc", "worker-aware", "worker-aware-holder"]
    arms.append("worker-aware+block")
    if args.control:
        arms.append("worker-aware+control")
    means = {arm: float(np.mean([r[arm] for r in rows])) for arm in arms}
    careless_blocked = {
        arm: sum(set(r["careless"]) <= set(r["details"][arm]["blocked"]) for r in rows)
        for arm in arms
        if arm.endswith(("+block", "+control"))
    }
    others_blocked = {
        arm: sum(len(set(r["details"][arm]["blocked"]) - set(r["careless"])) for r in rows)
        for arm in careless_blocked
    }
    summary = {
        "command": "python benchmarks/bench_labelstudio.py " + " ".join(sys.argv[1:]),
        "tasks": args.tasks,
        "annotators": args.annotators,
        "careless": args.careless,
        "budget_per_task": args.budget_per_task,
        "seeds": args.seeds,
        "mean_accuracy": {arm: round(v, 4) for arm, v in means.items()},
        "margin_over_fixed_mv": {arm: round(means[arm] - means["fixed-mv"], 4) for arm in arms[1:]},
        "careless_blocked_runs": careless_blocked,
        "other_annotators_blocked": others_blocked,
        "runs": rows,
        "python": platform.python_version(),
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
