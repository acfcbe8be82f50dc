"""A campaign's set-up under a time limit, tried in a child process before the server does it.

Building a campaign resets its policy on the campaign's problem, and some policies prepare
tables whose cost grows with the problem (the Hu–Frazier index table, Gittins indices, the
exact DP). The parameters that scale that work directly are server settings a client cannot
set (:func:`crowdbudget.registry.check_network_policy`); what is left grows with the number of
items and the budget, which a client does choose. So the service first runs the very same
set-up — :meth:`Campaign.create` on an in-memory store, the same code path — in a child
process with a time limit (``ServiceSettings.setup_timeout``): a set-up that does not finish
in time is killed and the request refused (422) before anything is stored, and the server's
own set-up, run afterwards off the event loop, is known to take about that long at most.

Children come from a *forkserver* that has already imported the policies, so a probe costs a
fork (milliseconds) plus the set-up itself, not an interpreter start.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
from multiprocessing.context import ForkServerContext
from typing import Any

from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError

_CONTEXT: ForkServerContext | None = None


def _context() -> ForkServerContext:
    global _CONTEXT
    if _CONTEXT is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["crowdbudget.policies.builtin", "crowdbudget.campaign"])
        _CONTEXT = context
    return _CONTEXT


def _try_setup(connection: multiprocessing.connection.Connection, config: dict[str, Any]) -> None:
    """Child: create the campaign in memory; send back None or the one-line refusal."""
    from crowdbudget.campaign import Campaign, EventStore

    try:
        Campaign.create(store=EventStore("sqlite://"), **config)
        connection.send(None)
    except CrowdBudgetError as error:
        connection.send(str(error))
    except Exception as error:  # a policy failing on a valid problem: refuse, say what
        connection.send(f"the policy failed to set up: {type(error).__name__}")
    finally:
        connection.close()


def check_setup(config: dict[str, Any], timeout: float) -> None:
    """Run ``Campaign.create(**config)`` in a child process; raise
    :class:`InvalidParameterError` with its refusal, or when it takes longer than
    ``timeout`` seconds (the child is then killed)."""
    context = _context()
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_try_setup, args=(sender, config), daemon=True)
    child.start()
    sender.close()
    try:
        if not receiver.poll(timeout):
            child.kill()
            raise InvalidParameterError(
                f"setting up policy {str(config.get('policy'))[:80]!r} for "
                f"{len(config.get('items', ()))} items takes longer than this server allows "
                f"({timeout:g} s); use fewer items, a smaller budget or another policy"
            )
        try:
            refusal = receiver.recv()
        except EOFError:  # the child died (out of memory, killed)
            refusal = "the policy failed to set up on this server"
    finally:
        receiver.close()
        child.join(timeout=5)
    if refusal is not None:
        raise InvalidParameterError(refusal)
