"""What ``crowdbudget policies | aggregators | environments`` share: every one lists the ids of
one :class:`~crowdbudget.registry.Registry` (a line each: summary, parameters, capabilities)
or describes one id's parameter table, in text or as one ``--json`` document, all read from
the same tables that check the ids where they are used."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from crowdbudget.registry import Registry, Spec, describe_entry


def parameter_line(row: dict[str, Any], registry: Registry, component_id: str) -> str:
    """One parameter's row as text: ``name: type[ one of ...| in range][, default X] -- doc``,
    with a mark on parameters a network client may not set."""
    if "allowed" in row:  # a table that words its own constraint ("an integer >= 1")
        allowed = f" {row['allowed']}"
    elif "choices" in row:
        allowed = f" one of {', '.join(row['choices'])}"
    elif "range" in row:
        allowed = " in " + registry.entry(component_id).params[row["name"]].range_text
    else:
        allowed = ""
    default = row.get("default")
    if isinstance(default, list):
        default = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in default)
    shown = f", default {default}" if default is not None else ""
    server = "" if row.get("network_settable", True) else " (server setting: not over the API)"
    kind = "" if "allowed" in row else f" {row['type']}"
    return f"  {row['name']}:{kind}{allowed}{shown} -- {row['doc']}{server}"


def list_or_describe(
    args: argparse.Namespace,
    registry: Registry,
    *,
    command: str,
    parse: Callable[[str], Spec] | None = None,
    ordered_ids: Iterable[str] | None = None,
    hidden_parameters: Sequence[str] = (),
    describe_trailer: Sequence[str] = (),
    list_footer: Sequence[str] = (),
    extra_json: dict[str, Any] | None = None,
) -> int:
    """Run a listing command: describe ``args.name`` if given, else list every id.

    Args:
        args: ``name`` (an id, possibly with parameters, or None) and ``json``.
        registry: the registry listed.
        command: the command's name (the ``command`` field of the JSON document).
        parse: reads ``args.name`` into a checked spec (default ``registry.spec``); unknown
            ids and bad values raise the one-line errors the CLI turns into exit status 2.
        ordered_ids: the listing order (default: sorted ids).
        hidden_parameters: parameters every id takes, left out of the one-line listing.
        describe_trailer, list_footer: text lines after a description / after the listing.
        extra_json: keys added to the listing's JSON document.
    """
    aliases = registry.aliases()
    if args.name is not None:
        spec = (parse or registry.spec)(args.name)
        row = describe_entry(registry.entry(spec.id))
        row["capabilities"] = spec.capabilities.names()
        if args.json:
            print(json.dumps({"command": command, "seed": None, "results": [row]}, indent=2))
            return 0
        print(f"{spec}: {row['summary']}")
        if row["paper"]:
            print(f"paper: {row['paper']}")
        if row["aliases"]:
            print("aliases: " + ", ".join(row["aliases"]))
        print("capabilities: " + (", ".join(row["capabilities"]) or "none"))
        for parameter in row["parameters"]:
            print(parameter_line(parameter, registry, spec.id))
        for line in describe_trailer:
            print(line)
        return 0
    ids = list(ordered_ids) if ordered_ids is not None else sorted(registry.entries())
    rows = [describe_entry(registry.entry(component_id)) for component_id in ids]
    if args.json:
        document = {"command": command, "seed": None, "results": rows, "aliases": aliases}
        print(json.dumps(document | (extra_json or {}), indent=2))
        return 0
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        params = ", ".join(p["name"] for p in r["parameters"] if p["name"] not in hidden_parameters)
        caps = ", ".join(r["capabilities"])
        print(
            f"{r['id']:<{width}}  {r['summary']}"
            + (f"  [{params}]" if params else "")
            + (f"  ({caps})" if caps else "")
        )
    print()
    for line in list_footer:
        print(line)
    if aliases:
        print("aliases: " + ", ".join(f"{a} = {t}" for a, t in sorted(aliases.items())))
    print(f"crowdbudget {command} ID describes one; --json lists every parameter's table row.")
    return 0


def add_listing_parser(
    subparsers: Any, command: str, what: str, func: Callable[[argparse.Namespace], int]
) -> argparse.ArgumentParser:
    """Add a listing sub-command (``command [ID] [--json]``) to ``subparsers``."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        command, help=f"list the registered {what} ids, or describe one's parameters"
    )
    p.add_argument("name", nargs="?", default=None, help=f"a {what} id (with parameters)")
    p.add_argument("--json", action="store_true", help="print one JSON document on stdout")
    p.set_defaults(func=func)
    return p
