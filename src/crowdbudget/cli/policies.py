"""``crowdbudget policies``: the registered policy ids, or one policy's parameter table and
capabilities."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_policies(args: argparse.Namespace) -> int:
    import json

    from crowdbudget.registry import POLICIES, describe_entry

    aliases = POLICIES.aliases()
    if args.name is not None:
        # one policy's parameter table and capabilities (the id may carry parameters)
        spec = POLICIES.spec(args.name)
        row = describe_entry(POLICIES.entry(spec.id))
        row["capabilities"] = spec.capabilities.names()
        if args.json:
            print(json.dumps({"command": "policies", "seed": None, "results": [row]}, indent=2))
            return 0
        print(f"{spec}: {row['summary']}")
        if row["paper"]:
            print(f"paper: {row['paper']}")
        print("capabilities: " + (", ".join(row["capabilities"]) or "none"))
        for p in row["parameters"]:
            allowed = (
                f" one of {', '.join(p['choices'])}"
                if "choices" in p
                else (" in " + POLICIES.entry(spec.id).params[p["name"]].range_text)
                if "range" in p
                else ""
            )
            default = f", default {p['default']}" if "default" in p else ""
            server = "" if p["network_settable"] else " (server setting: not over the API)"
            print(f"  {p['name']}: {p['type']}{allowed}{default} -- {p['doc']}{server}")
        print(
            "  verdict: posterior (the policy's own model) or an aggregator id giving the final "
            "labels and their confidence (every policy; not a parameter of the policy: the "
            "verdict is built beside it)"
        )
        return 0
    rows = [describe_entry(entry) for _, entry in sorted(POLICIES.entries().items())]
    if args.json:
        document = {"command": "policies", "seed": None, "results": rows, "aliases": aliases}
        print(json.dumps(document, indent=2))
    else:
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
            "\nEvery id may name its verdict, opt-kg:verdict=ds (or --verdict ds for all): the "
            "same allocation, final labels and confidence by that aggregator fitted on the labels "
            "received (mv, wmv, ds, one-coin-em, mace, bds, ...; crowdbudget aggregate --help)."
        )
        if aliases:
            print("aliases: " + ", ".join(f"{a} = {t}" for a, t in sorted(aliases.items())))
        print("--json lists every parameter's type, default, range, doc and network_settable.")
    return 0


def add_policies_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``policies`` sub-command to ``subparsers`` (of ``build_parser``)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "policies", help="list the registered policy ids, or describe one's parameters"
    )
    p.add_argument(
        "name", nargs="?", default=None, help="a policy id (with parameters) to describe"
    )
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=cmd_policies)
    return p
