"""Conformance checks for posteriors (``check_posterior``, DESIGN §11).

``check_posterior(posterior_factory)`` builds fresh prior posteriors with the factory, feeds
them random labels (random items, classes and — when the posterior has ``n_workers`` — workers)
and raises ``AssertionError`` naming the first broken rule of the
:class:`~crowdbudget.posteriors.base.LabelPosterior` protocol:

1. the protocol's members are there: ``n_items`` and ``n_classes`` (ints, ``n_classes >= 2``),
   ``update``, ``class_probabilities``, ``predict`` and — unless ``lookahead=False`` —
   ``lookahead``;
2. at the prior and after every label, ``class_probabilities()`` has shape
   (n_items, n_classes), finite values in [0, 1] and rows summing to 1; ``predict()`` has
   shape (n_items,), integer classes, each an argmax of its row (ties, to ``atol``, either
   way);
3. ``lookahead()`` and ``lookahead(worker)``: ``label_probabilities`` of shape
   (n_items, n_classes) — the next label is a class — with rows summing to 1;
   ``class_probabilities`` of shape (n_items, n_classes, n_classes), rows summing to 1;
   ``error_after`` None or of shape (n_items, n_classes) and ``1 − max_c`` of those; and what
   it says a label of class l from ``worker`` does to item i is what ``update`` does
   (``class_probabilities()[i]`` afterwards, to ``atol``); calling it changes nothing;
4. ``update`` refuses a label outside 0..n_classes−1 with
   :class:`~crowdbudget.exceptions.InvalidParameterError` and changes nothing;
5. nothing of the posterior can be changed through the arrays it returns (they are
   overwritten and the posterior asked again);
6. determinism: two posteriors from the factory fed the same labels give bit-identical
   class probabilities, predictions and look-aheads;
7. the order of the labels matters only as documented (``order``):

   - ``"exchangeable"`` — the posterior is a function of the multiset of labels (conjugate
     counts: Beta–Bernoulli, Dirichlet): any permutation of the labels gives the same class
     probabilities, and a label moves only its own item's row;
   - ``"disjoint"`` — two labels sharing neither item nor worker commute, and a label moves
     only its own item's row (moment matching per (item, worker): one-coin, two-coin);
   - ``"sequential"`` — no claim (one shared belief, e.g. the logistic model's weights,
     where every label moves every item).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import LabelEvent

__all__ = ["PosteriorFactory", "check_posterior"]

#: a function building a fresh prior posterior, the same each call
PosteriorFactory = Callable[[], Any]

Order = Literal["exchangeable", "disjoint", "sequential"]


def _workers(posterior: Any) -> int | None:
    n = getattr(posterior, "n_workers", None)
    return None if n is None else int(n)


def _events(
    n_items: int, n_classes: int, n_workers: int | None, n: int, rng: np.random.Generator
) -> list[LabelEvent]:
    workers = rng.integers(n_workers or 1, size=n)
    return [
        LabelEvent(item=int(i), worker=int(w), label=int(c))
        for i, w, c in zip(
            rng.integers(n_items, size=n), workers, rng.integers(n_classes, size=n), strict=True
        )
    ]


def _disjoint_pairs(
    n_items: int, n_classes: int, n_workers: int | None, n: int, rng: np.random.Generator
) -> list[tuple[LabelEvent, LabelEvent]]:
    """``n`` pairs of labels sharing neither item nor worker."""
    pairs = []
    for _ in range(n):
        i, k = (int(x) for x in rng.choice(n_items, size=2, replace=False))
        if n_workers is None:
            w = v = 0
        else:
            w, v = (int(x) for x in rng.choice(n_workers, size=2, replace=False))
        c, d = (int(x) for x in rng.integers(n_classes, size=2))
        pairs.append((LabelEvent(item=i, worker=w, label=c), LabelEvent(item=k, worker=v, label=d)))
    return pairs


def _lookahead_arrays(posterior: Any, worker: int | None) -> list[np.ndarray]:
    look = posterior.lookahead() if worker is None else posterior.lookahead(worker)
    arrays = [np.asarray(look.label_probabilities), np.asarray(look.class_probabilities)]
    if look.error_after is not None:
        arrays.append(np.asarray(look.error_after))
    return arrays


def _outputs(posterior: Any, lookahead_workers: list[int | None]) -> list[np.ndarray]:
    """Copies of everything the protocol returns, to compare."""
    out = [np.array(posterior.class_probabilities()), np.array(posterior.predict())]
    for worker in lookahead_workers:
        out.extend(np.array(a) for a in _lookahead_arrays(posterior, worker))
    return out


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.shape == y.shape and np.array_equal(x, y, equal_nan=True)
        for x, y in zip(a, b, strict=True)
    )


def _scribble(array: np.ndarray) -> None:
    """Overwrite a returned array (read-only arrays are fine: they cannot be scribbled on)."""
    with contextlib.suppress(ValueError):
        array[...] = -1 if np.issubdtype(array.dtype, np.integer) else np.nan


def _check_probabilities(name: str, where: str, probs: np.ndarray, atol: float) -> None:
    assert np.all(np.isfinite(probs)), f"{name}: {where} has non-finite values"
    assert np.all((probs >= -atol) & (probs <= 1.0 + atol)), f"{name}: {where} outside [0, 1]"
    sums = probs.sum(axis=-1)
    worst = float(np.max(np.abs(sums - 1.0))) if sums.size else 0.0
    assert worst <= atol, f"{name}: {where} rows do not sum to 1 (off by {worst:.3g})"


def _check_state(name: str, posterior: Any, where: str, atol: float) -> np.ndarray:
    """Rule 2; returns the class probabilities."""
    n_items, n_classes = posterior.n_items, posterior.n_classes
    probs = np.asarray(posterior.class_probabilities())
    assert probs.shape == (n_items, n_classes), (
        f"{name}: class_probabilities() {where} has shape {probs.shape}, "
        f"expected {(n_items, n_classes)}"
    )
    _check_probabilities(name, f"class_probabilities() {where}", probs, atol)
    labels = np.asarray(posterior.predict())
    assert labels.shape == (n_items,), (
        f"{name}: predict() {where} has shape {labels.shape}, expected {(n_items,)}"
    )
    assert np.issubdtype(labels.dtype, np.integer), (
        f"{name}: predict() {where} gives {labels.dtype}, not integer classes"
    )
    assert np.all((labels >= 0) & (labels < n_classes)), (
        f"{name}: predict() {where} gives classes outside 0..{n_classes - 1}"
    )
    chosen = probs[np.arange(n_items), labels]
    bad = np.flatnonzero(chosen < probs.max(axis=1) - atol)
    assert bad.shape[0] == 0, (
        f"{name}: predict() {where} is not an argmax of class_probabilities() for item "
        f"{int(bad[0])} (class {int(labels[bad[0]])}: {chosen[bad[0]]:.6g} < "
        f"{probs[bad[0]].max():.6g})"
    )
    return probs


def _check_lookahead(
    name: str,
    factory: PosteriorFactory,
    history: list[LabelEvent],
    worker: int | None,
    where: str,
    atol: float,
) -> None:
    """Rule 3 on a posterior fed ``history``."""
    posterior = _fed(factory, history)
    n_items, n_classes = posterior.n_items, posterior.n_classes
    before = _outputs(posterior, [])
    call = "lookahead()" if worker is None else f"lookahead({worker})"
    look = posterior.lookahead() if worker is None else posterior.lookahead(worker)
    labels = np.asarray(look.label_probabilities)
    assert labels.shape == (n_items, n_classes), (
        f"{name}: {call} {where}: label_probabilities has shape {labels.shape}, "
        f"expected {(n_items, n_classes)}"
    )
    _check_probabilities(name, f"{call} {where}: label_probabilities", labels, atol)
    after = np.asarray(look.class_probabilities)
    assert after.shape == (n_items, n_classes, n_classes), (
        f"{name}: {call} {where}: class_probabilities has shape {after.shape}, "
        f"expected {(n_items, n_classes, n_classes)}"
    )
    _check_probabilities(name, f"{call} {where}: class_probabilities", after, atol)
    if look.error_after is not None:
        error = np.asarray(look.error_after)
        assert error.shape == (n_items, n_classes), (
            f"{name}: {call} {where}: error_after has shape {error.shape}"
        )
        gap = float(np.max(np.abs(error - (1.0 - after.max(axis=-1)))))
        assert gap <= atol, (
            f"{name}: {call} {where}: error_after is not 1 − max class probability "
            f"(off by {gap:.3g})"
        )
    assert _same(before, _outputs(posterior, [])), f"{name}: {call} {where} changed the posterior"
    # what the look-ahead says one label does is what update does
    event_worker = 0 if worker is None else worker
    if worker is None and _workers(posterior) is not None:
        return  # None is a worker who never errs, not a worker who can label
    for item in range(n_items):
        for label in range(n_classes):
            fed = _fed(factory, history)
            fed.update(LabelEvent(item=item, worker=event_worker, label=label))
            real = np.asarray(fed.class_probabilities())[item]
            gap = float(np.max(np.abs(real - after[item, label])))
            assert gap <= atol, (
                f"{name}: {call} {where} says a label {label} on item {item} gives class "
                f"probabilities {after[item, label].tolist()}, update gives {real.tolist()}"
            )


def _fed(factory: PosteriorFactory, events: list[LabelEvent]) -> Any:
    posterior = factory()
    for event in events:
        posterior.update(event)
    return posterior


def _close(a: np.ndarray, b: np.ndarray, atol: float) -> bool:
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= atol))


def _check_refusals_and_copies(
    name: str,
    posterior_factory: PosteriorFactory,
    history: list[LabelEvent],
    n_classes: int,
    look_workers: list[int | None],
) -> None:
    """Rules 4 and 5 of :func:`check_posterior`: a label outside ``0..n_classes-1`` is
    refused and changes nothing; writing into a returned array changes nothing."""
    fresh = _fed(posterior_factory, history)
    reference = _outputs(fresh, look_workers)
    for bad in (-1, n_classes):
        try:
            fresh.update(LabelEvent(item=0, worker=0, label=bad))
        except InvalidParameterError:
            pass
        else:
            raise AssertionError(
                f"{name}: update accepted the label {bad} (classes 0..{n_classes - 1})"
            )
        assert _same(reference, _outputs(fresh, look_workers)), (
            f"{name}: the refused label {bad} changed the posterior"
        )

    # rule 5: no mutation through the returned arrays
    returned = [np.asarray(fresh.class_probabilities()), np.asarray(fresh.predict())]
    for worker in look_workers:
        returned.extend(_lookahead_arrays(fresh, worker))
    for array in returned:
        _scribble(array)
    assert _same(reference, _outputs(fresh, look_workers)), (
        f"{name}: writing into an array it returned changed the posterior"
    )


def check_posterior(
    posterior_factory: PosteriorFactory,
    *,
    order: Order = "sequential",
    lookahead: bool = True,
    seed: int = 0,
    n_labels: int = 24,
    atol: float = 1e-9,
) -> None:
    """Raise ``AssertionError`` if the posterior breaks the posterior protocol (module
    docstring, rules 1–7).

    Args:
        posterior_factory: builds a fresh prior posterior, the same each call (e.g.
            ``lambda: BetaBernoulliPosterior([1.0, 1.0], n_items=6)``); a few items
            suffice (rule 3 updates a copy per item and class).
        order: what the posterior's documentation says of the order of the labels:
            ``"exchangeable"``, ``"disjoint"`` or ``"sequential"`` (rule 7).
        lookahead: check ``lookahead`` (rule 3); False for a posterior without one (it then
            does not implement the whole protocol).
        seed: seed of the random labels.
        n_labels: labels fed in the update and determinism checks.
        atol: tolerance of the probability checks (sums, argmax, look-ahead vs update).
    """
    if order not in ("exchangeable", "disjoint", "sequential"):
        raise InvalidParameterError(
            f"order must be 'exchangeable', 'disjoint' or 'sequential', got {order!r}"
        )
    posterior = posterior_factory()
    name = type(posterior).__name__
    # 1. the members
    for member in ("update", "class_probabilities", "predict") + (
        ("lookahead",) if lookahead else ()
    ):
        assert callable(getattr(posterior, member, None)), (
            f"{name} has no {member}() (LabelPosterior protocol)"
        )
    n_items, n_classes = getattr(posterior, "n_items", None), getattr(posterior, "n_classes", None)
    assert isinstance(n_items, int | np.integer) and n_items > 0, (
        f"{name}.n_items must be a positive int, got {n_items!r}"
    )
    assert isinstance(n_classes, int | np.integer) and n_classes >= 2, (
        f"{name}.n_classes must be an int >= 2, got {n_classes!r}"
    )
    assert posterior_factory() is not posterior, "the factory must build a new posterior each call"
    n_items, n_classes = int(n_items), int(n_classes)
    n_workers = _workers(posterior)
    look_workers: list[int | None] = [None, 0] if lookahead else []
    rng = np.random.default_rng(seed)
    events = _events(n_items, n_classes, n_workers, n_labels, rng)

    # 2. valid probabilities and predictions at the prior and after every label
    _check_state(name, posterior, "at the prior", atol)
    for t, event in enumerate(events):
        before = np.asarray(posterior.class_probabilities()).copy()
        posterior.update(event)
        probs = _check_state(name, posterior, f"after label {t + 1} ({event})", atol)
        if order != "sequential":
            others = np.arange(n_items) != event.item
            assert _close(probs[others], before[others], 0.0), (
                f"{name}: label {t + 1} ({event}) moved other items' class probabilities "
                f"(order={order!r} says a label moves only its own item)"
            )

    # 3. the look-ahead, at the prior and after some labels
    if lookahead:
        for history, where in ((events[:0], "at the prior"), (events[:5], "after 5 labels")):
            for worker in look_workers:
                _check_lookahead(name, posterior_factory, history, worker, where, atol)

    # 4. bad labels are refused and change nothing; 5. no mutation through returned arrays
    _check_refusals_and_copies(name, posterior_factory, events[:3], n_classes, look_workers)

    # 6. determinism
    one, two = _fed(posterior_factory, events), _fed(posterior_factory, events)
    first = _outputs(one, look_workers)
    assert _same(first, _outputs(two, look_workers)), (
        f"{name}: two posteriors fed the same labels differ"
    )
    assert _same(first, _outputs(one, look_workers)), (
        f"{name}: asking twice gives different answers"
    )

    # 7. order of the labels
    if order == "exchangeable":
        shuffled = [events[k] for k in rng.permutation(len(events))]
        probs = np.asarray(_fed(posterior_factory, shuffled).class_probabilities())
        assert _close(probs, np.asarray(one.class_probabilities()), atol), (
            f"{name}: the same labels in another order give other class probabilities "
            "(order='exchangeable')"
        )
    elif order == "disjoint" and n_items >= 2 and (n_workers is None or n_workers >= 2):
        pairs = _disjoint_pairs(n_items, n_classes, n_workers, n_labels // 2, rng)
        forward = _fed(posterior_factory, [e for pair in pairs for e in pair])
        backward = _fed(posterior_factory, [e for pair in pairs for e in reversed(pair)])
        assert _close(
            np.asarray(forward.class_probabilities()),
            np.asarray(backward.class_probabilities()),
            atol,
        ), f"{name}: two labels sharing neither item nor worker do not commute (order='disjoint')"
