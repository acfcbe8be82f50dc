"""A live campaign's configuration and the checks of what a requester gives it (DESIGN §5).

:class:`CampaignConfig` is the payload of a campaign's ``created`` event; the ``check_*``
functions validate ids, per-item attributes and the pull/push mode before any event is
written (validate, then commit: a refused configuration leaves the store unchanged). Each
raises a one-line :class:`~crowdbudget.exceptions.DataFormatError` or
:class:`~crowdbudget.exceptions.InvalidParameterError` naming the offending input.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crowdbudget._validation import short_repr
from crowdbudget.exceptions import DataFormatError, InvalidParameterError
from crowdbudget.registry import parse_policy


@dataclass
class CampaignConfig:
    """What a campaign was created with (the payload of its ``created`` event); the fields
    are the arguments of :meth:`~crowdbudget.campaign.Campaign.create`, checked there. A
    ``settings_changed`` event replaces ``ttl`` and ``max_pending_per_worker``."""

    campaign_id: str
    items: list[str]
    classes: list[str]
    budget: float
    policy: str = "opt-kg"
    prior: list[float] | None = None
    worker_prices: dict[str, float] = field(default_factory=dict)
    default_price: float = 1.0
    ttl: float | None = None
    seed: int = 0
    name: str = ""
    max_labels_per_item: int | None = None
    max_pending_per_worker: int | None = None
    verdict: str = "posterior"
    workers: list[str] = field(default_factory=list)
    mode: str = "pull"
    pairs: list[list[str]] | None = None
    contexts: list[int] | None = None
    features: list[list[float]] | None = None
    worker_capacities: dict[str, int] = field(default_factory=dict)

    def to_payload(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (the ``created`` event's payload)."""
        return {k: v for k, v in self.__dict__.items()}


#: the largest seed NumPy's SeedSequence takes per entry is unbounded, but a seed must be a
#: non-negative integer; 2**63 keeps it an int64 in every store
MAX_SEED = 2**63 - 1


def check_ids(values: Iterable[Any], what: str) -> list[str]:
    """``values`` as a list of ids: non-empty strings (integers are taken as their decimal
    string), none twice; ``what`` (``"item"``, ``"worker"``, ``"class"``) names them in the
    error."""
    out = []
    for value in values:
        if not isinstance(value, str | int) or isinstance(value, bool) or str(value) == "":
            raise DataFormatError(f"{what} ids must be non-empty strings, got {short_repr(value)}")
        out.append(str(value))
    seen: set[str] = set()
    for value in out:
        if value in seen:
            raise DataFormatError(f"{what} id {short_repr(value)} appears more than once")
        seen.add(value)
    return out


def check_item_attributes(
    n_items: int,
    contexts: Sequence[int] | None,
    features: Sequence[Sequence[float]] | None,
    *,
    n_features: int | None = None,
) -> dict[str, Any]:
    """``contexts`` and ``features`` of ``n_items`` new items as JSON-ready lists (only those
    given); ``n_features`` (a campaign's) when more items are added."""
    out: dict[str, Any] = {}
    if contexts is not None:
        values = list(contexts)
        if len(values) != n_items or any(
            isinstance(c, bool) or not isinstance(c, int | np.integer) or c < 0 for c in values
        ):
            raise InvalidParameterError(
                f"contexts must be {n_items} integers >= 0 (one per item), got {short_repr(values)}"
            )
        out["contexts"] = [int(c) for c in values]
    if features is not None:
        try:
            matrix = np.asarray(features, dtype=float)
        except (TypeError, ValueError):
            raise InvalidParameterError(
                "features must be a number per item and feature (a matrix)"
            ) from None
        width = (
            n_features if n_features is not None else (matrix.shape[1] if matrix.ndim == 2 else 0)
        )
        if matrix.shape != (n_items, width) or width < 1 or not np.all(np.isfinite(matrix)):
            raise InvalidParameterError(
                f"features must be finite numbers of shape (items={n_items}, features"
                f"{'' if n_features is None else '=' + str(n_features)}), got shape "
                f"{matrix.shape}"
            )
        out["features"] = matrix.tolist()
    return out


def check_mode(
    mode: Any,
    pairs: Sequence[Sequence[str]] | None,
    policy: str,
    items: list[str],
    workers: list[str],
) -> list[list[str]] | None:
    """Check ``mode`` and ``pairs`` (see :meth:`Campaign.create`); returns the pairs as
    ``[item, worker]`` lists (workers they name are appended to ``workers``)."""
    if mode not in ("pull", "push"):
        raise InvalidParameterError(f"mode must be 'pull' or 'push', got {short_repr(mode)}")
    capabilities = parse_policy(policy).capabilities
    if mode == "push" and not capabilities.chooses_workers:
        raise InvalidParameterError(
            f"policy {short_repr(policy)} picks items only, so it cannot push (item, worker) "
            "pairs; use mode 'pull' (or push to a named team with next_assignments)"
        )
    if mode == "pull" and not capabilities.supports_pull:
        raise InvalidParameterError(
            f"policy {short_repr(policy)} picks the worker itself, so workers cannot ask it for "
            "work; create the campaign with mode='push'"
        )
    if pairs is None:
        if mode == "push" and not workers:
            raise InvalidParameterError("push mode needs the team: give workers or pairs")
        return None
    if mode != "push":
        raise InvalidParameterError("pairs restrict a push campaign; give mode='push' too")
    known_items = set(items)
    known_workers = set(workers)
    out: list[list[str]] = []
    seen: set[tuple[str, str]] = set()
    for pair in pairs:
        if isinstance(pair, str | bytes) or len(pair) != 2:
            raise DataFormatError(f"a pair is [item id, worker id], got {short_repr(pair)}")
        item, worker = check_ids([pair[0]], "item")[0], check_ids([pair[1]], "worker")[0]
        if item not in known_items:
            raise DataFormatError(f"pair {short_repr([item, worker])} names an unknown item")
        if (item, worker) in seen:
            raise DataFormatError(f"pair {short_repr([item, worker])} appears more than once")
        seen.add((item, worker))
        if worker not in known_workers:
            known_workers.add(worker)
            workers.append(worker)
        out.append([item, worker])
    if not out:
        raise InvalidParameterError("pairs is empty: no worker may label any item")
    return out
