"""A dry run of budget-optimal overlap on your own Label Studio, with simulated annotators.

Creates a project with a binary Choices config and N RTE tasks (the hidden truth is RTE's
gold), steers it with opt-kg at 3 annotations per task on average while simulated annotators
with RTE-like reliabilities pull tasks through ``/next``, then prints the accuracy of the
verdict crowdbudget wrote back. With ``--compare`` it also runs a second project under Label
Studio's fixed overlap (``maximum_annotations=3``, majority vote) with the same annotators.

Usage (see docs/labelstudio.md; the annotator tokens come from ``label-studio user``)::

    python examples/labelstudio/dry_run.py --url http://127.0.0.1:8080 \\
        --token-file admin.token --annotators annotators.tsv --tasks 200 --compare

``annotators.tsv``: one ``email<TAB>legacy-token`` line per annotator. Label Studio must run
with ``SSRF_PROTECTION_ENABLED=false`` to call the loopback webhook receiver.
"""

from __future__ import annotations

import argparse
import secrets
import threading
import time
from pathlib import Path

import numpy as np

from crowdbudget.aggregation import MajorityVote
from crowdbudget.campaign import EventStore
from crowdbudget.integrations.labelstudio import (
    LabelStudioAPI,
    LabelStudioSync,
    WebhookReceiver,
    export_labels,
    read_token_file,
)
from crowdbudget.integrations.labelstudio_demo import (
    SimulatedAnnotators,
    accuracy,
    create_project,
    rte_reliabilities,
    rte_tasks,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True, help="the Label Studio server's address")
    parser.add_argument("--token-file", required=True, help="file holding the admin's API token")
    parser.add_argument("--annotators", required=True, help="TSV: email<TAB>token per line")
    parser.add_argument("--tasks", type=int, default=200, help="RTE tasks (default 200)")
    parser.add_argument(
        "--labels-per-task", type=float, default=3.0, help="mean annotations per task (default 3)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the annotators (default 0)")
    parser.add_argument(
        "--db",
        default="sqlite:///labelstudio-dry-run.db",
        help="crowdbudget's event store (default sqlite:///labelstudio-dry-run.db)",
    )
    parser.add_argument("--compare", action="store_true", help="also run fixed overlap")
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    api = LabelStudioAPI(args.url, read_token_file(args.token_file))
    tokens = [line.split("\t")[1] for line in Path(args.annotators).read_text().splitlines()]
    reliabilities = rte_reliabilities(len(tokens), rng)
    tasks, hidden = rte_tasks(args.tasks, rng)
    budget = round(args.labels_per_task * args.tasks)
    print(f"{len(tokens)} annotators, reliabilities {np.round(reliabilities, 2).tolist()}")

    project_id, ids = create_project(api, f"crowdbudget dry run {args.seed}", tasks, 1)
    truth = {ids[str(t["rte_item"])]: label for t, label in zip(tasks, hidden, strict=True)}
    sync = LabelStudioSync.connect(
        api,
        project_id,
        EventStore(args.db),
        budget=budget,
        policy="opt-kg",
        seed=args.seed,
        max_labels_per_task=len(tokens),
        open_slots=len(tokens) + 4,
    )
    sync.reconcile_all()  # closes every task the policy does not want yet
    secret = secrets.token_hex(16)
    receiver = WebhookReceiver("127.0.0.1", 0, secret).start()
    api.ensure_webhook(project_id, f"http://127.0.0.1:{receiver.port}/", secret)
    annotators = SimulatedAnnotators(args.url, tokens, reliabilities, truth, rng)
    annotators.start(project_id, deadline=3600)
    stop = threading.Event()
    report = sync.run(events=receiver.task_ids, interval=5.0, verdict_interval=60.0, stop=stop)
    annotators.join()
    receiver.stop()
    verdicts = sync.campaign.results()["label"]
    verdicts.index = verdicts.index.astype(int)
    print(
        f"crowdbudget opt-kg: {report.labels} annotations ({report.over_submissions} "
        f"over-submissions) of budget {budget}; verdict accuracy "
        f"{accuracy(verdicts, truth):.3f} (project {project_id})"
    )

    if args.compare:
        fixed_id, fixed_ids = create_project(api, f"fixed overlap {args.seed}", tasks, 3)
        fixed_truth = {
            fixed_ids[str(t["rte_item"])]: label for t, label in zip(tasks, hidden, strict=True)
        }
        fixed = SimulatedAnnotators(args.url, tokens, reliabilities, fixed_truth, rng)
        fixed.start(fixed_id, deadline=3600)
        while fixed.annotations < 3 * args.tasks and fixed.running():
            time.sleep(1.0)
        fixed.join()
        labels = export_labels(api, fixed_id)
        majority = MajorityVote(rng=args.seed).fit_predict(labels)
        majority.index = majority.index.astype(int)
        print(
            f"Label Studio fixed overlap 3 + majority vote: {len(labels)} annotations; "
            f"accuracy {accuracy(majority, fixed_truth):.3f} (project {fixed_id})"
        )


if __name__ == "__main__":
    main()
