"""``crowdbudget aggregators``: the registered aggregator ids, or one aggregator's parameter
table and capabilities — all read from :data:`crowdbudget.registry.AGGREGATORS` (the same
tables that check ``--method``, ``--verdict`` and ``verdict=``)."""

from __future__ import annotations

import argparse
from typing import Any


def describe_aggregators() -> list[dict[str, Any]]:
    """Every registered aggregator as JSON (id, summary, paper, aliases, parameter table,
    capabilities), in registration order."""
    from crowdbudget.aggregation.registry import registered_aggregators
    from crowdbudget.registry import describe_entry

    return [describe_entry(entry) for entry in registered_aggregators().values()]


def _parameter_line(row: dict[str, Any]) -> str:
    allowed = row.get("allowed")
    if allowed is None:
        allowed = f"one of {', '.join(row['choices'])}" if "choices" in row else ""
    default = f", default {row['default']}" if "default" in row else ""
    kind = row["type"] if not allowed or allowed.startswith("one of") else ""
    what = ", ".join(part for part in (kind, allowed) if part)
    return f"  {row['name']}: {what}{default} -- {row['doc']}"


def cmd_aggregators(args: argparse.Namespace) -> int:
    import json

    from crowdbudget.aggregation.registry import DEFAULT_VERDICT, parse_aggregator
    from crowdbudget.registry import AGGREGATORS, describe_entry

    if args.name is not None:
        spec = parse_aggregator(args.name)  # unknown ids and bad values: one line, exit 2
        row = describe_entry(AGGREGATORS.entry(spec.id))
        row["capabilities"] = spec.capabilities.names()
        if args.json:
            one = {"command": "aggregators", "seed": None, "results": [row]}
            print(json.dumps(one, indent=2))
            return 0
        print(f"{spec}: {row['summary']}")
        if row["paper"]:
            print(f"paper: {row['paper']}")
        if row["aliases"]:
            print("aliases: " + ", ".join(row["aliases"]))
        print("capabilities: " + (", ".join(row["capabilities"]) or "none"))
        for parameter in row["parameters"]:
            print(_parameter_line(parameter))
        return 0
    rows = describe_aggregators()
    if args.json:
        document: dict[str, Any] = {
            "command": "aggregators",
            "seed": None,
            "results": rows,
            "aliases": AGGREGATORS.aliases(),
            "default_verdict": DEFAULT_VERDICT,
        }
        print(json.dumps(document, indent=2))
        return 0
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        params = ", ".join(p["name"] for p in r["parameters"] if p["name"] != "seed")
        caps = ", ".join(r["capabilities"])
        print(
            f"{r['id']:<{width}}  {r['summary']}"
            + (f"  [{params}]" if params else "")
            + (f"  ({caps})" if caps else "")
        )
    print(
        f"\nEvery id also takes seed. The default verdict is {DEFAULT_VERDICT} "
        "(docs/calibration.md)."
    )
    aliases = AGGREGATORS.aliases()
    if aliases:
        print("aliases: " + ", ".join(f"{a} = {t}" for a, t in sorted(aliases.items())))
    print("crowdbudget aggregators ID describes one; --json lists every parameter's table row.")
    return 0


def add_aggregators_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``aggregators`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "aggregators", help="list the registered aggregator ids, or describe one's parameters"
    )
    p.add_argument(
        "name", nargs="?", default=None, help="an aggregator id (with parameters) to describe"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=cmd_aggregators)
    return p
