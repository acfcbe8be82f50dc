"""``crowdbudget environments``: the registered environment ids (synthetic worlds, versioned),
or one environment's parameter table."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_environments(args: argparse.Namespace) -> int:
    import json

    from crowdbudget.registry import ENVIRONMENTS, describe_entry

    if args.name is not None:
        # one environment's parameter table (the id may carry parameters: they are checked)
        spec = ENVIRONMENTS.spec(args.name)
        entry = ENVIRONMENTS.entry(spec.id)
        row = describe_entry(entry)
        row["capabilities"] = spec.capabilities.names()
        if args.json:
            document = {"command": "environments", "seed": None, "results": [row]}
            print(json.dumps(document, indent=2))
            return 0
        print(f"{spec}: {row['summary']}")
        if row["paper"]:
            print(f"paper: {row['paper']}")
        if row["capabilities"]:
            print("capabilities: " + ", ".join(row["capabilities"]))
        for p in row["parameters"]:
            allowed = (
                f" one of {', '.join(p['choices'])}"
                if "choices" in p
                else (" in " + entry.params[p["name"]].range_text)
                if "range" in p
                else ""
            )
            default = p.get("default")
            if isinstance(default, list):
                default = ",".join(f"{v:g}" for v in default)
            shown = f", default {default}" if default is not None else ""
            print(f"  {p['name']}: {p['type']}{allowed}{shown} -- {p['doc']}")
        return 0
    rows = [describe_entry(entry) for _, entry in sorted(ENVIRONMENTS.entries().items())]
    if args.json:
        print(json.dumps({"command": "environments", "seed": None, "results": rows}, indent=2))
        return 0
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        params = ", ".join(p["name"] for p in r["parameters"])
        caps = ", ".join(r["capabilities"])
        print(
            f"{r['id']:<{width}}  {r['summary']}"
            + (f"  [{params}]" if params else "")
            + (f"  ({caps})" if caps else "")
        )
    print(
        "\nRun policies on one: crowdbudget simulate --env ID[:key=value...] (--items sets "
        "n-items; --worker-set A|B is short for --env priced-workers-v0:worker-set=A|B).\n"
        "crowdbudget environments ID describes one; --json lists every parameter's type, "
        "default, range and doc."
    )
    return 0


def add_environments_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``environments`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "environments",
        help="list the registered environment ids (synthetic worlds), or describe one's parameters",
    )
    p.add_argument(
        "name", nargs="?", default=None, help="an environment id (with parameters) to describe"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=cmd_environments)
    return p
