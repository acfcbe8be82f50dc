"""What one request may carry, against the operator's :class:`ServiceSettings`: ids per
request and their length, classes, features, labels, time-to-live and pending assignments,
items per campaign, and the network ceilings on policy and verdict parameters.

Each check raises :class:`~crowdbudget.exceptions.InvalidParameterError` (HTTP 422) with one
line naming the limit; none changes anything, so a refused request leaves the store as it
was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.registry import check_network_policy, check_network_verdict
from crowdbudget.service.schemas import (
    CampaignCreate,
    CampaignSettingsUpdate,
    ControlCreate,
    ControlItem,
    GoldLabel,
)
from crowdbudget.service.settings import ServiceSettings


class RequestLimits:
    """The checks of requests against ``settings`` (see the module)."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings

    def check_ids(self, values: list[str], what: str) -> None:
        """Refuse more ids than one request may carry, or an id over the length limit."""
        limits = self.settings
        if len(values) > limits.max_items_per_request:
            raise InvalidParameterError(
                f"{len(values)} {what}s in one request; this server takes at most "
                f"{limits.max_items_per_request} (add the rest in further requests)"
            )
        longest = max((len(v) for v in values), default=0)
        if longest > limits.max_id_length:
            raise InvalidParameterError(
                f"a {what} id of {longest} characters; this server takes at most "
                f"{limits.max_id_length}"
            )

    def check_item_quota(self, n_items: int) -> None:
        """Refuse a campaign of more than ``max_items_per_campaign`` items."""
        limit = self.settings.max_items_per_campaign
        if n_items > limit:
            raise InvalidParameterError(
                f"a campaign of {n_items} items; this server allows at most {limit} items per "
                "campaign (max_items_per_campaign)"
            )

    def checked_features(self, features: list[list[float]] | None) -> list[list[float]] | None:
        """``features`` if no item has more than ``max_features`` of them."""
        if features and max(len(row) for row in features) > self.settings.max_features:
            raise InvalidParameterError(
                f"more than {self.settings.max_features} features per item; this server's limit"
            )
        return features

    def check_label(self, label: str) -> None:
        """Refuse a worker's label longer than ``max_id_length``."""
        if len(label) > self.settings.max_id_length:
            raise InvalidParameterError(
                f"a label of {len(label)} characters; this server takes at most "
                f"{self.settings.max_id_length}"
            )

    def check_verdict(self, verdict: str | None) -> None:
        """Refuse a verdict whose parameters exceed the network ceilings (None: nothing)."""
        if verdict is not None:
            check_network_verdict(verdict)

    def campaign_config(self, body: CampaignCreate) -> dict[str, Any]:
        """The arguments of :meth:`Campaign.create`, checked against the server's limits
        (the server's defaults filled in where the request leaves a setting out)."""
        limits = self.settings
        self.check_ids(body.items, "item")
        self.check_item_quota(len(body.items))
        if len(body.classes) > limits.max_classes:
            raise InvalidParameterError(
                f"{len(body.classes)} classes; this server takes at most {limits.max_classes}"
            )
        if max((len(c) for c in body.classes), default=0) > limits.max_id_length:
            raise InvalidParameterError(
                f"a class name is longer than this server's limit of {limits.max_id_length}"
            )
        self.check_ids(list(body.worker_prices), "worker")
        self.check_ids(list(body.worker_capacities), "worker")
        self.check_ids(body.workers, "worker")
        if body.pairs is not None:
            self.check_ids([i for i, _ in body.pairs], "pair")
            self.check_ids(list({w for _, w in body.pairs}), "worker")
        if len(body.policy) > limits.max_policy_length:
            raise InvalidParameterError(
                f"the policy id is longer than this server's limit of {limits.max_policy_length}"
            )
        check_network_policy(body.policy)
        self.check_verdict(body.verdict)
        ttl = limits.default_ttl if body.ttl is None else body.ttl
        if ttl is not None and ttl > limits.max_ttl:
            raise InvalidParameterError(
                f"ttl must be at most {limits.max_ttl:g} s on this server, got {body.ttl:g}"
            )
        pending = body.max_pending_per_worker or limits.default_max_pending_per_worker
        if pending > limits.max_pending_per_worker:
            raise InvalidParameterError(
                f"max_pending_per_worker must be at most {limits.max_pending_per_worker} on "
                f"this server, got {pending}"
            )
        return {
            "items": body.items,
            "budget": body.budget,
            "classes": body.classes,
            "policy": body.policy,
            "prior": body.prior,
            "worker_prices": body.worker_prices,
            "worker_capacities": body.worker_capacities,
            "default_price": body.default_price,
            "ttl": ttl,
            "seed": body.seed,
            "name": body.name,
            "max_labels_per_item": body.max_labels_per_item,
            "max_pending_per_worker": pending,
            "verdict": body.verdict,
            "workers": body.workers,
            "mode": body.mode,
            "contexts": body.contexts,
            "features": self.checked_features(body.features),
            "pairs": None if body.pairs is None else [list(pair) for pair in body.pairs],
            "control": None if body.control is None else self.control_argument(body.control),
        }

    def control_argument(self, body: ControlCreate) -> dict[str, Any]:
        """``Campaign.create``'s ``control`` from the request (items checked against the
        server's limits; the campaign checks the rest)."""
        control: dict[str, Any] = body.given()
        if body.items is not None:
            self.check_gold(body.items, "control")
            control["items"] = [(row.item, row.label) for row in body.items]
        return control

    def check_settings_update(self, body: CampaignSettingsUpdate) -> None:
        """Refuse a time-to-live or a pending-assignment limit beyond the server's."""
        limits = self.settings
        if body.ttl is not None and body.ttl > limits.max_ttl:
            raise InvalidParameterError(f"ttl must be at most {limits.max_ttl:g} s on this server")
        pending = body.max_pending_per_worker
        if pending is not None and pending > limits.max_pending_per_worker:
            raise InvalidParameterError(
                f"max_pending_per_worker must be at most {limits.max_pending_per_worker} on "
                "this server"
            )

    def check_gold(self, rows: Sequence[GoldLabel | ControlItem], what: str = "gold") -> None:
        """Refuse more gold (or ``what``: control) rows than one request may carry, or an id
        or label too long."""
        limits = self.settings
        if len(rows) > limits.max_items_per_request:
            raise InvalidParameterError(
                f"{len(rows)} {what} rows in one request; this server takes at most "
                f"{limits.max_items_per_request}"
            )
        self.check_ids([row.item for row in rows], f"{what} item")
        longest = max((len(row.label) for row in rows), default=0)
        if longest > limits.max_id_length:
            raise InvalidParameterError(
                f"a {what} label of {longest} characters; this server takes at most "
                f"{limits.max_id_length}"
            )

    def check_imported(self, n_rows: int, longest: Mapping[str, float]) -> None:
        """Refuse an import of more than ``max_items_per_request`` labels, or one whose
        ``longest`` worker id or label (by column) exceeds ``max_id_length``."""
        limits = self.settings
        if n_rows > limits.max_items_per_request:
            raise InvalidParameterError(
                f"{n_rows} labels in one request; this server takes at most "
                f"{limits.max_items_per_request}"
            )
        for column, length in longest.items():
            if length > limits.max_id_length:
                raise InvalidParameterError(
                    f"a {column} of more than {limits.max_id_length} characters"
                )
