"""A live campaign's configuration and the checks of what a requester gives it (DESIGN §5).

:class:`CampaignConfig` is the payload of a campaign's ``created`` event; the ``check_*``
functions validate ids, per-item attributes and the pull/push mode before any event is
written (validate, then commit: a refused configuration leaves the store unchanged). Each
raises a one-line :class:`~crowdbudget.exceptions.DataFormatError` or
:class:`~crowdbudget.exceptions.InvalidParameterError` naming the offending input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from crowdbudget._validation import check_budget, clip_text, short_repr
from crowdbudget.exceptions import DataFormatError, InvalidParameterError
from crowdbudget.policies.base import check_push_capable
from crowdbudget.policies.verdict import POSTERIOR, check_verdict
from crowdbudget.registry import make_policy, parse_policy, split_verdict

if TYPE_CHECKING:
    import pandas as pd


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
    #: the control tasks given at creation (crowdbudget.campaign.control; None: none)
    control: dict[str, Any] | None = None

    def to_payload(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (the ``created`` event's payload; ``control``
        only when given, so a campaign without control tasks stores what it always did)."""
        return {k: v for k, v in self.__dict__.items() if k != "control" or v is not None}


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
    if mode == "push":
        check_push_capable(
            capabilities.chooses_workers,
            short_repr(policy),
            "use mode 'pull' (or push to a named team with next_assignments)",
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


def checked_config(
    items: Sequence[str],
    *,
    budget: float,
    classes: Sequence[str],
    policy: str,
    prior: Sequence[float] | None,
    worker_prices: Mapping[str, float] | None,
    worker_capacities: Mapping[str, int] | None,
    default_price: float,
    ttl: float | None,
    seed: int,
    max_labels_per_item: int | None,
    max_pending_per_worker: int | None,
    verdict: str | None,
    workers: Sequence[str],
    mode: str,
    pairs: Sequence[Sequence[str]] | None,
    contexts: Sequence[int] | None,
    features: Sequence[Sequence[float]] | None,
    campaign_id: str,
    name: str,
) -> CampaignConfig:
    """The configuration of a new campaign from :meth:`~crowdbudget.campaign.Campaign.create`'s
    arguments (documented there), checked and normalised (ids as strings, numbers as floats
    and ints, the verdict resolved); the first check that fails raises."""
    classes_ = check_ids(classes, "class")
    if len(classes_) < 2:
        raise InvalidParameterError(f"a campaign needs at least 2 classes, got {classes_}")
    budget_ = check_budget(budget)
    prior_ = None
    if prior is not None:
        prior_ = [float(p) for p in prior]
        if len(prior_) != len(classes_) or min(prior_) <= 0:
            raise InvalidParameterError(
                f"prior must be {len(classes_)} pseudo-counts > 0 (one per class), got {prior}"
            )
    prices, capacities = _check_workers(worker_prices, worker_capacities, default_price)
    _check_limits(ttl, max_labels_per_item, max_pending_per_worker, seed)
    verdict_ = _resolve_verdict(policy, verdict, len(classes_))
    items_ = check_ids(items, "item")
    workers_ = check_ids(workers, "worker")
    pairs_ = check_mode(mode, pairs, policy, items_, workers_)
    attributes = check_item_attributes(len(items_), contexts, features)
    return CampaignConfig(
        campaign_id=campaign_id,
        items=items_,
        classes=classes_,
        budget=budget_,
        policy=policy,
        prior=prior_,
        worker_prices=prices,
        worker_capacities=capacities,
        default_price=float(default_price),
        ttl=None if ttl is None else float(ttl),
        seed=int(seed),
        name=name,
        max_labels_per_item=None if max_labels_per_item is None else int(max_labels_per_item),
        max_pending_per_worker=(
            None if max_pending_per_worker is None else int(max_pending_per_worker)
        ),
        verdict=verdict_,
        workers=workers_,
        mode=mode,
        pairs=pairs_,
        **attributes,
    )


def _check_workers(
    worker_prices: Mapping[str, float] | None,
    worker_capacities: Mapping[str, int] | None,
    default_price: float,
) -> tuple[dict[str, float], dict[str, int]]:
    """The prices (numbers > 0, ``default_price`` too) and capacities (integers >= 0) per
    worker id, keyed by string ids."""
    prices = {str(k): float(v) for k, v in (worker_prices or {}).items()}
    capacities: dict[str, int] = {}
    for worker_id, capacity in (worker_capacities or {}).items():
        if isinstance(capacity, bool) or not isinstance(capacity, int | np.integer) or capacity < 0:
            raise InvalidParameterError(
                f"worker capacities must be integers >= 0, got {short_repr(capacity)} for "
                f"{short_repr(worker_id)}"
            )
        capacities[str(worker_id)] = int(capacity)
    if any(not np.isfinite(p) or p <= 0 for p in [*prices.values(), default_price]):
        raise InvalidParameterError("worker prices must be numbers > 0")
    return prices, capacities


def _check_limits(
    ttl: float | None,
    max_labels_per_item: int | None,
    max_pending_per_worker: int | None,
    seed: Any,
) -> None:
    """The time-to-live (seconds > 0 or None), the two limits (integers >= 1 or None) and
    the seed (an integer in [0, 2**63))."""
    if ttl is not None and not (np.isfinite(ttl) and ttl > 0):
        raise InvalidParameterError(f"ttl must be a number of seconds > 0, got {ttl!r}")
    for limit_name, limit in (
        ("max_labels_per_item", max_labels_per_item),
        ("max_pending_per_worker", max_pending_per_worker),
    ):
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int | np.integer) or limit < 1
        ):
            raise InvalidParameterError(
                f"{limit_name} must be an integer >= 1, got {short_repr(limit)}"
            )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise InvalidParameterError(f"seed must be an integer >= 0, got {short_repr(seed)}")
    if not 0 <= int(seed) <= MAX_SEED:
        raise InvalidParameterError(f"seed must be an integer in [0, 2**63), got {seed}")


def _resolve_verdict(policy: str, verdict: str | None, n_classes: int) -> str:
    """The campaign's verdict: ``verdict``, or the one the policy id names
    (``opt-kg:verdict=ds``; the two must then agree), or the policy's default. Builds the
    policy once, so an unknown id or bad parameter fails here, before any work."""
    policy_spec, named = split_verdict(policy, POSTERIOR)  # what the id itself names
    make_policy(policy_spec)
    if verdict is None:
        # neither names one: the policy's default (its own model for most)
        verdict = split_verdict(policy)[1].name
    verdict = check_verdict(verdict, n_classes)
    if not named.is_posterior:
        if verdict not in ("posterior", named.name):
            raise InvalidParameterError(
                f"policy {policy!r} names the verdict {named.name!r} and verdict= names "
                f"{verdict!r}; give one"
            )
        verdict = check_verdict(named.name, n_classes)
    return verdict


def check_settings(ttl: Any, max_pending_per_worker: Any) -> dict[str, Any]:
    """The ``settings_changed`` payload for a new time-to-live (seconds > 0) and pending
    limit (an integer >= 1); None keeps a setting, so only those given are in it."""
    changes: dict[str, Any] = {}
    if ttl is not None:
        if isinstance(ttl, bool) or not (np.isfinite(ttl) and ttl > 0):
            raise InvalidParameterError(f"ttl must be a number of seconds > 0, got {ttl!r}")
        changes["ttl"] = float(ttl)
    if max_pending_per_worker is not None:
        if (
            isinstance(max_pending_per_worker, bool)
            or not isinstance(max_pending_per_worker, int | np.integer)
            or max_pending_per_worker < 1
        ):
            raise InvalidParameterError(
                "max_pending_per_worker must be an integer >= 1, got "
                f"{short_repr(max_pending_per_worker)}"
            )
        changes["max_pending_per_worker"] = int(max_pending_per_worker)
    return changes


def check_added_attributes(
    n_items: int,
    contexts: Sequence[int] | None,
    features: Sequence[Sequence[float]] | None,
    *,
    has_contexts: bool,
    has_features: bool,
    n_features: int | None,
) -> dict[str, Any]:
    """The ``contexts`` and ``features`` of ``n_items`` items added to a campaign whose items
    have contexts (``has_contexts``) and features (``has_features``, ``n_features`` each;
    None: not known yet), as :func:`check_item_attributes` gives them; every item of a
    campaign has them, or none does."""
    for name, given, has in (
        ("contexts", contexts, has_contexts),
        ("features", features, has_features),
    ):
        if has and given is None:
            raise InvalidParameterError(f"this campaign's items have {name}: give theirs")
        if not has and given is not None:
            raise InvalidParameterError(f"this campaign's items have no {name}")
    return check_item_attributes(n_items, contexts, features, n_features=n_features)


def class_code(
    label: Any, class_index: Mapping[str, int], classes: Sequence[str], what: str
) -> int:
    """The class index of ``label`` (its string); ``what`` names the label in the error."""
    code = class_index.get(str(label))
    if code is None:
        raise DataFormatError(
            f"{what} is not a class; classes: " + clip_text(", ".join(classes), 200)
        )
    return code


def check_gold(
    gold: Mapping[str, str] | Iterable[Sequence[str]],
    item_index: Mapping[str, int],
    class_index: Mapping[str, int],
    classes: Sequence[str],
    *,
    what: str = "gold",
) -> dict[int, int]:
    """Gold labels (or, ``what="control"``, control items' answers), ``{item id: class}`` or
    ``(item id, class)`` pairs, as ``{item index: class index}``. Refused: no rows, more rows
    than items, an unknown item or class, an item given twice."""
    rows = list(gold.items()) if isinstance(gold, Mapping) else list(gold)
    if not rows:
        hint = "remove_gold / DELETE removes the gold" if what == "gold" else "none given"
        raise InvalidParameterError(
            f"the {what} is empty: give at least one (item, label) pair ({hint})"
        )
    n_items = len(item_index)
    if len(rows) > n_items:
        raise InvalidParameterError(
            f"{len(rows)} {what} rows for a campaign of {n_items} items: at most one per item"
        )
    codes: dict[int, int] = {}
    for row in rows:
        if isinstance(row, str | bytes) or not isinstance(row, Sequence) or len(row) != 2:
            raise DataFormatError(f"a {what} row is (item id, label), got {short_repr(row)}")
        item_id, label = row
        item = item_index.get(str(item_id))
        if item is None:
            raise DataFormatError(f"{what} for unknown item {short_repr(item_id)}")
        text = f"{what} label {short_repr(label)} of item {short_repr(item_id)}"
        code = class_code(label, class_index, classes, text)
        if item in codes:
            raise DataFormatError(
                f"item {short_repr(item_id)} appears more than once in the {what}"
            )
        codes[item] = code
    return codes


def check_imported(
    labels: pd.DataFrame,
    item_index: Mapping[str, int],
    class_index: Mapping[str, int],
    classes: Sequence[str],
) -> list[list[Any]]:
    """The ``imported`` event's rows, ``[item index, worker id, class index]``, of a
    crowd-kit table ``task, worker, label`` (read as strings). Refused: a missing column, an
    unknown item or class, a row without a worker."""
    for column in ("task", "worker", "label"):
        if column not in labels.columns:
            raise DataFormatError(f"imported labels lack column {column!r}")
    rows = []
    for task, worker, label in (
        labels[["task", "worker", "label"]].astype(str).itertuples(index=False)
    ):
        item = item_index.get(task)
        if item is None:
            raise DataFormatError(f"imported label for unknown item {short_repr(task)}")
        code = class_code(label, class_index, classes, f"imported label {short_repr(label)}")
        if worker == "":
            raise DataFormatError(f"imported label for item {short_repr(task)} has no worker")
        rows.append([item, worker, code])
    return rows
