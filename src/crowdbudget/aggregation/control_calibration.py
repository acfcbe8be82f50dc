"""Calibration on control answers: a verdict's probabilities mapped by a calibration fitted on
the control items (items of known answer mixed into the work), cross-fitted, with its ECE and
NLL and their uncertainty (docs/calibration.md, "With control tasks").

The verdict reads the control items as labels of known truth (``fit(..., known_truth=...)``,
:mod:`crowdbudget.aggregation.base`), so *its own* probabilities of a control item are the
one-hot truth and say nothing about how far to trust a confident split. The calibration map is
therefore fitted on probabilities of the control items computed **without their own truth**:

1. **Held-out probabilities.** The control items (those with at least one label) are split at
   random into K folds (``n_folds``, default 5; fewer with fewer items). For each fold k the
   verdict is fitted with the truth of the *other* folds' control items known; the fold's
   items get that fit's probabilities ``q_i`` (shape (C,)): the verdict's belief about them
   from the crowd and the rest of the control answers — what it believes about any item it
   does not know. K fits (≤ 5), each the cost of one verdict fit.
2. **The map.** A probability floor ``p' = (1 − ε) p + ε / C`` (the uniform mixed in with
   weight ε; :func:`~crowdbudget.aggregation.calibration.fit_probability_floor`: the ε under
   which the control truths are most likely given their ``q_i``, one root of a concave
   log-likelihood's derivative). One parameter, because a few dozen control items cannot fit
   more; it keeps every row's order, so the labels and the accuracy are the verdict's own.
   Why a floor: the verdict's errors are confident splits the crowd agrees on wrongly, which
   a floor prices and the crowd's labels cannot (docs/calibration.md, "With a gold sample").
   How ε is fitted (``method``):

   - ``"floor"`` (default): the maximum-likelihood ε of the held-out ``q`` against the
     control truths. Honest but noisy: at 5 % control items a set with 6 % verdict errors
     shows 0–6 wrong control items, and ε follows them.
   - ``"difficulty"``: ε from the control *answers* (every label on a control item, right or
     wrong: ~5 times more evidence than the items). Each label on item i is right with
     probability ``p_i ~ Beta(α, β)`` — item difficulty, the over-dispersion that makes a
     crowd err together; (α, β) maximise the beta-binomial likelihood of the control items'
     (right, answered) counts. Under that model an item's votes give ``P(z = c | votes) ∝
     B(k_c + α, n − k_c + β) (C − 1)^{−(n − k_c)}`` (k_c votes for c of n, a uniform class
     prior); their mean top probability over the non-control items is the accuracy the
     control answers predict, and ε makes the verdict's mean confidence on those items equal
     to it (calibration in the large: ``ε = (c̄ − â) / (c̄ − 1/C)``, clipped to [0, 0.5]).
     It ignores who labelled (it predicts a majority-like accuracy), so on crowds whose
     workers differ much it under-states the verdict's accuracy and ε comes out too large.
3. **The answer.** The verdict fitted with *every* control truth known (its probabilities
   ``p``), every non-control item mapped by the ε of step 2 (fitted on all held-out ``q``);
   a control item keeps its one-hot truth.
4. **The report, cross-fitted.** Each control item's ``q_i`` mapped by an ε fitted on the
   other folds' held-out probabilities only — no item is scored by a map fitted on itself —
   scored by :func:`~crowdbudget.aggregation.calibration.calibration_metrics`, with the
   bootstrap standard error of the ECE and NLL (``n_boot`` resamples of the control items,
   the map held fixed per item: the uncertainty of scoring on few items) and the analytic
   standard error of the NLL (the standard deviation of ``−log p'(truth)`` over √n). The
   same numbers for the unmapped ``q`` are reported as ``raw``. (Second order: the held-out
   ``q`` of another fold came from a fit that knew this item's truth, which reaches ``q``
   only through the worker parameters.)

Refitted as control answers arrive: :func:`calibrate_on_control` is a pure function of the
labels, the control truth and ``rng``; a campaign calls it again at every reading.

Example:
    >>> from crowdbudget.datasets import load_dataset
    >>> data = load_dataset("rte")
    >>> control = {int(i): int(data.gold[i]) for i in range(0, 800, 20)}  # 40 items
    >>> probas, report = calibrate_on_control("bds-oc", data, control)
    >>> probas.shape, report["n_control"], report["n_folds"]
    ((800, 2), 40, 5)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.special import betaln

from crowdbudget.aggregation.base import Aggregator, FloatArray, as_label_data, vote_counts
from crowdbudget.aggregation.calibration import (
    MAX_FLOOR,
    apply_probability_floor,
    calibration_metrics,
    expected_calibration_error,
    fit_probability_floor,
)
from crowdbudget.aggregation.dawid_skene import softmax_rows
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError

#: how the floor is fitted (``method`` of :func:`calibrate_on_control`; module docstring)
CALIBRATION_METHODS = ("floor", "difficulty")

#: most folds of the cross-fitting (each one verdict fit)
CONTROL_FOLDS = 5

#: bootstrap resamples of the control items for the standard errors
CONTROL_BOOTSTRAP = 200


def _build(aggregator: Aggregator | str) -> Aggregator:
    if isinstance(aggregator, Aggregator):
        return aggregator
    from crowdbudget.aggregation.registry import make_aggregator

    return make_aggregator(aggregator)


def held_out_probabilities(
    aggregator: Aggregator | str,
    data: LabelData,
    control: Mapping[int, int],
    *,
    n_folds: int = CONTROL_FOLDS,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray, FloatArray]:
    """Step 1 of the module docstring: the answered control items (n,), their fold (n,) and
    their held-out probabilities (n, C), each from a fit knowing the other folds' truth.
    Fewer than 2 answered control items: empty arrays."""
    labelled = np.bincount(data.items, minlength=data.n_items) > 0
    items = np.array(sorted(i for i in control if labelled[int(i)]), dtype=np.int64)
    C = data.n_classes
    if items.size < 2:
        return items, np.zeros(0, dtype=np.int64), np.zeros((0, C))
    rng = np.random.default_rng(0) if rng is None else rng
    k = min(int(n_folds), items.size)
    fold_of = rng.permutation(items.size) % k
    held = np.zeros((items.size, C))
    model = _build(aggregator)
    for fold in range(k):
        inside = fold_of == fold
        left_out = set(items[inside].tolist())
        # the unanswered control items are known in every fit: their truth tells nothing
        # about any worker, only the class proportions
        known = {int(i): int(v) for i, v in control.items() if int(i) not in left_out}
        fitted = model.fit(data, known_truth=known or None)
        held[inside] = fitted.probas_[items[inside]]
    return items, fold_of, held


def _beta_binomial_log_likelihood(params: np.ndarray, right: np.ndarray, n: np.ndarray) -> float:
    """Σ_i log B(right_i + α, n_i − right_i + β) − log B(α, β) (the beta-binomial without
    its binomial coefficients, which do not depend on (α, β)); ``params`` = (log α, log β)."""
    alpha, beta = np.exp(params)
    return float(np.sum(betaln(right + alpha, n - right + beta) - betaln(alpha, beta)))


def fit_item_difficulty(right: np.ndarray, answered: np.ndarray) -> tuple[float, float]:
    """(α, β) of the items' label accuracy ``p_i ~ Beta(α, β)`` maximising the beta-binomial
    likelihood of ``right`` of ``answered`` labels per control item (each (n,)); bounded in
    [e^−4, e^12] (a crowd without over-dispersion sends both to the upper bound: a binomial)."""
    from scipy.optimize import minimize

    result = minimize(
        lambda x: -_beta_binomial_log_likelihood(x, right, answered),
        np.log([4.0, 1.0]),
        method="L-BFGS-B",
        bounds=[(-4.0, 12.0), (-4.0, 12.0)],
    )
    alpha, beta = np.exp(result.x)
    return float(alpha), float(beta)


def _difficulty_floor(
    data: LabelData, probas: FloatArray, scored: np.ndarray, right: np.ndarray, n: np.ndarray
) -> float:
    """The ``"difficulty"`` floor (module docstring): (α, β) from the control items'
    ``right`` of ``n`` answers, the predicted accuracy of the ``scored`` items (bool,
    (n_items,)) from their votes, and the ε matching the verdict's mean confidence to it."""
    alpha, beta = fit_item_difficulty(right, n)
    C = data.n_classes
    votes = vote_counts(data)[scored]  # (m, C)
    total = votes.sum(axis=1, keepdims=True)
    log_like = betaln(votes + alpha, total - votes + beta) - (total - votes) * np.log(max(C - 1, 1))
    predicted = float(np.mean(softmax_rows(log_like).max(axis=1)))
    confidence = float(np.mean(probas[scored].max(axis=1)))
    if confidence <= 1.0 / C:
        return 0.0
    return float(np.clip((confidence - predicted) / (confidence - 1.0 / C), 0.0, MAX_FLOOR))


def _control_answers(
    data: LabelData, items: np.ndarray, truth: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Right and answered labels of each control item ``items`` (n,) of class ``truth``."""
    votes = vote_counts(data)[items]
    return votes[np.arange(items.size), truth], votes.sum(axis=1)


def _cross_fitted(held: FloatArray, truth: np.ndarray, fold_of: np.ndarray, fit: Any) -> FloatArray:
    """Each held-out row mapped by the floor ``fit(rows)`` fitted on the other folds' rows
    (a boolean mask over the control items), (n, C)."""
    mapped = np.empty_like(held)
    for fold in np.unique(fold_of):
        inside = fold_of == fold
        mapped[inside] = apply_probability_floor(held[inside], fit(~inside))
    return mapped


def _scores(probas: FloatArray, truth: np.ndarray, rng: np.random.Generator, n_boot: int) -> dict:
    """:func:`calibration_metrics` of ``probas`` (n, C) against ``truth`` (n,), with the
    bootstrap standard errors of ECE and NLL and the analytic one of NLL."""
    metrics: dict[str, Any] = dict(calibration_metrics(probas, truth))
    n = truth.size
    losses = -np.log(np.maximum(probas[np.arange(n), truth], 1e-12))
    metrics["nll_se"] = float(losses.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
    draws = rng.integers(0, n, size=(int(n_boot), n))
    eces = [expected_calibration_error(probas[d], truth[d]) for d in draws]
    metrics["ece_se_bootstrap"] = float(np.std(eces, ddof=1)) if n_boot > 1 else float("nan")
    metrics["nll_se_bootstrap"] = (
        float(np.std(losses[draws].mean(axis=1), ddof=1)) if n_boot > 1 else float("nan")
    )
    return metrics


def calibrate_on_control(
    aggregator: Aggregator | str,
    labels: LabelData | Any,
    control: Mapping[int, int],
    *,
    n_folds: int = CONTROL_FOLDS,
    rng: np.random.Generator | int | None = None,
    n_boot: int = CONTROL_BOOTSTRAP,
    method: str = "floor",
) -> tuple[FloatArray, dict[str, Any]]:
    """The verdict ``aggregator`` on ``labels``, calibrated on the control answers (module
    docstring: the procedure, and why it is cross-fitted).

    Args:
        aggregator: an aggregator or its id (it should read known truth,
            :attr:`~crowdbudget.aggregation.base.Aggregator.reads_known_truth`).
        labels: :class:`~crowdbudget.datasets.LabelData` (or a crowd-kit DataFrame, whose
            ``control`` then maps task ids to label values).
        control: the control items' truth, item index → class index.
        n_folds: folds of the cross-fitting (at most :data:`CONTROL_FOLDS` fits are cheap).
        rng: draws the folds and the bootstrap (default seed 0: the same report every time).
        n_boot: bootstrap resamples for the standard errors.
        method: how ε is fitted, one of :data:`CALIBRATION_METHODS` (module docstring).

    An :class:`Aggregator` given is left fitted on ``labels`` with every control truth known
    (its ``labels_`` are the labels of the mapped probabilities: the floor keeps each row's
    order).

    Returns:
        ``(probas, report)``: the mapped probabilities (n_items, C) — control items one-hot —
        and a dict: ``map`` ("floor"), ``method``, ``floor`` (ε applied), ``n_control``
        (answered control items used), ``n_folds``, ``cross_fitted`` and ``raw``
        (:func:`_scores` of the mapped and unmapped held-out probabilities: accuracy,
        confidence, ece, ece_mass, nll, brier, nll_se, ece_se_bootstrap,
        nll_se_bootstrap; None below 2 answered items).
    """
    if method not in CALIBRATION_METHODS:
        raise InvalidParameterError(
            f"calibration method must be one of {', '.join(CALIBRATION_METHODS)}, got {method!r}"
        )
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng or 0)
    data = as_label_data(labels)
    if not isinstance(labels, LabelData):
        from crowdbudget.aggregation.base import known_truth_arrays

        coded = known_truth_arrays(control, data, labels)
        control = (
            {}
            if coded is None
            else dict(zip(coded.items.tolist(), coded.classes.tolist(), strict=True))
        )
    control = {int(i): int(c) for i, c in control.items()}
    model = _build(aggregator)
    items, fold_of, held = held_out_probabilities(
        copy.deepcopy(model), data, control, n_folds=n_folds, rng=generator
    )
    # last, so that ``aggregator`` is left fitted with every control truth known
    probas = np.array(model.fit(data, known_truth=control or None).probas_, dtype=float)
    report: dict[str, Any] = {
        "map": "floor",
        "method": method,
        "floor": 0.0,
        "n_control": int(items.size),
        "n_folds": int(np.unique(fold_of).size),
        "cross_fitted": None,
        "raw": None,
    }
    if items.size < 2:
        return probas, report
    truth = np.array([control[int(i)] for i in items], dtype=np.int64)
    known = np.zeros(data.n_items, dtype=bool)
    known[list(control)] = True
    if method == "floor":

        def fit(rows: np.ndarray) -> float:
            return fit_probability_floor(held[rows], truth[rows])

    else:
        right, answered = _control_answers(data, items, truth)

        def fit(rows: np.ndarray) -> float:
            return _difficulty_floor(data, probas, ~known, right[rows], answered[rows])

    floor = fit(np.ones(items.size, dtype=bool))
    report["floor"] = floor
    report["cross_fitted"] = _scores(
        _cross_fitted(held, truth, fold_of, fit), truth, generator, n_boot
    )
    report["raw"] = _scores(held, truth, generator, n_boot)
    probas[~known] = apply_probability_floor(probas[~known], floor)
    return probas, report


__all__ = [
    "CALIBRATION_METHODS",
    "CONTROL_BOOTSTRAP",
    "CONTROL_FOLDS",
    "calibrate_on_control",
    "fit_item_difficulty",
    "held_out_probabilities",
]
