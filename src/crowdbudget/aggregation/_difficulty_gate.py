"""The evidence's gate of :mod:`~crowdbudget.aggregation.item_difficulty` (its module
docstring, "Gate", holds the derivation): EM over the difficulty mixture's ``π``, ``ρ`` and
``H`` with the workers frozen (then re-fitted once), whose best label log-likelihood gain
``G`` over the workers' model alone is a lower bound on what the mixture family attains; and
the pieces of the mixture that the gate and the full fit share (the hard confusion's bounds
and prior, row-wise sums and maxima)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from crowdbudget.aggregation import _difficulty_kernel
from crowdbudget.aggregation.base import FloatArray
from crowdbudget.aggregation.worker_asymmetry import worker_model
from crowdbudget.datasets.loaders import LabelData

#: the gate's start: this share of the items' vote disagreement as the hard share
#: (:mod:`.item_difficulty`, "Gate")
START_SHARE = 0.1

#: whether the gate's E-step runs compiled (:mod:`._difficulty_kernel`; False: the NumPy
#: step, which the tests compare it with)
COMPILED_GATE = True

#: the gate's re-fits of the workers after the frozen workers' EM (:mod:`.item_difficulty`, "Gate")
GATE_REFITS = 1


def row_max(x: FloatArray) -> FloatArray:
    """``x.max(axis=1)`` of an (N, K) array with few columns, column by column (NumPy's
    reduction over a short last axis costs several times more)."""
    out = np.array(x[:, 0], dtype=float)
    for k in range(1, x.shape[1]):
        np.maximum(out, x[:, k], out=out)
    return out


def row_sums(x: FloatArray) -> FloatArray:
    """``x.sum(axis=1)`` as a product with ones (as :mod:`.worker_asymmetry` does)."""
    return np.asarray(x @ np.ones(x.shape[1]))


def bounded_confusion(alpha: FloatArray, easy_rate: FloatArray) -> FloatArray:
    """The hard items' confusion ``H`` (C, C): the posterior mean ``α / Σ_l α`` of the
    Dirichlet rows ``alpha`` (C, C), each row's diagonal kept at least its largest other
    entry (and 1/C) and at most halfway between chance (1/C) and the crowd's agreement rate
    on easy items of that class ``easy_rate`` (C,), the rest of the row scaled to fill it
    (:mod:`.item_difficulty`, "Bounds")."""
    C = alpha.shape[0]
    mean = alpha / alpha.sum(axis=1, keepdims=True)  # alpha >= η > 0
    diagonal = np.diagonal(mean)
    # the plurality bound: the diagonal d' at which the row's largest other entry m, scaled
    # by (1 − d') / (1 − d), equals it: d' = m / (1 − d + m) (<= d when d >= m already)
    largest = np.max(np.where(np.eye(C, dtype=bool), 0.0, mean), axis=1)
    low = np.maximum(largest / (1.0 - diagonal + largest), 1.0 / C)
    # "hard": at most halfway between chance and the easy items' agreement rate
    high = np.maximum((1.0 / C + np.minimum(easy_rate, 1.0)) / 2.0, low)
    bounded = np.clip(diagonal, low, high)  # < 1: the off-diagonal keeps some mass
    # off the diagonal: scaled by (1 − new diagonal) / (1 − old diagonal); the old diagonal
    # is < 1 because every alpha entry is >= η > 0
    scale = (1.0 - bounded) / (1.0 - diagonal)
    out = mean * scale[:, None]
    out[np.arange(C), np.arange(C)] = bounded
    return np.asarray(out)


def log_easy(data: LabelData, errors: FloatArray) -> FloatArray:
    """``Σ_labels of i log e_jcl`` (N, C) for workers' confusions ``errors`` (J, C, C): one
    weighted count per class (dense: a few classes, no sparse structure to build)."""
    N, C = data.n_items, data.n_classes
    per_label = np.log(np.maximum(errors, 1e-300))[data.workers, :, data.labels]  # (K, C)
    out = np.empty((N, C))
    for c in range(C):
        out[:, c] = np.bincount(data.items, weights=per_label[:, c], minlength=N)
    return out


@dataclass
class FrozenMixture:
    """The frozen mixture's state (:func:`frozen_mixture`): ``π`` (C,), ``ρ``, ``H`` (C, C),
    the last M-step's easy responsibilities ``E`` (N, C), the best gain so far, and the last
    E-step's ``q(z_i = c, h_i = h)`` (N, 2C) (columns as the mixture's ``R``; None before
    the first)."""

    pi: FloatArray
    rho: float
    hard: FloatArray
    easy: FloatArray
    best: float = 0.0
    responsibilities: FloatArray | None = None


def frozen_mixture(
    data: LabelData,
    fitted: dict[str, Any],
    partnered: np.ndarray,
    T: FloatArray,
    stop_above: float,
    asymmetry: str = "evidence",
    refits: int | None = None,
    start_share: float = START_SHARE,
) -> FrozenMixture:
    """The gate's statistic ``G`` (:mod:`.item_difficulty`, "Gate"): the largest label
    log-likelihood gain over ``bds-ev``'s fit ``fitted`` (``priors_`` (C,), ``errors_`` (J, C, C),
    ``confusion_prior_`` (C, C), ``symmetric_share_``) that a mixture reaches by EM over
    ``π``, ``ρ`` and ``H`` with the workers *frozen* at ``bds-ev``'s, then after each of
    ``refits`` (default :data:`GATE_REFITS`) re-fits of the workers (``asymmetry``) on the
    easy responsibilities; >= 0 (ρ → 0 is ``bds-ev``). Start: ``H`` from one M-step on
    ``bds-ev``'s class posterior ``T`` (N, C) split by the items' vote disagreement (the
    mixture's own start), a ``start_share`` of that split as ``ρ``'s. ``partnered``
    (n_labels,) marks the labels that feed ``H`` and the workers' counts. Returns as soon as
    the gain exceeds ``stop_above`` (the full fit decides then); the state reached, ``G`` its
    ``best``."""
    N, C, J = data.n_items, data.n_classes, data.n_workers
    frozen = log_easy(data, fitted["errors_"])
    cells = data.items * C + data.labels
    votes = np.bincount(cells, minlength=N * C).reshape(N, C).astype(float)
    weights = partnered.astype(float)
    checked = np.asarray(np.bincount(cells, weights, N * C), dtype=np.float64).reshape(N, C)
    # bds-ev's Σ_i log Σ_c π̄_c A_ic (label_log_likelihood's, max-shifted: every exp <= 1)
    scores = frozen + np.log(np.maximum(fitted["priors_"], 1e-300))
    top = row_max(scores)
    base = float(np.sum(np.log(row_sums(np.exp(scores - top[:, None]))) + top))
    # the vote shares' disagreement (an item without labels splits nothing)
    shares = votes / np.maximum(row_sums(votes), 1.0)[:, None]
    split = np.clip((1.0 - row_max(shares)) * (C / max(C - 1, 1)), 0.0, 1.0)[:, None]
    gate = FrozenMixture(
        pi=(1.0 + T.sum(axis=0)) / (C + N),
        rho=(1.0 + start_share * float(np.sum(T * split))) / (2.0 + N),
        hard=_hard_step((T * (1.0 - split)).T @ checked, (T * split).T @ checked),
        easy=T,
    )
    share = float(fitted["symmetric_share_"])
    for refit in range((GATE_REFITS if refits is None else refits) + 1):
        if refit:
            # the workers re-fitted on the easy responsibilities, as the mixture's M-step
            flat = data.workers * (C * C) + data.labels
            counts = np.zeros(J * C * C)
            for c in range(C):
                easy_c = gate.easy[data.items, c] * weights
                counts += np.bincount(flat + c * C, weights=easy_c, minlength=J * C * C)
            prior = fitted["confusion_prior_"]
            workers = worker_model(counts.reshape(J, C, C), prior, asymmetry, share, True)
            assert workers.errors is not None  # means=True
            share = workers.share
            frozen = log_easy(data, workers.errors)
        _frozen_em(gate, frozen, votes, checked, base, stop_above)
        if gate.best > stop_above:
            break
    return gate


def _hard_step(easy_checked: FloatArray, hard_checked: FloatArray) -> FloatArray:
    """``H`` (C, C) within its bounds from the checked votes (C, C) ``[c, l]`` under the easy
    and the hard responsibilities, ``Eᵀ checked`` and ``Dᵀ checked`` (the mixture's
    M-step)."""
    crowd = easy_checked  # [c, l]: the easy labels' confusion
    easy_rate = np.diagonal(crowd) / np.maximum(crowd.sum(axis=1), 1e-300)
    return bounded_confusion(hard_prior(crowd.shape[0]) + hard_checked, easy_rate)


def _frozen_em(
    gate: FrozenMixture,
    log_easy: FloatArray,
    votes: FloatArray,
    checked: FloatArray,
    base: float,
    stop_above: float,
    n_steps: int = 60,
) -> None:
    """EM over ``gate``'s ``π``, ``ρ``, ``H`` with the workers' ``log_easy`` (N, C) fixed,
    updating ``gate`` in place. Stops after ``n_steps`` steps, when a step gains less than
    1e-3 nats, when the gain exceeds ``stop_above``, or when the gains shrink geometrically
    (ratio q < 1) towards a limit ``value + gain · q / (1 − q)`` below 0."""
    N, C = log_easy.shape
    last, step = -np.inf, np.nan
    for _ in range(n_steps):
        # E-step: the labels' log-likelihood and q(z, h) under (π, ρ, H), with the sums the
        # M-step reads
        log_pi = np.log(gate.pi)
        offsets = (log_pi + np.log1p(-gate.rho), log_pi + np.log(gate.rho))
        if COMPILED_GATE:
            R = np.empty((N, 2 * C))
            total_value, sums, easy_checked, hard_checked = _difficulty_kernel.frozen_e_step(
                log_easy, votes, checked, np.log(gate.hard), *offsets, R
            )
        else:
            total_value, R = _frozen_e_step(log_easy, votes, np.log(gate.hard), offsets)
            sums = R.sum(axis=0)
            easy_checked, hard_checked = R[:, :C].T @ checked, R[:, C:].T @ checked
        value = float(total_value) - base
        gate.responsibilities = R
        gate.best = max(gate.best, value)
        gained = value - last
        if gate.best > stop_above or gained < 1e-3:
            return
        ratio = gained / step  # nan until two steps have gained
        if ratio < 1.0 and value + gained * ratio / (1.0 - ratio) < 0.0:
            return
        step = gained if np.isfinite(last) else np.nan
        last = value
        # M-step: ρ and π as the mixture's posterior means, H within its bounds
        gate.rho = (1.0 + float(sums[C:].sum())) / (2.0 + N)
        gate.pi = (1.0 + sums[:C] + sums[C:]) / (C + N)
        gate.hard = _hard_step(easy_checked, hard_checked)
        gate.easy = R[:, :C]


def _frozen_e_step(
    log_easy: FloatArray,
    votes: FloatArray,
    hard_log: FloatArray,
    offsets: tuple[FloatArray, FloatArray],
) -> tuple[float, FloatArray]:
    """The frozen mixture's E-step in NumPy (the compiled one's reference): the labels'
    log-likelihood and the normalised ``q(z, h)`` (N, 2C)."""
    N, C = log_easy.shape
    scores = np.empty((N, 2 * C))
    scores[:, :C] = log_easy + offsets[0]
    scores[:, C:] = votes @ hard_log.T + offsets[1]
    top = row_max(scores)
    scores -= top[:, None]
    R = np.exp(scores)  # every entry <= 1 (the max subtracted)
    total = row_sums(R)
    R /= total[:, None]
    return float(np.sum(np.log(total) + top)), R


def hard_prior(C: int) -> FloatArray:
    """``η`` (C, C): 2 on the diagonal, 1 elsewhere (:mod:`.item_difficulty`)."""
    return np.where(np.eye(C, dtype=bool), 2.0, 1.0)
