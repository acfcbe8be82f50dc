"""The service's settings: who may create campaigns, and the limits every request is held to.

Everything here is chosen by whoever runs the server (``crowdbudget serve`` flags, or
:class:`ServiceSettings` in Python), never by a client: no value a client sends becomes a
path, a size or a time limit. A request beyond a limit is refused with one line naming the
limit (422; 413 for the body size, 415 for a body that is not of the route's media type, 429
with ``Retry-After`` for a key over its request rate) and changes nothing.

Defaults are sized for a public deployment on a small machine:

===============================  ============  ==============================================
setting                          default       what it bounds
===============================  ============  ==============================================
``operator_key``                 None          who may create and list campaigns (None: anyone
                                               who can reach the server: ``serve`` then binds
                                               only to loopback)
``max_body_bytes``               8 MiB         one request body (413 beyond it)
``max_items_per_request``        100,000       items in one create / add-items request
``max_id_length``                200           an item, worker or class id, a label
``max_classes``                  1,000         classes of one campaign
``max_features``                 1,000         features per item
``max_policy_length``            500           a policy id with its parameters
``max_campaigns_in_memory``      64            campaigns held in memory (least recently used
                                               evicted; reloaded from the store on next use)
``max_items_in_memory``          1,000,000     items of the campaigns held in memory, in all
                                               (evicted as above; about 31-39 MiB of resident
                                               memory per 10^5 items, docs/service.md)
``default_max_pending_per_worker``  1          unanswered assignments one worker may hold,
                                               unless the requester raises it
``max_pending_per_worker``       1,000         the highest a requester may raise it to
``default_ttl``                  3,600 s       seconds before an unanswered assignment expires
                                               (its budget comes back), unless the requester
                                               sets another
``max_ttl``                      7 days        the longest a requester may set
``setup_timeout``                10 s          building a campaign's policy (its ``reset`` on
                                               the campaign's problem and its first decision),
                                               tried in a child process
``max_policy_cost``              10^7          a policy's declared cost on the campaign's size
                                               (``ComponentSpec.cost``: e.g. ``kos`` 200 ×
                                               budget, ``gittins`` 25 × budget²); beyond it the
                                               campaign is refused at creation
``compute_timeout``              10 s          one verdict fit (``…/results?verdict=``,
                                               ``…/calibration``): the child computing it is
                                               killed at this deadline (503 to the client)
``compute_memory_bytes``         2 GiB         the address space of a child that sets up a
                                               policy or fits a verdict (``RLIMIT_AS``)
``max_compute_jobs``             2             such children running at once per server
                                               process; a further request gets 503 with
                                               ``Retry-After``
``shutdown_grace``               3 s           after SIGTERM, how long requests in flight may
                                               finish before they are cancelled (their
                                               children killed)
``max_items_per_campaign``       200,000       items of one campaign, at creation and after
                                               adding items (its memory grows with them; at
                                               most ``max_items_in_memory``)
``max_campaigns``                1,000         campaigns in the store, created by anyone
``max_campaigns_per_key``        200           campaigns created with one operator key (or,
                                               on a server without one, by anyone; at most
                                               ``max_campaigns``)
``requests_per_second_per_key``  50            sustained requests per second with one key
                                               (token bucket; 429 beyond it)
``request_burst_per_key``        200           requests one key may send at once before the
                                               rate applies (the bucket's size)
``read_cache_bytes``             64 MiB        answers of the read endpoints (results, status,
                                               calibration, dashboard) kept per campaign
                                               event count
                                               (least recently used dropped first)
``keep_alive_timeout``           75 s          how long an idle keep-alive connection stays
                                               open; longer than a load balancer's own idle
                                               timeout (nginx: 60 s), so the balancer closes
                                               first and never sends a request on a connection
                                               the server is closing (that request would get no
                                               answer: nginx does not resend a POST)
===============================  ============  ==============================================
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from crowdbudget.exceptions import InvalidParameterError

#: the environment variable holding the operator key (``serve`` also reads a key file)
OPERATOR_KEY_ENV = "CROWDBUDGET_OPERATOR_KEY"

#: a shorter operator key is refused: it is the one secret that guards campaign creation
MIN_OPERATOR_KEY_LENGTH = 16


@dataclass(frozen=True)
class ServiceSettings:
    """What the operator of a ``crowdbudget serve`` allows (see the module's table)."""

    operator_key: str | None = None
    max_body_bytes: int = 8 * 2**20
    max_items_per_request: int = 100_000
    max_id_length: int = 200
    max_classes: int = 1_000
    max_features: int = 1_000
    max_policy_length: int = 500
    max_campaigns_in_memory: int = 64
    max_items_in_memory: int = 1_000_000
    default_max_pending_per_worker: int = 1
    max_pending_per_worker: int = 1_000
    default_ttl: float | None = 3600.0
    max_ttl: float = 7 * 86400.0
    setup_timeout: float = 10.0
    max_policy_cost: float = 1e7
    compute_timeout: float = 10.0
    compute_memory_bytes: int = 2 * 2**30
    max_compute_jobs: int = 2
    shutdown_grace: float = 3.0
    max_items_per_campaign: int = 200_000
    max_campaigns: int = 1_000
    max_campaigns_per_key: int = 200
    requests_per_second_per_key: float = 50.0
    request_burst_per_key: int = 200
    read_cache_bytes: int = 64 * 2**20
    keep_alive_timeout: float = 75.0

    def __post_init__(self) -> None:
        if self.operator_key is not None:
            key = self.operator_key.strip()
            if len(key) < MIN_OPERATOR_KEY_LENGTH or any(c.isspace() for c in key):
                raise InvalidParameterError(
                    f"the operator key must be at least {MIN_OPERATOR_KEY_LENGTH} characters "
                    "without spaces (e.g. python -c 'import secrets; "
                    "print(secrets.token_urlsafe(32))')"
                )
            object.__setattr__(self, "operator_key", key)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "operator_key" or (f.name == "default_ttl" and value is None):
                continue
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidParameterError(f"{f.name} must be a number > 0, got {value!r}")
            if not (math.isfinite(value) and value > 0):
                raise InvalidParameterError(f"{f.name} must be a number > 0, got {value!r}")
        if self.default_max_pending_per_worker > self.max_pending_per_worker:
            raise InvalidParameterError(
                "default_max_pending_per_worker must not exceed max_pending_per_worker"
            )
        if self.default_ttl is not None and self.default_ttl > self.max_ttl:
            raise InvalidParameterError("default_ttl must not exceed max_ttl")
        # a per-key or per-request limit above the limit containing it means the larger one:
        # lowering --max-campaigns or --max-items-per-campaign alone is enough
        if self.max_campaigns_per_key > self.max_campaigns:
            object.__setattr__(self, "max_campaigns_per_key", self.max_campaigns)
        if self.max_items_per_campaign > self.max_items_in_memory:
            object.__setattr__(self, "max_items_per_campaign", self.max_items_in_memory)
        if self.max_items_per_request > self.max_items_per_campaign:
            object.__setattr__(self, "max_items_per_request", self.max_items_per_campaign)

    def with_changes(self, **changes: Any) -> ServiceSettings:
        """A copy with ``changes`` (None values are ignored: "keep the default")."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def read_operator_key(path: str | None) -> str | None:
    """The operator key from ``path`` (its first line), else from ``$CROWDBUDGET_OPERATOR_KEY``,
    else None."""
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise InvalidParameterError(
                f"cannot read the operator key file {path!r}: {error.strerror}"
            ) from None
        lines = text.strip().splitlines()
        if not lines or not lines[0].strip():
            raise InvalidParameterError(f"the operator key file {path!r} is empty")
        return lines[0].strip()
    key = os.environ.get(OPERATOR_KEY_ENV, "").strip()
    return key or None
