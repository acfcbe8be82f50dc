"""Calibration of a verdict's class probabilities: ECE (equal-width and equal-mass bins),
NLL, Brier score, a reliability diagram, and the per-checkpoint columns of the campaign loop
(:func:`verdict_calibration`).

The one place these are computed: ``crowdbudget aggregate --gold``, the engine's checkpoint
rows (``ece``, ``nll``, ``brier`` → ``ece_mean`` ... in summaries), the compiled engine and
``benchmarks/bench_calibration.py`` call them; :mod:`crowdbudget.experiments.metrics`
re-exports them.

Example:
    >>> import numpy as np
    >>> probas = np.array([[0.9, 0.1], [0.2, 0.8]])
    >>> round(negative_log_likelihood(probas, np.array([0, 0])), 4)
    0.8574
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

#: NLL clips p(gold) below at this value: a verdict that gives the gold class probability 0
#: (EM posteriors underflow to exactly 0 on confident items) then costs −log(1e-12) ≈ 27.6
#: nats per item instead of infinity, so one such item cannot make the mean infinite while
#: still dominating it — which is the behaviour NLL should have for an over-confident error.
NLL_CLIP = 1e-12
#: ECE bins by default (Guo et al. 2017, "On Calibration of Modern Neural Networks", §2).
DEFAULT_BINS = 10
BINNINGS = ("equal-width", "equal-mass")


def _gold_rows(
    probas: npt.ArrayLike, gold: npt.ArrayLike, labels: npt.ArrayLike | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of ``probas`` (n_items, C) with a gold class (``gold >= 0``), their gold classes
    and the verdict's labels (argmax when ``labels`` is None)."""
    p = np.asarray(probas, dtype=float)
    truth = np.asarray(gold, dtype=np.int64).reshape(-1)
    if p.ndim != 2 or p.shape[0] != truth.shape[0]:
        raise ValueError(
            f"probas must have shape (n_items, n_classes) with n_items = len(gold) "
            f"= {truth.shape[0]}, got {p.shape}"
        )
    if not np.all(np.isfinite(p)):
        raise ValueError("probas must be finite (an aggregator returned NaN or inf)")
    mask = truth >= 0
    chosen = np.argmax(p, axis=1) if labels is None else np.asarray(labels, dtype=np.int64)
    return p[mask], truth[mask], chosen[mask]


def reliability_bins(
    probas: npt.ArrayLike,
    gold: npt.ArrayLike,
    *,
    labels: npt.ArrayLike | None = None,
    n_bins: int = DEFAULT_BINS,
) -> list[dict[str, Any]]:
    """The equal-width bins of the ECE and the reliability diagram, on the gold items: per bin
    ``lower``, ``upper``, ``count``, ``confidence`` (mean top-class probability) and
    ``accuracy`` (None where the bin is empty). Shapes as :func:`expected_calibration_error`."""
    size, confidence_sum, hits = _equal_width_sums(probas, gold, labels, n_bins)
    return [
        {
            "lower": b / n_bins,
            "upper": (b + 1) / n_bins,
            "count": int(size[b]),
            "confidence": float(confidence_sum[b] / size[b]) if size[b] else None,
            "accuracy": float(hits[b] / size[b]) if size[b] else None,
        }
        for b in range(n_bins)
    ]


def _equal_width_sums(
    probas: npt.ArrayLike, gold: npt.ArrayLike, labels: npt.ArrayLike | None, n_bins: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per equal-width bin [b/B, (b+1)/B) (the last closed): items, sum of their top-class
    probabilities, and how many are right — the one binning of the ECE and the diagram."""
    p, truth, chosen = _gold_rows(probas, gold, labels)
    confidence = p[np.arange(truth.shape[0]), chosen]
    bins = np.minimum((confidence * n_bins).astype(np.int64), n_bins - 1)
    return (
        np.bincount(bins, minlength=n_bins),
        np.bincount(bins, weights=confidence, minlength=n_bins),
        np.bincount(bins, weights=(chosen == truth).astype(float), minlength=n_bins),
    )


def expected_calibration_error(
    probas: npt.ArrayLike,
    gold: npt.ArrayLike,
    *,
    labels: npt.ArrayLike | None = None,
    n_bins: int = DEFAULT_BINS,
    binning: str = "equal-width",
) -> float:
    """Expected calibration error of the top-class probability (Guo et al. 2017, eq. 3).

    ``ECE = Σ_b (n_b / n) · |accuracy_b − confidence_b|`` where confidence is the verdict's
    probability of the label it chose and accuracy whether that label is the gold one.
    ``binning="equal-width"``: bins [0, 1/B), …, [(B−1)/B, 1] of the confidence (the usual
    reliability-diagram bins; the last bin is closed so confidence 1 falls in it);
    ``"equal-mass"``: B bins holding (as nearly as possible) equally many items, in order of
    confidence (Nixon et al. 2019's adaptive ECE) — less sensitive to the pile of items at
    confidence ≈ 1 that EM verdicts produce.

    Args:
        probas: class probabilities, shape (n_items, n_classes).
        gold: gold class per item, shape (n_items,), ``-1`` where unknown (not counted).
        labels: the verdict's labels (n_items,) (its ties broken); default the argmax.

    Returns:
        ECE in [0, 1]; NaN when no item has gold.
    """
    if binning not in BINNINGS:
        raise ValueError(f"binning must be one of {', '.join(BINNINGS)}, got {binning!r}")
    if int(n_bins) < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins!r}")
    p, truth, chosen = _gold_rows(probas, gold, labels)
    n = truth.shape[0]
    if n == 0:
        return float("nan")
    confidence = p[np.arange(n), chosen]
    correct = (chosen == truth).astype(float)
    if binning == "equal-width":
        bins = np.minimum((confidence * n_bins).astype(np.int64), n_bins - 1)
    else:
        order = np.argsort(confidence, kind="stable")
        bins = np.empty(n, dtype=np.int64)
        bins[order] = (np.arange(n) * n_bins) // n
    size = np.bincount(bins, minlength=n_bins)
    gap = np.bincount(bins, weights=correct - confidence, minlength=n_bins)
    # Σ_b |Σ_{i in b} (correct_i − conf_i)| / n  ==  Σ_b (n_b/n) |acc_b − conf_b|
    return float(np.sum(np.abs(gap[size > 0])) / n)


def negative_log_likelihood(
    probas: npt.ArrayLike, gold: npt.ArrayLike, *, clip: float = NLL_CLIP
) -> float:
    """Mean ``−log p(gold)`` over the gold items, p clipped below at ``clip`` (1e-12: see
    :data:`NLL_CLIP`). Shapes as :func:`expected_calibration_error`; NaN without gold."""
    p, truth, _ = _gold_rows(probas, gold, None)
    if truth.shape[0] == 0:
        return float("nan")
    return float(-np.mean(np.log(np.maximum(p[np.arange(truth.shape[0]), truth], clip))))


def brier_score(probas: npt.ArrayLike, gold: npt.ArrayLike) -> float:
    """Mean over gold items of ``Σ_c (p_c − [c = gold])²`` (Brier 1950, all classes; for two
    classes this is twice the one-probability form ``(p_1 − y)²``). In [0, 2]."""
    p, truth, _ = _gold_rows(probas, gold, None)
    if truth.shape[0] == 0:
        return float("nan")
    onehot = np.zeros_like(p)
    onehot[np.arange(truth.shape[0]), truth] = 1.0
    return float(np.mean(np.sum((p - onehot) ** 2, axis=1)))


def calibration_metrics(
    probas: npt.ArrayLike,
    gold: npt.ArrayLike,
    *,
    labels: npt.ArrayLike | None = None,
    n_bins: int = DEFAULT_BINS,
) -> dict[str, float]:
    """Accuracy and calibration of a verdict on its gold items: ``accuracy``, ``confidence``
    (mean top-class probability), ``ece`` (equal-width), ``ece_mass`` (equal-mass), ``nll``,
    ``brier``. The one place the runner, ``aggregate --gold`` and the calibration benchmark
    compute them. Shapes as :func:`expected_calibration_error`."""
    p, truth, chosen = _gold_rows(probas, gold, labels)
    n = truth.shape[0]
    nan = float("nan")
    return {
        "accuracy": float(np.mean(chosen == truth)) if n else nan,
        "confidence": float(np.mean(p[np.arange(n), chosen])) if n else nan,
        "ece": expected_calibration_error(probas, gold, labels=labels, n_bins=n_bins),
        "ece_mass": expected_calibration_error(
            probas, gold, labels=labels, n_bins=n_bins, binning="equal-mass"
        ),
        "nll": negative_log_likelihood(probas, gold),
        "brier": brier_score(probas, gold),
    }


def verdict_calibration(
    probas: npt.ArrayLike, final_labels: npt.ArrayLike, truth: npt.ArrayLike, mask: npt.ArrayLike
) -> dict[str, float]:
    """``ece``, ``nll``, ``brier`` of a verdict on the evaluated items (``mask``), for the
    runner's per-checkpoint rows (summarised as ``ece_mean`` ...): ``probas`` (n_items,
    n_classes) are the verdict's class probabilities — the model of its ``final_labels`` —
    and ECE bins the probability of the label it chose."""
    probas = np.asarray(probas, dtype=float)
    if probas.shape[0] != np.asarray(truth).shape[0]:
        return {}
    gold = np.where(np.asarray(mask, dtype=bool), np.asarray(truth), -1)
    return {
        "ece": expected_calibration_error(probas, gold, labels=final_labels),
        "nll": negative_log_likelihood(probas, gold),
        "brier": brier_score(probas, gold),
    }


#: the largest probability floor :func:`fit_probability_floor` returns: a weight above 1/2 on
#: the uniform distribution would say the verdict is noise more often than information
MAX_FLOOR = 0.5
#: folds of :func:`floor_calibration`'s cross-fitting (leave-one-out below this many items)
FLOOR_FOLDS = 5


def apply_probability_floor(probas: npt.ArrayLike, floor: float) -> np.ndarray:
    """``(1 − ε) p + ε / C``, shape (n_items, C): the verdict mixed with the uniform
    distribution with weight ``floor`` = ε. Each row keeps its order (so its label) and sums
    to 1; no class falls below ε / C."""
    p = np.asarray(probas, dtype=float)
    return (1.0 - floor) * p + floor / p.shape[1]


def fit_probability_floor(probas: npt.ArrayLike, gold: npt.ArrayLike) -> float:
    """The floor ε in [0, :data:`MAX_FLOOR`] under which the gold items are most likely:
    argmax_ε Σ_i log((1 − ε) p_i + ε / C), p_i the verdict's probability of item i's gold
    class (``probas`` (n_items, C), ``gold`` (n_items,), −1 for no gold).

    Why: EM verdicts assume every item's labels are independent given its class, so an item
    on which many workers agree gets a probability within 1e-10 of 1 — and when the gold
    disagrees with such an item (RTE, temp and adult each have some) its NLL term is
    ~25 nats. ε is the rate of those disagreements the model cannot see. It is not
    identifiable from crowd labels (they look the same either way; fitted by leave-one-label-
    out likelihood it comes out ~1e-5, docs/calibration.md) but it is from a gold sample.

    The log-likelihood L(ε) is a sum of logs of affine functions of ε, so it is concave and
    its derivative L'(ε) = Σ (1/C − p_i) / ((1 − ε) p_i + ε / C) decreases: the maximiser is
    0 when L' ≤ 0 just above 0, :data:`MAX_FLOOR` when L' ≥ 0 there, else L''s one root
    (Brent's method; L' is finite on (0, 1] since every denominator is at least ε / C > 0).
    """
    from scipy.optimize import brentq

    p, truth, _ = _gold_rows(probas, gold, None)
    if truth.shape[0] == 0:
        return 0.0
    n_classes = p.shape[1]
    p_gold = p[np.arange(truth.shape[0]), truth]

    def slope(eps: float) -> float:
        return float(np.sum((1.0 / n_classes - p_gold) / ((1.0 - eps) * p_gold + eps / n_classes)))

    low = 1e-12
    if slope(low) <= 0.0:
        return 0.0
    if slope(MAX_FLOOR) >= 0.0:
        return MAX_FLOOR
    return float(brentq(slope, low, MAX_FLOOR, xtol=1e-12))


def floor_calibration(
    probas: npt.ArrayLike,
    gold: npt.ArrayLike,
    *,
    labels: npt.ArrayLike | None = None,
    n_folds: int = FLOOR_FOLDS,
    rng: np.random.Generator | None = None,
    n_bins: int = DEFAULT_BINS,
) -> dict[str, Any]:
    """A probability floor fitted on the gold items, and how well it would do on gold it has
    not seen: ``floor`` (ε fitted on every gold item, :func:`fit_probability_floor`) and
    ``cross_fitted`` (:func:`calibration_metrics` of the floored probabilities where each
    gold item's ε was fitted on the other folds: ``n_folds`` random folds, one item per fold
    below that many items). Metrics on the same items the fit saw would flatter the floor;
    cross-fitting is the honest estimate. ``cross_fitted`` is None with fewer than 2 gold
    items. ``rng`` draws the folds (default: seed 0, so the report is the same every time)."""
    p = np.asarray(probas, dtype=float)
    truth = np.asarray(gold, dtype=np.int64).reshape(-1)
    floor = fit_probability_floor(p, truth)
    scored = np.flatnonzero(truth >= 0)
    out: dict[str, Any] = {"floor": floor, "cross_fitted": None, "n_folds": 0}
    if scored.shape[0] < 2:
        return out
    rng = np.random.default_rng(0) if rng is None else rng
    k = min(int(n_folds), scored.shape[0])
    fold_of = rng.permutation(scored.shape[0]) % k
    floored = p.copy()
    for fold in range(k):
        held, fitting = scored[fold_of == fold], scored[fold_of != fold]
        only_fitting = np.full_like(truth, -1)
        only_fitting[fitting] = truth[fitting]
        floored[held] = apply_probability_floor(p[held], fit_probability_floor(p, only_fitting))
    only_scored = np.full_like(truth, -1)
    only_scored[scored] = truth[scored]
    out["cross_fitted"] = calibration_metrics(floored, only_scored, labels=labels, n_bins=n_bins)
    out["n_folds"] = k
    return out


def reliability_diagram(
    probas: npt.ArrayLike,
    gold: npt.ArrayLike,
    path: Any,
    *,
    labels: npt.ArrayLike | None = None,
    n_bins: int = DEFAULT_BINS,
    title: str = "",
) -> None:
    """Write a reliability diagram (PNG) to ``path``: accuracy per equal-width confidence bin
    against the bin's mean confidence, bar widths the bins, the diagonal for reference, and
    a histogram of the confidences below (DeGroot & Fienberg 1983; Guo et al. 2017 Fig. 1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    size, conf, hits = _equal_width_sums(probas, gold, labels, n_bins)
    n = int(size.sum())
    filled = size > 0
    left = np.arange(n_bins) / n_bins
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(4.5, 5.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    top.bar(
        left[filled],
        hits[filled] / size[filled],
        width=1 / n_bins,
        align="edge",
        edgecolor="black",
        alpha=0.7,
        label="accuracy",
    )
    top.plot(
        conf[filled] / size[filled],
        hits[filled] / size[filled],
        "o",
        color="C3",
        label="(mean confidence, accuracy)",
    )
    top.plot([0, 1], [0, 1], "--", color="grey", label="perfect calibration")
    ece = expected_calibration_error(probas, gold, labels=labels, n_bins=n_bins)
    top.set_ylabel("accuracy")
    top.set_title(f"{title} ECE={ece:.3f}, n={n}".strip())
    top.legend(loc="upper left", fontsize=7)
    bottom.bar(left, size / max(n, 1), width=1 / n_bins, align="edge", edgecolor="black")
    bottom.set_xlabel("confidence (top-class probability)")
    bottom.set_ylabel("share")
    bottom.set_xlim(0, 1)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


__all__ = [
    "BINNINGS",
    "DEFAULT_BINS",
    "FLOOR_FOLDS",
    "MAX_FLOOR",
    "NLL_CLIP",
    "apply_probability_floor",
    "brier_score",
    "calibration_metrics",
    "expected_calibration_error",
    "fit_probability_floor",
    "floor_calibration",
    "negative_log_likelihood",
    "reliability_bins",
    "reliability_diagram",
    "verdict_calibration",
]
