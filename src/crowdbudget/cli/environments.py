"""``crowdbudget environments``: the registered environment ids (synthetic worlds, versioned),
or one environment's parameter table."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_environments(args: argparse.Namespace) -> int:
    from crowdbudget.cli.listing import list_or_describe
    from crowdbudget.registry import ENVIRONMENTS

    return list_or_describe(
        args,
        ENVIRONMENTS,
        command="environments",
        list_footer=[
            "Run policies on one: crowdbudget simulate --env ID[:key=value...] (--items sets "
            "n-items; --worker-set A|B is short for --env priced-workers-v0:worker-set=A|B)."
        ],
    )


def add_environments_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``environments`` sub-command to ``subparsers`` (of ``build_parser``)."""
    from crowdbudget.cli.listing import add_listing_parser

    return add_listing_parser(
        subparsers, "environments", "environment (synthetic world)", cmd_environments
    )
