"""``crowdbudget policies``: the registered policy ids, or one policy's parameter table and
capabilities."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_policies(args: argparse.Namespace) -> int:
    from crowdbudget.cli.listing import list_or_describe
    from crowdbudget.registry import POLICIES

    return list_or_describe(
        args,
        POLICIES,
        command="policies",
        describe_trailer=[
            "  verdict: posterior (the policy's own model) or an aggregator id giving the final "
            "labels and their confidence (every policy; not a parameter of the policy: the "
            "verdict is built beside it)"
        ],
        list_footer=[
            "Every id may name its verdict, opt-kg:verdict=ds (or --verdict ds for all): the "
            "same allocation, final labels and confidence by that aggregator fitted on the labels "
            "received (mv, wmv, ds, one-coin-em, mace, bds, ...; crowdbudget aggregate --help)."
        ],
    )


def add_policies_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``policies`` sub-command to ``subparsers`` (of ``build_parser``)."""
    from crowdbudget.cli.listing import add_listing_parser

    return add_listing_parser(subparsers, "policies", "policy", cmd_policies)
