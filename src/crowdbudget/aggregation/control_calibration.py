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
   - ``"answers"``: the control answers and the control items' correctness together, by
     prediction-powered inference (Angelopoulos et al. 2023, "Prediction-powered
     inference", Science 382; power-tuned as in Angelopoulos, Duchi & Zrnic 2023, "PPI++").
     Why not a likelihood of the answers alone: let an item be "deceptive" with
     probability ε, its labels then independent of its truth; the likelihood of a control
     item's answers given its truth t is ``(1 − ε) A(t) + ε mean_c A(c)`` (A(c) the
     worker model's likelihood of the answers under class c), which is proportional to
     ``(1 − ε) q(t) + ε / C`` — the floor's own likelihood of the item. So, read through
     the verdict's worker model, the answers say about ε exactly what the item's
     correctness says; more evidence needs a model of *how* crowds err together. Here:
     each label is right with probability ``σ(logit a_w + u_i)`` (a_w the worker's
     accuracy under the verdict's posterior, :func:`worker_accuracies`; u_i ~ N(μ, σ²) an
     item effect — difficulty, GLAD's idea (Whitehill et al. 2009) as a random effect),
     (μ, σ) maximising the marginal likelihood of every control answer right or wrong
     (:func:`fit_item_effect`, Gauss–Hermite quadrature), and the class posterior with
     u_i integrated out (:func:`effect_posterior`) gives ``f_j``, the probability that
     the verdict's class of item j is its truth. Used alone (ε matching the verdict's
     mean confidence to mean f) it is biased: a normal effect has too thin a tail for the
     items a whole crowd gets wrong (on temp subsamples it gives ε ≈ 0.003 where the best
     is 0.08). PPI removes the bias with the control items' correctness
     ``y_i = [argmax q_i = t_i]`` (``q_i`` held out, step 1):
     ``Â = λ · mean_U f + mean_L (y − λ f)`` (U the N non-control items, L the n control
     items; f on L from the same model, which reads no control truth but through (μ, σ)
     and the a_w). For any fixed λ it is unbiased for the verdict's accuracy A whatever
     the model's bias; its variance ``var(y − λ f) / n + λ² var(f) / N`` is least at
     ``λ* = cov(y, f) / ((1 + n / N) var(f))``, estimated on L and clipped to [0, 1]
     (λ = 0: the control items' own accuracy; reported as ``power``). ε then matches the
     verdict's mean confidence c̄ on U to Â: ``ε = (c̄ − Â) / (c̄ − 1/C)`` (clipped to
     [0, 0.5]). What it buys: the variance falls by the share of the control items' error
     the model predicts (split votes, weak workers); an error the votes do not show (a
     unanimous wrong item) stays in the rectifier's variance, which the number of control
     items bounds.
   - ``"splits"``: a map whose strength follows each item's own evidence, fitted on the
     votes of *every* item, then a floor from the control items. The verdict's errors sit
     on split items (a 5–1 split is wrong several times as often as a unanimous item)
     where a worker-model EM is still ~0.99 sure. (i) The difficulty model above (each
     label right with ``p_i ~ Beta(α, β)``) fitted on the vote counts of every answered
     item with the class summed out (:func:`fit_vote_difficulty`; the control items enter
     with their class — thousands of labels instead of the control items' few hundred;
     no gold needed but to say which side of 1/2 the crowd is on). (ii) Its posterior
     ``f_j = P(z_j = verdict class | votes)`` replaces the verdict's confidence, the other
     classes keeping the verdict's proportions (:func:`confidence_map`; the label never
     changes). (iii) The vote model ignores who labelled and its Beta's tail is thin, so
     ``mean f`` is biased; classical prediction-powered inference (λ = 1) removes the bias
     with the control items: ``Â = mean_U f + mean_L (y − f)`` (``y``, ``f`` at the
     held-out class of step 1) — not power-tuned: with 0 wrong control items the tuned λ
     is 0 and the estimate 1. ε floors the mapped rows so that their mean confidence is
     Â (0 when it is already at or below: a floor cannot raise confidence, and mixing
     back toward the overconfident verdict was measured worse).
   - ``"splits-np"``: ``"splits"`` with the law of p_i fitted without a shape: weights on a
     grid of accuracies from 1/C to 0.999, the nonparametric maximum likelihood of the
     same vote counts (:func:`fit_vote_mixture`). One Beta's two parameters follow the
     many split items and its tail then says how often a unanimous item is wrong (temp's
     campaigns: 0.5 % where 2.2 % are); the grid finds what the splits show — on temp a
     tenth of the items at chance (p = 1/2) beside a bump at 0.94, so 4–0 and 5–1 items
     are less sure (0.991 and 0.960 against the Beta's 0.995 and 0.978). In step (iii) the
     control items' correction is shrunk toward the map (:func:`shrunk_correction`): one
     wrong control item among a few moves the unbiased one by 1/n. Better than ``"floor"``
     in campaigns of a few labels per item (rte, temp, wsd) and worse where the verdict
     reads many labels of very different workers (all of rte's, trec's, millionaire's
     labels), which a vote map cannot price: not the default (docs/calibration.md).
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
   only through the worker parameters; likewise ``"answers"``'s worker accuracies a_w come
   from the fit knowing every control truth.)

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
CALIBRATION_METHODS = ("floor", "difficulty", "answers", "splits", "splits-np")

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


def _vote_posterior(votes: np.ndarray, alpha: float, beta: float) -> FloatArray:
    """P(z = c | votes) under the difficulty model (module docstring), (m, C) from the vote
    counts (m, C): ``∝ B(k_c + α, n − k_c + β) (C − 1)^{−(n − k_c)}``, normalised in log
    space (softmax) so that many votes do not underflow."""
    C = votes.shape[1]
    total = votes.sum(axis=1, keepdims=True)
    log_like = betaln(votes + alpha, total - votes + beta) - (total - votes) * np.log(max(C - 1, 1))
    return softmax_rows(log_like)


def _floor_for_accuracy(probas: FloatArray, accuracy: float) -> float:
    """The ε under which the floored ``probas`` (m, C) have mean confidence ``accuracy``
    (calibration in the large): ``(c̄ − A) / (c̄ − 1/C)``, clipped to [0, MAX_FLOOR]."""
    C = probas.shape[1]
    confidence = float(np.mean(probas.max(axis=1)))
    if confidence <= 1.0 / C:
        return 0.0
    return float(np.clip((confidence - accuracy) / (confidence - 1.0 / C), 0.0, MAX_FLOOR))


def _difficulty_floor(
    data: LabelData, probas: FloatArray, scored: np.ndarray, right: np.ndarray, n: np.ndarray
) -> float:
    """The ``"difficulty"`` floor (module docstring): (α, β) from the control items'
    ``right`` of ``n`` answers, the predicted accuracy of the ``scored`` items (bool,
    (n_items,)) from their votes, and the ε matching the verdict's mean confidence to it."""
    alpha, beta = fit_item_difficulty(right, n)
    predicted = float(np.mean(_vote_posterior(vote_counts(data)[scored], alpha, beta).max(axis=1)))
    return _floor_for_accuracy(probas[scored], predicted)


def prediction_powered_accuracy(
    predicted_unlabelled: np.ndarray, predicted: np.ndarray, correct: np.ndarray
) -> tuple[float, float]:
    """PPI++ estimate (Angelopoulos, Duchi & Zrnic 2023, eq. for the mean with power tuning)
    of a mean accuracy from a prediction ``predicted_unlabelled`` (N,) on the unlabelled
    items and ``predicted`` / ``correct`` (n,) on the labelled ones: ``(Â, λ)`` with
    ``Â = λ mean f_U + mean (y − λ f_L)``, ``λ = cov(y, f) / ((1 + n/N) var(f))`` clipped to
    [0, 1] (0 when f does not vary on the labelled items: nothing to lean on)."""
    n, big_n = correct.size, max(predicted_unlabelled.size, 1)
    variance = float(np.var(predicted, ddof=1)) if n > 1 else 0.0
    if variance <= 1e-12 or predicted_unlabelled.size == 0:
        weight = 0.0
    else:
        covariance = float(np.cov(correct.astype(float), predicted, ddof=1)[0, 1])
        weight = float(np.clip(covariance / ((1.0 + n / big_n) * variance), 0.0, 1.0))
    mean_unlabelled = float(np.mean(predicted_unlabelled)) if predicted_unlabelled.size else 0.0
    estimate = weight * mean_unlabelled + float(np.mean(correct - weight * predicted))
    return float(np.clip(estimate, 0.0, 1.0)), weight


#: Gauss–Hermite nodes of the item effect's integral (exact for polynomials of degree < 40)
EFFECT_NODES = 20


def worker_accuracies(data: LabelData, probas: FloatArray) -> FloatArray:
    """Each worker's accuracy under the verdict's posterior ``probas`` (n_items, C):
    ``(Σ_labels P(z_i = l) + 1) / (n_w + 2)`` (a Beta(1, 1) prior, so a worker with one label
    is not certain), shape (n_workers,), in (0, 1)."""
    n_workers = int(data.workers.max()) + 1 if data.workers.size else 0
    agree = np.bincount(data.workers, weights=probas[data.items, data.labels], minlength=n_workers)
    counts = np.bincount(data.workers, minlength=n_workers)
    return (agree + 1.0) / (counts + 2.0)


def _label_logits(data: LabelData, accuracy: FloatArray) -> FloatArray:
    """logit of each label's worker accuracy, (n_labels,); clipped to ±8 so that a worker
    right on every label still leaves room for the item effect."""
    a = np.clip(accuracy[data.workers], 1e-4, 1.0 - 1e-4)
    return np.clip(np.log(a) - np.log1p(-a), -8.0, 8.0)


def _effect_nodes(mean: float, scale: float) -> tuple[FloatArray, FloatArray]:
    """Nodes u_g and log weights of ∫ g(u) N(u; mean, scale²) du ≈ Σ_g w_g g(u_g)."""
    x, w = np.polynomial.hermite.hermgauss(EFFECT_NODES)
    return mean + np.sqrt(2.0) * scale * x, np.log(w / np.sqrt(np.pi))


def fit_item_effect(
    data: LabelData, logits: FloatArray, items: np.ndarray, truth: np.ndarray
) -> tuple[float, float]:
    """(μ, σ) of the item effect u_i ~ N(μ, σ²) on the logit of each label's accuracy,
    ``P(label right) = σ(logit a_w + u_i)``, maximising the marginal likelihood of the
    control answers (each right or wrong against its item's known ``truth``; ``items``,
    ``truth`` (n,)): ``Σ_i log ∫ Π_{labels k of i} σ(±(logit a_k + u)) N(u; μ, σ²) du``."""
    from scipy.optimize import minimize
    from scipy.special import log_expit, logsumexp

    position = np.full(data.n_items, -1, dtype=np.int64)
    position[items] = np.arange(items.size)
    on_control = position[data.items] >= 0
    row = position[data.items[on_control]]
    sign = np.where(data.labels[on_control] == truth[row], 1.0, -1.0)
    base = logits[on_control]

    def negative(params: np.ndarray) -> float:
        nodes, log_w = _effect_nodes(params[0], float(np.exp(params[1])))
        per_label = log_expit(sign[:, None] * (base[:, None] + nodes[None, :]))  # (k, G)
        per_item = np.zeros((items.size, nodes.size))
        np.add.at(per_item, row, per_label)
        return -float(np.sum(logsumexp(per_item + log_w[None, :], axis=1)))

    result = minimize(
        negative, np.array([0.0, np.log(0.5)]), method="L-BFGS-B", bounds=[(-6, 6), (-5, 2)]
    )
    return float(result.x[0]), float(np.exp(result.x[1]))


def effect_posterior(
    data: LabelData, logits: FloatArray, prior: FloatArray, mean: float, scale: float
) -> FloatArray:
    """P(z_i = c | labels) with the item effect integrated out, (n_items, C): a one-coin
    model whose label on item i is right with ``σ(logit a_w + u_i)`` and otherwise uniform
    over the other C − 1 classes, ``u_i ~ N(mean, scale²)``, class prior ``prior`` (C,)."""
    from scipy.special import log_expit, logsumexp

    C = data.n_classes
    nodes, log_w = _effect_nodes(mean, scale)
    right = log_expit(logits[:, None] + nodes[None, :])  # (k, G)
    wrong = log_expit(-(logits[:, None] + nodes[None, :])) - np.log(max(C - 1, 1))
    # log P(labels of i | z = c, u_g) = Σ_k wrong_kg + Σ_{k: l_k = c} (right_kg − wrong_kg)
    total_wrong = np.zeros((data.n_items, nodes.size))
    np.add.at(total_wrong, data.items, wrong)
    gain = np.zeros((data.n_items, C, nodes.size))
    np.add.at(gain, (data.items, data.labels), right - wrong)
    log_joint = total_wrong[:, None, :] + gain + log_w[None, None, :]
    log_post = logsumexp(log_joint, axis=2) + np.log(np.maximum(prior, 1e-12))[None, :]
    return softmax_rows(log_post)


def _answers_floor(
    data: LabelData,
    probas: FloatArray,
    scored: np.ndarray,
    held: FloatArray,
    items: np.ndarray,
    truth: np.ndarray,
) -> tuple[float, float]:
    """The ``"answers"`` floor (module docstring) from the control ``items`` (n,) with
    ``truth`` (n,) and held-out probabilities ``held`` (n, C), for the ``scored`` items
    (bool, (n_items,)) of ``probas``: (ε, λ)."""
    logits = _label_logits(data, worker_accuracies(data, probas))
    mean, scale = fit_item_effect(data, logits, items, truth)
    model = effect_posterior(data, logits, probas.mean(axis=0), mean, scale)
    unlabelled = probas[scored]
    f_unlabelled = model[scored][np.arange(unlabelled.shape[0]), unlabelled.argmax(axis=1)]
    chosen = held.argmax(axis=1)
    f_control = model[items, chosen]
    accuracy, weight = prediction_powered_accuracy(f_unlabelled, f_control, chosen == truth)
    return _floor_for_accuracy(unlabelled, accuracy), weight


def fit_vote_difficulty(
    votes: np.ndarray, prior: FloatArray, known: Mapping[int, int] | None = None
) -> tuple[float, float]:
    """(α, β) of the difficulty model (module docstring, ``"difficulty"``) fitted on the vote
    counts ``votes`` (m, C) of *every* answered item, truth unknown: the marginal likelihood
    ``Σ_i log Σ_c π_c B(k_ic + α, n_i − k_ic + β) / B(α, β) (C − 1)^{−(n_i − k_ic)}``
    (``prior`` = π (C,)). The class is summed out, so this reads the over-dispersion of the
    splits (how often items split, how far) without any gold; it cannot tell a crowd that is
    mostly right from one that is mostly wrong, so the fit starts on the "mostly right" side
    (α > β) and stays there. ``known`` (row of ``votes`` → class): rows whose class is known
    (the control items) enter with that class instead of the sum — the only rows that show
    on which side of 1/2 an item's accuracy lies. Bounded as :func:`fit_item_difficulty`.
    An adaptive campaign's stopping depends on the votes it observed only, so the
    likelihood of those votes is unchanged by it (the likelihood principle)."""
    from scipy.optimize import minimize
    from scipy.special import logsumexp

    C = votes.shape[1]
    total = votes.sum(axis=1, keepdims=True)
    log_prior = np.log(np.maximum(prior, 1e-12))[None, :]
    wrong = (total - votes) * np.log(max(C - 1, 1))
    rows = np.array(sorted(known or {}), dtype=np.int64)
    classes = np.array([int((known or {})[int(r)]) for r in rows], dtype=np.int64)
    unknown = np.ones(votes.shape[0], dtype=bool)
    unknown[rows] = False

    def negative(params: np.ndarray) -> float:
        alpha, beta = np.exp(params)
        log_like = betaln(votes + alpha, total - votes + beta) - betaln(alpha, beta) - wrong
        summed = float(np.sum(logsumexp(log_like[unknown] + log_prior, axis=1)))
        return -(summed + float(np.sum(log_like[rows, classes])))

    result = minimize(
        negative, np.log([4.0, 1.0]), method="L-BFGS-B", bounds=[(-4.0, 12.0), (-4.0, 12.0)]
    )
    alpha, beta = np.exp(result.x)
    return float(alpha), float(beta)


#: points of the grid on which ``"splits-np"`` fits the distribution of label accuracy
MIXTURE_GRID = 50

#: EM sweeps at most for that fit, and the gain in log-likelihood per item that ends them
MIXTURE_SWEEPS = 20000
MIXTURE_TOLERANCE = 1e-9


def _grid_log_likelihood(votes: np.ndarray, grid: FloatArray) -> FloatArray:
    """log P(votes | z = c, p) of the difficulty model, (m, C, G) from the vote counts
    (m, C) and the accuracies ``grid`` (G,) in (0, 1): ``k_c log p + (n − k_c) log((1 − p) /
    (C − 1))``."""
    C = votes.shape[1]
    total = votes.sum(axis=1, keepdims=True)
    wrong = np.log1p(-grid) - np.log(max(C - 1, 1))
    return votes[:, :, None] * np.log(grid)[None, None, :] + (total - votes)[:, :, None] * wrong


def fit_vote_mixture(
    votes: np.ndarray,
    prior: FloatArray,
    known: Mapping[int, int] | None = None,
    *,
    n_grid: int = MIXTURE_GRID,
    sweeps: int = MIXTURE_SWEEPS,
) -> tuple[FloatArray, FloatArray]:
    """The distribution of label accuracy p_i fitted without a shape: weights w (G,) on the
    grid (G,) of ``n_grid`` points from 1/C to 0.999, maximising the same marginal likelihood
    of the vote counts ``votes`` (m, C) as :func:`fit_vote_difficulty` (class summed out with
    ``prior`` (C,); ``known`` rows with their class) with p_i ~ Σ_g w_g δ(grid_g) in place of
    the Beta — the nonparametric maximum likelihood of a mixing distribution (Kiefer &
    Wolfowitz 1956), by EM from uniform weights (Laird 1978) until the log-likelihood gains
    less than :data:`MIXTURE_TOLERANCE` per item. Returns ``(grid, weights)``.

    Why no shape: a Beta's two parameters are set by the many split items, and its tail then
    says how often a unanimous item is wrong — on temp's campaigns 0.5 % where 2.2 % are
    (docs/calibration.md). Why the grid starts at 1/C: with the class summed out the votes
    identify the law of p only up to relabelling (p and a crowd right as often on another
    class give the same votes), so the fit keeps every item's crowd at least at chance; the
    items whose crowd is wrong together are left to the control items (the floor).
    Identical rows (vote counts and known class) are fitted once, weighted by their count,
    so a sweep costs O(distinct rows · G)."""
    C = votes.shape[1]
    grid = np.linspace(1.0 / C, 0.999, int(n_grid))
    known_class = np.full((votes.shape[0], 1), -1.0)
    for row, value in (known or {}).items():
        known_class[int(row)] = float(value)
    patterns, counts = np.unique(np.hstack([votes, known_class]), axis=0, return_counts=True)
    by_class = _grid_log_likelihood(patterns[:, :C], grid)  # (P, C, G)
    from scipy.special import logsumexp

    log_like = logsumexp(by_class + np.log(np.maximum(prior, 1e-12))[None, :, None], axis=1)
    fixed = patterns[:, C] >= 0
    log_like[fixed] = by_class[fixed, patterns[fixed, C].astype(np.int64), :]
    # shifting each row by its maximum rescales that row's likelihood only: EM's weights
    # and the per-item gain are unchanged, and exp no longer underflows on long rows
    scaled = np.exp(log_like - log_like.max(axis=1, keepdims=True))
    weights = np.full(grid.size, 1.0 / grid.size)
    share = counts / counts.sum()
    previous = -np.inf
    for _ in range(int(sweeps)):
        mixed = scaled @ weights  # (P,), > 0: every row has a grid point at its maximum
        weights = weights * ((share / mixed) @ scaled)
        current = float(share @ np.log(mixed))
        if current - previous < MIXTURE_TOLERANCE:
            break
        previous = current
    return grid, weights / weights.sum()


def mixture_posterior(
    votes: np.ndarray, grid: FloatArray, weights: FloatArray, prior: FloatArray
) -> FloatArray:
    """P(z = c | votes) under the fitted mixture (:func:`fit_vote_mixture`), (m, C) from the
    vote counts (m, C): ``∝ π_c Σ_g w_g P(votes | c, grid_g)``, in log space."""
    from scipy.special import logsumexp

    by_class = _grid_log_likelihood(votes, grid)
    log_post = logsumexp(by_class + np.log(np.maximum(weights, 1e-300))[None, None, :], axis=2)
    return softmax_rows(log_post + np.log(np.maximum(prior, 1e-12))[None, :])


def confidence_map(probas: FloatArray, confidence: np.ndarray) -> FloatArray:
    """The rows ``probas`` (m, C) with the top class's probability replaced by
    ``confidence`` (m,) and the rest shared by the other classes in the verdict's own
    proportions (uniformly where the verdict gives them nothing). The confidence is raised to
    just above ``s / (1 + s)`` (s the largest other share) where needed, so no other class
    reaches the top one: each row keeps its label."""
    m, C = probas.shape
    rows = np.arange(m)
    top = probas.argmax(axis=1)
    rest = 1.0 - probas[rows, top]
    # the verdict's split of the remaining mass; a row at ~1 for its label has none to split
    share = np.where(
        rest[:, None] > 1e-12, probas / np.maximum(rest[:, None], 1e-300), 1.0 / max(C - 1, 1)
    )
    share[rows, top] = 0.0
    largest = share.max(axis=1)
    # 1e-9 above the tie, so the label is strict (a floor, affine, keeps it strict)
    kept = np.minimum(np.maximum(confidence, largest / (1.0 + largest) + 1e-9), 1.0)
    mapped = share * (1.0 - kept)[:, None]
    mapped[rows, top] = kept
    return mapped


def shrunk_correction(
    f_unlabelled: np.ndarray, f_control: np.ndarray, correct: np.ndarray
) -> float:
    """The control items' correction to the model's accuracy, shrunk toward none (the
    ``"splits-np"`` floor): ``w · mean_L (y − f)`` with ``w = τ² / (τ² + v)`` — the posterior
    mean of the model's bias b under a prior b ~ N(0, τ²) given the rectifier mean (y − f)
    ~ N(b, v) on the n control items (a normal-means shrinkage). ``v = mean_L f (1 − f) / n``
    is the rectifier's variance were the model right (each y a coin of probability f);
    ``τ = 1 − mean_U f``, the error the model itself predicts on the N non-control items: a
    prior that the model may be off by as much as the error it predicts, in either direction,
    and not more. Why shrink: the unbiased rectifier (λ = 1) moves by 1/n per wrong control
    item — 1/9 on wsd, where one wrong control item among 9 set ε to 0.2 and ECE to 0.11 in
    one seed — far more than the model's bias where the model fits; where the model is off
    by as much as the error it predicts the weight stays near 1/2 or more (temp at 5 labels
    per item, 23 control items: τ² ≈ 0.002, v ≈ 0.001). ``f_unlabelled`` (N,), ``f_control``
    and ``correct`` (n,): the model's probability of the verdict's class and whether that
    class is right."""
    n = correct.size
    rectifier = float(np.mean(correct - f_control))
    # v > 0 even when the model is sure of every control item: a rectifier from n items
    # is never known better than to one item in n² (1e-6 / n keeps the ratio finite)
    variance = max(float(np.mean(f_control * (1.0 - f_control))), 1e-6) / n
    spread = (1.0 - float(np.mean(f_unlabelled))) ** 2
    return spread / (spread + variance) * rectifier


def _splits_floor(
    mapped: FloatArray,
    f_unlabelled: np.ndarray,
    f_control: np.ndarray,
    correct: np.ndarray,
    shrink: bool = False,
) -> float:
    """The ``"splits"`` floor on top of the vote map (module docstring): classical
    prediction-powered accuracy ``Â = mean f_U + mean (y − f_L)`` (λ = 1) of the verdict on
    the non-control rows, and the ε that sets the mapped rows' (m, C) mean confidence to it
    (0 when the map is already at or below it: a floor only lowers confidence; mixing back
    toward the verdict's own rows to raise it was measured and made ECE worse, the verdict
    being overconfident exactly where the mix moves it). ``shrink`` (``"splits-np"``): the
    correction :func:`shrunk_correction` in place of ``mean (y − f_L)``."""
    if shrink:
        correction = shrunk_correction(f_unlabelled, f_control, correct)
    else:
        correction = float(np.mean(correct - f_control))
    accuracy = float(np.clip(f_unlabelled.mean() + correction, 0.0, 1.0))
    return _floor_for_accuracy(mapped, accuracy)


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
        and a dict: ``map`` ("floor"; "splits" for method ``"splits"``, whose report also
        has ``difficulty`` = (α, β)), ``method``, ``floor`` (ε applied), ``power`` (λ, method
        ``"answers"`` only), ``n_control``
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

    elif method == "difficulty":
        right, answered = _control_answers(data, items, truth)

        def fit(rows: np.ndarray) -> float:
            return _difficulty_floor(data, probas, ~known, right[rows], answered[rows])

    elif method == "answers":

        def fit(rows: np.ndarray) -> float:
            return _answers_floor(data, probas, ~known, held[rows], items[rows], truth[rows])[0]

        report["power"] = _answers_floor(data, probas, ~known, held, items, truth)[1]
    else:
        return _calibrate_on_splits(
            data, probas, known, (items, fold_of, held, truth), report, (generator, n_boot)
        )

    floor = fit(np.ones(items.size, dtype=bool))
    report["floor"] = floor
    report["cross_fitted"] = _scores(
        _cross_fitted(held, truth, fold_of, fit), truth, generator, n_boot
    )
    report["raw"] = _scores(held, truth, generator, n_boot)
    probas[~known] = apply_probability_floor(probas[~known], floor)
    return probas, report


def _calibrate_on_splits(
    data: LabelData,
    probas: FloatArray,
    known: np.ndarray,
    control: tuple[np.ndarray, np.ndarray, FloatArray, np.ndarray],
    report: dict[str, Any],
    scoring: tuple[np.random.Generator, int],
) -> tuple[FloatArray, dict[str, Any]]:
    """Steps 2–4 of :func:`calibrate_on_control` for methods ``"splits"`` and
    ``"splits-np"`` (module docstring): ``probas`` (n_items, C) of the fit knowing every
    control truth, ``known`` (n_items,) the control items, ``control`` = (items, fold_of,
    held, truth): the answered control items (n,), their folds (n,), held-out probabilities
    (n, C) and truth (n,); ``scoring`` the bootstrap's generator and resamples."""
    items, fold_of, held, truth = control
    votes = vote_counts(data)
    answered = np.flatnonzero(votes.sum(axis=1) > 0)
    row_of = {int(item): row for row, item in enumerate(answered.tolist())}
    on_rows = {row_of[int(i)]: int(t) for i, t in zip(items, truth, strict=True)}
    prior = probas.mean(axis=0)
    # both read no truth but through the fitted law: held out for every item
    nonparametric = report["method"] == "splits-np"
    if nonparametric:
        grid, weights = fit_vote_mixture(votes[answered], prior, on_rows)
        posterior = mixture_posterior(votes, grid, weights, prior)
        report["mixture"] = (grid.tolist(), weights.tolist())
    else:
        alpha, beta = fit_vote_difficulty(votes[answered], prior, on_rows)
        posterior = _vote_posterior(votes, alpha, beta)
        report["difficulty"] = (alpha, beta)
    unlabelled = ~known
    f_unlabelled = posterior[unlabelled, probas[unlabelled].argmax(axis=1)]
    mapped = confidence_map(probas[unlabelled], f_unlabelled)
    chosen = held.argmax(axis=1)
    f_control = posterior[items, chosen]
    correct = chosen == truth
    held_mapped = confidence_map(held, f_control)

    def fit(rows: np.ndarray) -> float:
        return _splits_floor(mapped, f_unlabelled, f_control[rows], correct[rows], nonparametric)

    floor = fit(np.ones(items.size, dtype=bool))
    report.update(map="splits", floor=floor)
    generator, n_boot = scoring
    crossed = np.empty_like(held)
    for fold in np.unique(fold_of):
        inside = fold_of == fold
        crossed[inside] = apply_probability_floor(held_mapped[inside], fit(~inside))
    report["cross_fitted"] = _scores(crossed, truth, generator, n_boot)
    report["raw"] = _scores(held, truth, generator, n_boot)
    probas[unlabelled] = apply_probability_floor(mapped, floor)
    return probas, report


__all__ = [
    "CALIBRATION_METHODS",
    "CONTROL_BOOTSTRAP",
    "CONTROL_FOLDS",
    "calibrate_on_control",
    "confidence_map",
    "fit_item_difficulty",
    "fit_vote_difficulty",
    "fit_vote_mixture",
    "held_out_probabilities",
    "mixture_posterior",
    "prediction_powered_accuracy",
    "shrunk_correction",
]
