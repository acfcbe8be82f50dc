"""The HTTP service for live campaigns (FastAPI): a thin shell over :class:`Campaign`.

All routes live under ``/v1``; the OpenAPI schema is at ``/openapi.json`` and interactive docs
at ``/docs`` (Swagger UI) and ``/redoc``, served from the installed ``fastapi-offline``
package (no CDN: they work offline). Access:

- the **operator key** (given to ``crowdbudget serve``, :class:`ServiceSettings`) creates and
  lists campaigns; without one, anyone who reaches the server may create campaigns, so
  ``serve`` then binds only to loopback;
- creating a campaign returns its **requester key** (full control: items, worker tokens,
  status, results, export, pending assignments, cancel, settings, gold labels and the
  calibration on them; rotate it with
  ``POST /v1/campaigns/{id}/requester-key``);
- the requester issues **worker tokens** (``POST /v1/campaigns/{id}/workers``); a worker token
  can only ask for work and answer or cancel its own assignments;
- keys travel in the ``Authorization: Bearer <key>`` header. They are random 256-bit tokens,
  stored only as SHA-256 hashes (a fast hash is enough for keys of that entropy; there is
  nothing to brute-force). A missing key gets 401, a wrong key 403; neither changes anything.
  A revoked key stops working at once in this process and within
  :data:`~crowdbudget.service.credentials.KEY_RECHECK_SECONDS` in other processes on the
  same database.

Hostile input (the service faces the internet): request bodies are parsed by strict models
(unknown fields, a boolean where a number belongs, NaN: 422); every size a client can send is
bounded by :class:`ServiceSettings` (body bytes, items per request, id and label length,
classes); a policy parameter that configures the server (a cache directory, a grid size) is
refused by name (:func:`crowdbudget.registry.check_network_policy`), and so is a parameter
that sets work beyond the server's ceiling (a verdict's ``n-iter``, ``n-restarts``, ``tol``:
:func:`crowdbudget.registry.check_network_verdict`); a policy whose declared cost on the
campaign's size exceeds ``max_policy_cost`` is refused at creation. Expensive work runs in
child processes under a deadline and a memory ceiling, a bounded number at once
(:mod:`crowdbudget.service.setup_probe`): a campaign's set-up and first decision are tried
there before anything is stored, aggregator verdicts (``…/results``, ``…/calibration``, the
dashboard's) are fitted there; a client that leaves kills its child, and a full pool answers
503 with ``Retry-After`` at once. A campaign's first decision in this process runs in a
worker thread, not on the event loop (all of it in :mod:`crowdbudget.service.expensive`).
A refused request changes nothing: campaigns validate an event before they store it.

Errors are always JSON ``{"detail": "<one line: what is wrong and what is allowed>"}`` and
never echo more than a short prefix of the input: 401/403 keys, 404 unknown campaign or
assignment (or no gold to calibrate on), 409 an assignment that cannot take the request
(expired, cancelled, already answered differently, another worker's), 413 a body over the
limit, 422 malformed input, 503 an expensive computation that found the server busy (with
``Retry-After``) or ran past its deadline or memory ceiling, 500 (with no detail) a fault of
the server.

Consistency: one lock per campaign serialises its requests in this process; every accepted
change is in the event store before the response is sent. Several processes on one database
give the answers of one (an event-version check with retry,
:meth:`~crowdbudget.service.host.Service.run`): an append
that loses the race (the event table's primary key makes each event number unique) is decided
again on a reloaded copy, and an answer that wrote nothing is checked against the events
other processes appended before it is given.

Layout (FastAPI's own mechanisms): :mod:`~crowdbudget.service.settings` (what the operator
allows), :mod:`~crowdbudget.service.host` (the process's state, ``app.state.service``, and
the one way a request runs on a campaign), :mod:`~crowdbudget.service.dependencies` (the
service and who is calling, as ``Depends``), :mod:`~crowdbudget.service.schemas` (request
and response bodies), :mod:`~crowdbudget.service.limits` (what a request may carry),
:mod:`~crowdbudget.service.expensive` (bounded expensive work),
:mod:`~crowdbudget.service.errors` (error answers), :mod:`~crowdbudget.service.guards` (the
middleware), and the routers in :mod:`crowdbudget.service.routers`, one per resource.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI

from crowdbudget.service.errors import install_error_handlers
from crowdbudget.service.guards import KeyRateLimiter, RequestGuard
from crowdbudget.service.host import Service
from crowdbudget.service.routers import assignments, campaigns, control, gold, pages, results
from crowdbudget.service.settings import ServiceSettings

#: the routes whose request body is CSV (``text/csv``); every other body is JSON
CSV_BODY_PATHS = re.compile(r"/v1/campaigns/[^/]+/(items/csv|labels/import)")


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the compute helpers with the server; at shutdown (uvicorn on SIGTERM / SIGINT)
    every acknowledged event is already committed, so this kills the children still
    computing, drains the committer thread and closes the connections."""
    service: Service = app.state.service
    service.compute.start()
    yield
    service.compute.stop()
    service.store.dispose()


def create_app(
    db_url: str = "sqlite:///crowdbudget.db",
    clock: Callable[[], float] = time.time,
    settings: ServiceSettings | None = None,
) -> FastAPI:
    """The FastAPI application serving campaigns stored at ``db_url``, under ``settings``
    (default :class:`ServiceSettings`: no operator key, the default limits); ``clock``:
    seconds, for assignment expiries."""
    from crowdbudget import __version__

    service = Service(db_url, clock, settings)
    limits = service.settings
    app = FastAPI(
        title="crowdbudget",
        version=__version__,
        description="Budget-optimal crowdsourced labeling: live campaigns.",
        lifespan=lifespan,
        docs_url=None,  # served by pages.mount_docs from the installed package, not a CDN
        redoc_url=None,
    )
    app.state.service = service
    app.add_middleware(
        RequestGuard,
        max_body_bytes=limits.max_body_bytes,
        rate_limiter=KeyRateLimiter(
            limits.requests_per_second_per_key, limits.request_burst_per_key
        ),
        csv_paths=CSV_BODY_PATHS,
    )
    install_error_handlers(app)
    # the label round trip first: routes are matched in order, and it carries almost all
    # the traffic
    assignments.add_round_trip(app)
    app.include_router(campaigns.router)
    app.include_router(assignments.router)
    app.include_router(results.router)
    app.include_router(gold.router)
    app.include_router(control.router)
    app.include_router(pages.router)
    pages.mount_docs(app)
    return app
