"""``crowdbudget labelstudio``: budget-optimal dynamic overlap for a Label Studio project.

- ``sync``: create (first run) or resume the project's campaign and keep its open tasks where
  the policy wants labels until the budget is spent: periodic reconciliation, plus webhooks
  when ``--webhook-listen`` is given; ``--once`` does one reconciliation pass and exits.
- ``serve-webhook``: ``sync`` with the webhook receiver on (default 127.0.0.1:8765).
- ``export``: the project's annotations as the ``task,worker,label`` CSV.

See :mod:`crowdbudget.integrations.labelstudio` and docs/labelstudio.md.
"""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import sys
import threading
from typing import Any

from crowdbudget.cli.common import positive_float
from crowdbudget.exceptions import InvalidParameterError


def _host_port(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT (e.g. 127.0.0.1:8765), got {text!r}")
    return host, int(port)


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return int(text)


def _level(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1), got {text!r}")
    return value


def _control(args: argparse.Namespace) -> dict[str, Any] | None:
    """The control rule and blocking settings given on the command line (None: none)."""
    given = {
        "first_k": args.control_first_k,
        "rate": args.control_rate,
        "block_below": args.block_below,
        "block_confidence": args.block_confidence,
        "min_answers": args.min_control_answers,
        "rule": args.control_rule,
        "blocked_labels": args.blocked_labels,
    }
    settings = {k: v for k, v in given.items() if v is not None}
    return settings or None


def _api(args: argparse.Namespace) -> Any:
    from crowdbudget.integrations.labelstudio import LabelStudioAPI, read_token_file

    return LabelStudioAPI(args.url, read_token_file(args.token_file))


def cmd_sync(args: argparse.Namespace) -> int:
    from crowdbudget.campaign import EventStore
    from crowdbudget.integrations.labelstudio import LabelStudioSync, WebhookReceiver

    policy = args.policy
    if args.verdict is not None:
        from crowdbudget.integrations.labelstudio import DEFAULT_POLICY

        policy = f"{policy or DEFAULT_POLICY}:verdict={args.verdict}"
    listen = args.webhook_listen
    if listen is None and args.webhook_url is not None:
        raise InvalidParameterError("--webhook-url needs --webhook-listen (where to receive)")
    api = _api(args)
    store = EventStore(args.db)
    receiver = None
    try:
        sync = LabelStudioSync.connect(
            api,
            args.project,
            store,
            budget=args.budget,
            policy=policy,
            seed=args.seed,
            max_labels_per_task=args.max_labels_per_task,
            slot_ttl=args.slot_ttl,
            open_slots=args.open_slots,
            control=_control(args),
        )
        if args.once:
            sync.reconcile_all()
            sync.write_verdicts()
            report = sync.report()
        else:
            stop = threading.Event()
            if listen is not None:
                secret = secrets.token_hex(16)
                receiver = WebhookReceiver(listen[0], listen[1], secret).start()
                url = args.webhook_url or f"http://{listen[0]}:{receiver.port}/"
                api.ensure_webhook(args.project, url, secret)
            # SIGTERM ends the loop cleanly like Ctrl-C (the state is in the store either way)
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            report = sync.run(
                events=receiver.task_ids if receiver is not None else None,
                interval=args.interval,
                verdict_interval=args.verdict_interval,
                max_seconds=args.max_seconds,
                stop=stop,
            )
    finally:
        if receiver is not None:
            receiver.stop()
        api.close()
        store.dispose()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(
            f"project {report.project}: {report.labels} labels ({report.spent:g} of budget "
            f"{report.budget:g} spent, {report.over_submissions} over-submissions), "
            f"{report.open_slots} slots open, {report.tasks_open} of {report.tasks} tasks open"
            + (", done" if report.done else "")
        )
        for entry in report.blocked:
            agreement = entry.get("agreement")
            print(
                f"blocked {entry['worker']} ({entry['by']}): {entry['correct']} of "
                f"{entry['answered']} control answers right"
                + (
                    f"; {agreement['expected_right']} of {agreement['labels']} labels right "
                    "under the verdict"
                    if agreement
                    else ""
                )
            )
        if report.not_counted:
            print(f"{report.not_counted} annotations of blocked annotators not counted")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from pathlib import Path

    from crowdbudget.cli.io import OutputWriteError, prepare_output_file, write_files
    from crowdbudget.integrations.labelstudio import export_labels

    if args.out is not None:
        prepare_output_file(args.out, "--out")
    api = _api(args)
    store = None
    try:
        campaign = None
        if args.db is not None:
            from crowdbudget.campaign import Campaign, EventStore
            from crowdbudget.integrations.labelstudio import campaign_id_for

            store = EventStore(args.db)
            campaign = Campaign.load(store, campaign_id_for(args.project))
        frame = export_labels(api, args.project, campaign)
    finally:
        api.close()
        if store is not None:
            store.dispose()
    if args.out is None:
        frame.to_csv(sys.stdout, index=False)
        return 0
    try:
        write_files(
            [("rows", Path(args.out), lambda path: frame.to_csv(path, index=False))],
            announce=False,
        )
    except OutputWriteError:
        frame.to_csv(sys.stdout, index=False)  # the export is not lost
        raise
    print(f"{len(frame)} labels of {frame['task'].nunique()} tasks → {args.out}")
    return 0


def _connection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, help="Label Studio base URL (http://127.0.0.1:8080)")
    p.add_argument(
        "--token-file", required=True, help="file whose first line is a legacy API token"
    )
    p.add_argument("--project", type=_count, required=True, help="Label Studio project id")


def _sync_arguments(p: argparse.ArgumentParser, listen_default: str | None) -> None:
    _connection(p)
    p.add_argument(
        "--budget",
        type=positive_float,
        default=None,
        help="annotations to spend (first run; later runs resume the stored campaign)",
    )
    p.add_argument(
        "--policy",
        default=None,
        help="policy id: item-only (opt-kg, …) or worker-aware one-coin (default for a new "
        "campaign: opt-kg:posterior=one-coin; on resume: the stored one)",
    )
    p.add_argument(
        "--verdict",
        default=None,
        help="aggregator for the final labels (e.g. dawid-skene; default: the policy's own)",
    )
    p.add_argument(
        "--db",
        default="sqlite:///crowdbudget-labelstudio.db",
        help="SQLAlchemy URL of the campaign's event store (sqlite:///crowdbudget-labelstudio.db)",
    )
    p.add_argument(
        "--open-slots",
        type=_count,
        default=10,
        help="annotations open at once (>= the annotators working at once; default 10)",
    )
    p.add_argument(
        "--max-labels-per-task",
        type=_count,
        default=None,
        help="cap per task (at most the number of annotators: nobody annotates a task twice)",
    )
    p.add_argument(
        "--slot-ttl",
        type=positive_float,
        default=1800.0,
        help="seconds an open slot waits for an annotation before its budget returns (1800)",
    )
    p.add_argument("--seed", type=int, default=0, help="the policy's random seed (default 0)")
    p.add_argument(
        "--block-below",
        type=_level,
        default=None,
        help="block an annotator whose accuracy on the ground-truth tasks is below this level "
        "with posterior probability --block-confidence (default: no blocking)",
    )
    p.add_argument(
        "--block-confidence", type=_level, default=None, help="posterior probability (0.95)"
    )
    p.add_argument(
        "--min-control-answers",
        type=_count,
        default=None,
        help="control answers an annotator gives before a block (5)",
    )
    p.add_argument(
        "--control-first-k",
        type=int,
        default=None,
        help="the first slots each slot holder opens that go to ground-truth tasks (3)",
    )
    p.add_argument(
        "--control-rate",
        type=_level,
        default=None,
        help="then this share of the slots (0.05)",
    )
    p.add_argument(
        "--control-rule",
        choices=("fixed", "value"),
        default=None,
        help="after the first slots: the fixed --control-rate, or 'value': a ground-truth "
        "task whenever its answer is worth more to the block decision than the label it "
        "displaces (needs --block-below; default fixed)",
    )
    p.add_argument(
        "--blocked-labels",
        choices=("drop", "keep"),
        default=None,
        help="the verdict without a blocked annotator's labels (drop, default) or with them",
    )
    p.add_argument(
        "--interval", type=positive_float, default=10.0, help="seconds between full reconciliations"
    )
    p.add_argument(
        "--verdict-interval",
        type=positive_float,
        default=30.0,
        help="seconds between verdict write-backs (and once at the end)",
    )
    p.add_argument(
        "--max-seconds", type=positive_float, default=None, help="stop after this long (resumable)"
    )
    p.add_argument(
        "--webhook-listen",
        type=_host_port,
        default=_host_port(listen_default) if listen_default else None,
        help="HOST:PORT to receive Label Studio's annotation webhooks on"
        + (f" (default {listen_default})" if listen_default else ""),
    )
    p.add_argument(
        "--webhook-url",
        default=None,
        help="URL Label Studio calls (default http://HOST:PORT/ of --webhook-listen)",
    )
    p.add_argument("--once", action="store_true", help="one reconciliation pass, then exit")
    p.add_argument("--json", action="store_true", help="print the report as one JSON document")


def add_labelstudio_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``labelstudio`` sub-command (sync, serve-webhook, export) to ``subparsers``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "labelstudio",
        help="budget-optimal dynamic overlap for a Label Studio project",
        description="Let a crowdbudget policy decide, annotation by annotation, which tasks of "
        "a Label Studio project stay open, under a budget; write the verdicts back as "
        "predictions; export the annotations as task,worker,label.",
    )
    sub = p.add_subparsers(dest="labelstudio_command", metavar="ACTION", required=True)
    sync = sub.add_parser(
        "sync",
        help="create or resume the project's campaign and steer its open tasks",
        description="Reconcile the project with its campaign (record new annotations, open and "
        "close tasks) until the budget is spent; with --webhook-listen also react to "
        "annotation webhooks at once.",
    )
    _sync_arguments(sync, None)
    sync.set_defaults(func=cmd_sync)
    hook = sub.add_parser(
        "serve-webhook",
        help="sync with the webhook receiver on (default 127.0.0.1:8765)",
        description="`sync` with the receiver of Label Studio's annotation webhooks; it "
        "registers the webhook with the project and still reconciles periodically.",
    )
    _sync_arguments(hook, "127.0.0.1:8765")
    hook.set_defaults(func=cmd_sync)
    export = sub.add_parser(
        "export",
        help="the project's annotations as a task,worker,label CSV",
        description="Write the project's annotations (first per annotator and task, skips "
        "left out) as the task,worker,label CSV crowd-kit and crowdbudget read.",
    )
    _connection(export)
    export.add_argument("--out", default=None, help="CSV path (default: stdout)")
    export.add_argument(
        "--db",
        default=None,
        help="the sync's event store: adds the columns counted (recorded by the campaign) and "
        "blocked (the annotator is blocked)",
    )
    export.set_defaults(func=cmd_export)
    return p
