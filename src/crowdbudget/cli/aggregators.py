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


def cmd_aggregators(args: argparse.Namespace) -> int:
    from crowdbudget.aggregation.registry import (
        DEFAULT_VERDICT,
        parse_aggregator,
        registered_aggregators,
    )
    from crowdbudget.cli.listing import list_or_describe
    from crowdbudget.registry import AGGREGATORS

    return list_or_describe(
        args,
        AGGREGATORS,
        command="aggregators",
        parse=parse_aggregator,
        ordered_ids=registered_aggregators(),
        hidden_parameters=("seed",),
        list_footer=[
            f"Every id also takes seed. The default verdict is {DEFAULT_VERDICT} "
            "(docs/calibration.md)."
        ],
        extra_json={"default_verdict": DEFAULT_VERDICT},
    )


def add_aggregators_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``aggregators`` sub-command to ``subparsers`` (of ``build_parser``)."""
    from crowdbudget.cli.listing import add_listing_parser

    return add_listing_parser(subparsers, "aggregators", "aggregator", cmd_aggregators)
