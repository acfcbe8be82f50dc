"""Named workers on items of any number of classes K ≥ 2: a categorical belief q_i over each
item's true class, and per worker either one reliability (one-coin) or a confusion matrix.

Both posteriors keep the item beliefs and the worker beliefs as independent factors and update
them online, one label at a time: the item's categorical belief exactly (the worker integrated
out), the worker's belief by a projection of its exact one-label posterior — moment matching
(assumed-density filtering) for the one-coin Beta, as :mod:`crowdbudget.posteriors.one_coin`
does for two classes (Chen, Lin, Zhou 2013, §4), and the variational soft count for the
confusion rows (why, below).

**One-coin, "probability correct, else uniform"** (:class:`OneCoinCategoricalPosterior`).
Worker j has a reliability ρ_j ~ Beta(c_j, d_j) (default the paper's Beta(4, 1)) and

    P(label l | true class k, ρ) = ρ             if l = k,
                                   (1 − ρ)/(K−1)  otherwise.

Item i has a categorical belief q_i (its prior pseudo-counts normalised). After a label l from
worker j on item i the exact joint posterior is

    p(k, ρ | l) ∝ q_i(k) Beta(ρ; c, d) [ρ 1{k = l} + (1 − ρ)/(K−1) 1{k ≠ l}].

*Item.* The likelihood is linear in ρ and ρ is independent of k a priori, so integrating ρ
out replaces ρ by its mean μ = c/(c+d):

    q'_i(k) = q_i(k) L(k) / Z_l,   L(l) = μ,  L(k≠l) = (1 − μ)/(K−1),
    Z_l = q_i(l) μ + (1 − q_i(l)) (1 − μ)/(K−1)    (the predictive P(next label = l)).

So "update the item with the worker's expected reliability" and "integrate ρ exactly" are
the same thing here: the item marginal of the exact posterior is categorical and is kept
exactly (no approximation on the item side). Only the worker factor is projected.

*Worker.* The ρ-marginal is the two-component mixture w Beta(c+1, d) + (1−w) Beta(c, d+1) with
w = q_i(l) μ / Z_l, the posterior probability that the label was right. Its mean and variance
are, with n = c + d,

    m = (c + w)/(n + 1),
    v = w V₁ + (1−w) V₀ + w(1−w)/(n+1)²,
    V₁ = (c+1) d / ((n+1)²(n+2)),  V₀ = c (d+1) / ((n+1)²(n+2))

(law of total variance; the means of the two components differ by 1/(n+1)). The matched Beta
has c' + d' = s = m(1−m)/v − 1, c' = m s, d' = (1−m) s. The variance is summed from positive
terms instead of taken as E[ρ²] − m² (no cancellation for workers with thousands of labels);
any distribution on [0, 1] that is not two-point has v < m(1−m), so s > 0 (floored at 1e-9
as a guard). w = 1 gives Beta(c+1, d) and w = 0 gives Beta(c, d+1) exactly (conjugate counts).

With K = 2 this is a one-coin worker on a categorical item; it is not the binary
:class:`~crowdbudget.posteriors.one_coin.OneCoinPosterior`, whose item is a Beta soft label
θ_i (another item model); the binary policies keep using that one.

**Confusion matrix, Dawid–Skene** (:class:`ConfusionPosterior`). Worker j has a confusion
matrix whose rows π_j[k, :] ~ Dirichlet(α_jk) independently, P(label l | class k) = π_j[k, l].
The default prior (:func:`confusion_prior`) of a Beta(c, d) one-coin prior is α_kk = c(K−1)
on the diagonal and α_kl = d off it: the mean diagonal entry is c/(c+d), the one-coin prior's
mean (0.8 for Beta(4, 1)); with K = 2 each row *is* Beta(c, d) (the two-coin prior); with
K = 3 the Beta(4, 1) prior gives rows Dir(8, 1, 1).

*Item.* As above the likelihood is linear in each π_j[k, l], so the exact item marginal is

    q'_i(k) = q_i(k) E[π_j[k, l]] / Z_l,   E[π_j[k, l]] = α_jkl / Σ_m α_jkm,
    Z_l = Σ_k q_i(k) E[π_j[k, l]].

*Worker.* Given the true class k only row k sees the label, so the exact posterior of row k is
the mixture w_k Dir(α_k + e_l) + (1 − w_k) Dir(α_k) with w_k = q'_i(k), the other rows being
untouched given k. We keep a Dirichlet per row by the variational (mean-field) update of
Dawid–Skene, one label at a time: with the item's class distributed as q'_i, the row factor
that minimises KL(q(π) q'(k) ‖ p(π, k | l)) is Dir(α_k + w_k e_l), i.e. the soft count

    α_jkl ← α_jkl + w_k     (every row k; only column l moves).

It keeps the mean of each row within O(w_k(1 − w_k)/A_k²) of the exact mixture mean
(A_k = Σ α_k; the exact one is w_k (α_k + e_l)/(A_k + 1) + (1 − w_k) α_k/A_k), is exact
(conjugate) for w_k ∈ {0, 1}, and its concentration never decreases. We tried moment matching
first (the exact mean, and the concentration from the variance of entry l, as the one-coin
projection): a label with an uncertain class makes the matched concentration *smaller* (the
mixture is wider than either component), and a worker's rows for classes that are rarely the
truth received thousands of such small-w updates on ``adult`` and collapsed to concentrations
near 1e-16 (0/0 in the next match). The soft count has no such failure.

**Refit** (``refit(items, workers, labels)``; ours, not in the paper). The online update reads
each label once, with the worker belief of the moment it arrived: a worker whose first answers
land on fresh items is credited with w = μ per answer (for a fresh item q_i(l) = 1/K, so
Z_l = 1/K and w = μ), and the later labels of other workers on the same items move the items,
not that worker's belief — the lock-in a refit undoes. Chen, Lin, Zhou (2013, §4) approximate
the posterior of (items, workers) after each label by independent factors (their moment
matching); a refit recomputes the same kind of factorised posterior from *all* labels so far
by coordinate ascent on the mean-field objective (variational EM in the model above), in
``n_rounds`` (3) rounds:

- *items*, the workers fixed: restart every item from its prior and take its labels. With the
  workers fixed, the item update above is exact and is a product of the labels'
  likelihoods, q_i(k) ∝ q0_i(k) Π_labels L_j(l | k) (one-coin: L = μ_j if k = l, else
  (1 − μ_j)/(K−1); confusion: L = E[π_j[k, l]]), so the arrival order does not matter; it is
  computed in the log domain in one vectorised pass. An item without a label keeps its prior
  bit for bit.
- *workers*, the items fixed: prior + expected counts, with P(the label was right) = q_i(l)
  (the item's posterior, all its labels read):
  one-coin c_j = c0 + Σ_{j's labels} q_i(l), d_j = d0 + n_j − Σ q_i(l) (the binary refit of
  :mod:`crowdbudget.policies.worker_aware` with K classes); confusion
  α_jkl = α0_jkl + Σ_{j's labels l on items i} q_i(k) (Dawid–Skene's variational M-step, the
  soft count above summed over all labels at once).

The first round starts from the worker *prior* (``from_prior=True``, the default), so the
result is a function of the set of labels alone — neither their order nor the online beliefs
— and a lucky start cannot outlive the next refit. (The binary refit starts from the current
beliefs; here that keeps the lucky start of tests/test_multiclass_refit.py: three rounds from
"the first worker is right" converge to it.) A worker without labels stays at its prior
exactly (c0 + 0.0), which the policies use to score all such workers' pairs once per item.

Both posteriors: a label moves its own item and its own worker only, so two labels sharing
neither commute (``order="disjoint"`` of :func:`crowdbudget.testing.check_posterior`).
``lookahead(worker, items=...)`` gives, for the pairs (items[p], worker[p]), P(next label = l)
and the item's class probabilities after it (the :class:`~crowdbudget.posteriors.base.Lookahead`
contract), with the same formulas as :meth:`update`; worker None is a worker who never errs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget._validation import check_prior
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.posteriors.base import Lookahead, known_row
from crowdbudget.types import FloatArray, IntArray, LabelEvent

__all__ = [
    "ConfusionPosterior",
    "OneCoinCategoricalPosterior",
    "confusion_prior",
    "one_coin_categorical_update",
]

_S_FLOOR = 1e-9


def _item_prior(item_prior: ArrayLike, n_items: int) -> FloatArray:
    """The items' categorical beliefs q: the prior pseudo-counts, normalised per row."""
    arr = np.asarray(item_prior, dtype=float)
    if arr.ndim not in (1, 2) or arr.shape[-1] < 2:
        raise InvalidParameterError(
            f"item_prior must have shape (n_classes,) or (n_items, n_classes), got {arr.shape}"
        )
    counts = check_prior(arr, n_items, arr.shape[-1])
    return np.asarray(counts / counts.sum(axis=1, keepdims=True), dtype=float)


def _check_label(label: int, n_classes: int) -> None:
    if not (isinstance(label, int | np.integer) and 0 <= label < n_classes):
        raise InvalidParameterError(f"labels are 0..{n_classes - 1}, got {label!r}")


def _check_log(
    items: ArrayLike, workers: ArrayLike, labels: ArrayLike, n_classes: int
) -> tuple[IntArray, IntArray, IntArray]:
    """The label log of a refit as three aligned int64 arrays (labels checked)."""
    i, j, lab = (np.asarray(x, dtype=np.int64).ravel() for x in (items, workers, labels))
    if not (i.shape == j.shape == lab.shape):
        raise InvalidParameterError("items, workers and labels must have the same length")
    if lab.shape[0] and (lab.min() < 0 or lab.max() >= n_classes):
        raise InvalidParameterError(f"labels are 0..{n_classes - 1}")
    return i, j, lab


def _items_from_log_likelihood(q0: FloatArray, extra: FloatArray, items: IntArray) -> FloatArray:
    """q_i ∝ q0_i · exp(extra_i) row-wise (in the log domain, no underflow); the items that
    have no label keep q0 bit for bit (they are "at the prior" for the policies' sharing)."""
    logq = np.log(q0) + extra
    logq -= logq.max(axis=1, keepdims=True)
    q = np.exp(logq)
    q /= q.sum(axis=1, keepdims=True)
    unlabeled = np.bincount(items, minlength=q0.shape[0]) == 0
    q[unlabeled] = q0[unlabeled]
    return np.asarray(q, dtype=float)


def _perfect_lookahead(q: FloatArray) -> Lookahead:
    """A worker who never errs: label l with probability q(l), after which the class is l."""
    k, n_classes = q.shape
    after = np.broadcast_to(np.eye(n_classes), (k, n_classes, n_classes)).copy()
    return Lookahead(q.copy(), after, np.zeros((k, n_classes)))


def _beta_mixture_match(
    c: FloatArray | float, d: FloatArray | float, w: FloatArray | float
) -> tuple[FloatArray, FloatArray]:
    """The Beta matching the mean and variance of w·Beta(c+1, d) + (1−w)·Beta(c, d+1)
    (module docstring): ``(c', d')``, elementwise."""
    c, d, w = (np.asarray(x, dtype=float) for x in (c, d, w))
    n1 = c + d + 1.0
    m = (c + w) / n1
    v = (w * (c + 1.0) * d + (1.0 - w) * c * (d + 1.0)) / (n1 * n1 * (n1 + 1.0))
    v = v + w * (1.0 - w) / (n1 * n1)
    s = np.maximum(m * (1.0 - m) / v - 1.0, _S_FLOOR)
    return m * s, (1.0 - m) * s


def one_coin_categorical_update(
    q: ArrayLike, c: ArrayLike, d: ArrayLike, label: ArrayLike
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """One label l from a one-coin worker Beta(c, d) on items with beliefs ``q``, row-wise.

    Args:
        q: item class probabilities, shape (n, K) (or (K,)).
        c, d: worker Beta parameters, shape (n,) or scalars.
        label: the labels, shape (n,) or a scalar.

    Returns:
        ``(q', c', d', z)``: the exact item posterior, the moment-matched worker Beta and the
        predictive probability z = P(label | q, c, d) (module docstring).
    """
    q = np.asarray(q, dtype=float)
    single = q.ndim == 1
    q2 = np.atleast_2d(q)
    n, n_classes = q2.shape
    c_arr = np.broadcast_to(np.asarray(c, dtype=float), (n,))
    d_arr = np.broadcast_to(np.asarray(d, dtype=float), (n,))
    lab = np.broadcast_to(np.asarray(label, dtype=np.int64), (n,))
    mu = c_arr / (c_arr + d_arr)
    off = (1.0 - mu) / (n_classes - 1)
    ql = q2[np.arange(n), lab]
    right = ql * mu
    z = right + (1.0 - ql) * off
    after = q2 * off[:, None]
    after[np.arange(n), lab] = right
    after /= after.sum(axis=1, keepdims=True)
    nc, nd = _beta_mixture_match(c_arr, d_arr, right / z)
    if single:
        return after[0], nc[0], nd[0], z[0]
    return after, nc, nd, z


def _one_coin_after(q: FloatArray, mu: FloatArray) -> tuple[FloatArray, FloatArray]:
    """For items ``q`` (n, K) and worker means ``mu`` (n,): P(label l), shape (n, K), and the
    item beliefs after each label, shape (n, K (label), K (class)) — row l of the second is
    what :meth:`OneCoinCategoricalPosterior.update` gives for a label l."""
    n_classes = q.shape[1]
    off = (1.0 - mu) / (n_classes - 1)
    base = q * off[:, None]  # q(k) (1 − μ)/(K−1): the class k ≠ l entries
    after = np.repeat(base[:, None, :], n_classes, axis=1)
    diag = np.arange(n_classes)
    after[:, diag, diag] = q * mu[:, None]
    after /= after.sum(axis=2, keepdims=True)
    right = q * mu[:, None]
    p = right + (1.0 - q) * off[:, None]
    return p / p.sum(axis=1, keepdims=True), after


#: numpy sums a row of fewer than 8 entries left to right (its pairwise summation unrolls
#: blocks of 8 only from 8 entries on); :func:`_one_coin_best_after` relies on it for K < 8
_SEQUENTIAL_SUM_BELOW = 8


def _one_coin_best_after(q: FloatArray, mu: FloatArray) -> FloatArray:
    """max_k q'_l(k) for each label l, shape (n, K) — the same numbers, bit for bit, as
    ``_one_coin_after(q, mu)[1].max(axis=2)``, without the (n, K, K) array.

    Args:
        q: item beliefs, shape (n, K) with K < 8; mu: worker means, shape (n,).

    Why bit for bit: after label l the unnormalised row is u_l(k) = q(k)(1 − μ)/(K−1) for
    k ≠ l and q(l)μ for k = l, exactly the entries :func:`_one_coin_after` builds; its
    normaliser S_l = Σ_k u_l(k) is summed here left to right, the order numpy uses for a row
    of K < 8 entries (checked in tests/test_multiclass_refit.py); and since rounding is
    monotone, max_k fl(u_l(k)/S_l) = fl(max_k u_l(k) / S_l) for S_l > 0.
    """
    n_classes = q.shape[1]
    off = (1.0 - mu) / (n_classes - 1)
    base = q * off[:, None]
    right = q * mu[:, None]
    best = np.empty_like(q)
    for label in range(n_classes):
        row = [right[:, k] if k == label else base[:, k] for k in range(n_classes)]
        total = row[0].copy()
        top = row[0].copy()
        for k in range(1, n_classes):
            total += row[k]
            np.maximum(top, row[k], out=top)
        best[:, label] = top / total
    return best


class _CategoricalItemBeliefs:
    """The item side shared by the categorical worker posteriors
    (:class:`OneCoinCategoricalPosterior`, :class:`ConfusionPosterior`): the beliefs ``q``
    and their prior ``_q0``, shape (n_items, n_classes), read as final labels and confidence;
    control answers (an item of known class has fixed beliefs, so every label on it updates
    its worker as a definite right or wrong answer). The host class has ``n_classes`` and
    ``update``."""

    q: FloatArray
    _q0: FloatArray
    n_classes: int
    update: Callable[[LabelEvent], None]

    def know(self, item: int, truth: int) -> None:
        """Item ``item`` is known to be of class ``truth`` (a control item): its beliefs,
        and its prior for a refit, become :func:`~crowdbudget.posteriors.base.known_row`, so
        every label on it updates its worker as a definite right or wrong answer (a refit
        too)."""
        _check_label(truth, self.n_classes)
        self.q[item] = self._q0[item] = known_row(truth, self.n_classes)

    def update_known(self, event: LabelEvent, truth: int) -> None:
        """A label of known truth (a control answer): :meth:`know`, then :meth:`update`."""
        self.know(event.item, truth)
        self.update(event)

    def class_probabilities(self) -> FloatArray:
        """q, shape (n_items, K) (a copy)."""
        return self.q.copy()

    def predict(self) -> IntArray:
        """The most probable class (first on ties), shape (n_items,)."""
        return np.argmax(self.q, axis=1).astype(np.int64)

    def confidence(self) -> FloatArray:
        """max_k q_i(k): the probability that the predicted class is right, shape (n_items,)."""
        return np.asarray(self.q.max(axis=1), dtype=float)


class OneCoinCategoricalPosterior(_CategoricalItemBeliefs):
    """Categorical item beliefs and one-coin worker Betas, any K ≥ 2 (module docstring).

    Args:
        item_prior: pseudo-counts, shape (K,) or (n_items, K), normalised into q.
        worker_prior: shape (2,) or (n_workers, 2), columns (d, c) — pseudo-counts of wrong
            and right answers, as :class:`~crowdbudget.posteriors.one_coin.OneCoinPosterior`;
            (1, 4) is the paper's Beta(4, 1).
        n_items, n_workers: sizes.

    Attributes:
        q: item class probabilities, shape (n_items, K); c, d: worker Beta parameters,
            shape (n_workers,).
    """

    def __init__(
        self, item_prior: ArrayLike, worker_prior: ArrayLike, n_items: int, n_workers: int
    ) -> None:
        self.q: FloatArray = _item_prior(item_prior, n_items)
        workers = check_prior(worker_prior, n_workers, 2)
        self.n_items = n_items
        self.n_workers = n_workers
        self.n_classes = int(self.q.shape[1])
        self.c: FloatArray = workers[:, 1].copy()
        self.d: FloatArray = workers[:, 0].copy()
        # the priors, for refit
        self._q0: FloatArray = self.q.copy()
        self._c0: FloatArray = self.c.copy()
        self._d0: FloatArray = self.d.copy()

    def update(self, event: LabelEvent) -> None:
        """Exact item update and moment-matched worker update (module docstring)."""
        _check_label(event.label, self.n_classes)
        i, j = event.item, event.worker
        q, c, d, _ = one_coin_categorical_update(self.q[i], self.c[j], self.d[j], event.label)
        self.q[i], self.c[j], self.d[j] = q, c, d

    def refit(
        self,
        items: ArrayLike,
        workers: ArrayLike,
        labels: ArrayLike,
        n_rounds: int = 3,
        from_prior: bool = True,
    ) -> None:
        """Re-read all labels (items, workers, labels aligned, arrival order): ``n_rounds``
        rounds of (items: the prior times each label's likelihood with the workers fixed;
        workers: prior + expected right answers), the first round's workers at their prior
        (``from_prior``) or at the current beliefs — module docstring, "Refit"."""
        i, j, lab = _check_log(items, workers, labels, self.n_classes)
        answered = np.bincount(j, minlength=self.n_workers).astype(float)
        if from_prior:
            self.c, self.d = self._c0.copy(), self._d0.copy()
        for _ in range(n_rounds):
            mu = self.c / (self.c + self.d)
            log_right = np.log(mu)
            log_wrong = np.log((1.0 - mu) / (self.n_classes - 1))
            # log q_i(k) = log q0_i(k) + Σ_labels [log((1 − μ_j)/(K−1)) + 1{k = l} log-ratio]
            extra = np.zeros((self.n_items, self.n_classes))
            extra += np.bincount(i, weights=log_wrong[j], minlength=self.n_items)[:, None]
            flat = np.bincount(
                i * self.n_classes + lab,
                weights=(log_right - log_wrong)[j],
                minlength=self.n_items * self.n_classes,
            )
            extra += flat.reshape(self.n_items, self.n_classes)
            self.q = _items_from_log_likelihood(self._q0, extra, i)
            right = np.bincount(j, weights=self.q[i, lab], minlength=self.n_workers)
            self.c = np.asarray(self._c0 + right, dtype=float)
            self.d = np.asarray(self._d0 + (answered - right), dtype=float)

    def lookahead(
        self, worker: int | IntArray | None = None, items: IntArray | None = None
    ) -> Lookahead:
        """P(next label) and the item's class probabilities after it, for the pairs
        (items[p], worker[p]) (worker: an index, an array aligned with ``items``, or None —
        a worker who never errs); items default to all, in order."""
        q = self.q if items is None else self.q[items]
        if worker is None:
            return _perfect_lookahead(q)
        c, d = self.c[worker], self.d[worker]
        mu = np.broadcast_to(np.asarray(c / (c + d), dtype=float), (q.shape[0],))
        p, after = _one_coin_after(q, mu)
        return Lookahead(p, after)

    def best_after(self, worker: IntArray, items: IntArray) -> FloatArray:
        """For the pairs (items[p], worker[p]): max_k of the item's class probabilities after
        each label l, shape (n_pairs, K) — ``lookahead(worker, items).class_probabilities
        .max(axis=-1)`` bit for bit, in O(n K²) time without the (n, K, K) array when K < 8
        (:func:`_one_coin_best_after`; the Opt-KG rewards need nothing else)."""
        if self.n_classes >= _SEQUENTIAL_SUM_BELOW:
            return np.asarray(
                self.lookahead(worker, items=items).class_probabilities.max(axis=-1), dtype=float
            )
        c, d = self.c[worker], self.d[worker]
        return _one_coin_best_after(self.q[items], np.asarray(c / (c + d), dtype=float))

    def worker_reliability(self) -> FloatArray:
        """Posterior mean of ρ_j, shape (n_workers,)."""
        return np.asarray(self.c / (self.c + self.d), dtype=float)


def confusion_prior(n_classes: int, c: float = 4.0, d: float = 1.0) -> FloatArray:
    """The Dirichlet prior of a confusion matrix matching a Beta(c, d) one-coin prior:
    c(K−1) on the diagonal, d off it, shape (K, K) (module docstring)."""
    if n_classes < 2:
        raise InvalidParameterError(f"n_classes must be at least 2, got {n_classes}")
    if not (c > 0 and d > 0):
        raise InvalidParameterError(f"the worker prior must be two numbers > 0, got {(c, d)}")
    alpha = np.full((n_classes, n_classes), float(d))
    np.fill_diagonal(alpha, float(c) * (n_classes - 1))
    return alpha


def _soft_count(alpha: FloatArray, label: int, w: FloatArray) -> FloatArray:
    """Rows α (K, K) of one confusion matrix after a label l, row k seen with weight w_k:
    ``α_kl + w_k`` (the variational update, module docstring)."""
    out = alpha.copy()
    out[:, label] += w
    return out


class ConfusionPosterior(_CategoricalItemBeliefs):
    """Categorical item beliefs and a Dirichlet confusion matrix per worker (module
    docstring), any K ≥ 2.

    Args:
        item_prior: pseudo-counts, shape (K,) or (n_items, K), normalised into q.
        worker_prior: Dirichlet parameters of the rows, shape (K, K) or (n_workers, K, K)
            (row k: the labels of a worker when the truth is k); default
            :func:`confusion_prior` of the paper's Beta(4, 1).
        n_items, n_workers: sizes.

    Attributes:
        q: shape (n_items, K); alpha: shape (n_workers, K, K).
    """

    def __init__(
        self,
        item_prior: ArrayLike,
        n_items: int,
        n_workers: int,
        worker_prior: ArrayLike | None = None,
    ) -> None:
        self.q: FloatArray = _item_prior(item_prior, n_items)
        n_classes = int(self.q.shape[1])
        prior = confusion_prior(n_classes) if worker_prior is None else worker_prior
        arr = np.asarray(prior, dtype=float)
        if arr.shape not in ((n_classes, n_classes), (n_workers, n_classes, n_classes)):
            raise InvalidParameterError(
                f"worker_prior must have shape ({n_classes}, {n_classes}) or "
                f"({n_workers}, {n_classes}, {n_classes}), got {arr.shape}"
            )
        if not (np.all(np.isfinite(arr)) and np.all(arr > 0)):
            raise InvalidParameterError("worker_prior entries must be finite and > 0")
        self.n_items = n_items
        self.n_workers = n_workers
        self.n_classes = n_classes
        self.alpha: FloatArray = np.broadcast_to(arr, (n_workers, n_classes, n_classes)).copy()
        self._mean: FloatArray = self.alpha / self.alpha.sum(axis=2, keepdims=True)
        # the priors, for refit
        self._q0: FloatArray = self.q.copy()
        self._alpha0: FloatArray = self.alpha.copy()

    def update(self, event: LabelEvent) -> None:
        """Exact item update, soft-count rows of the worker (module docstring)."""
        _check_label(event.label, self.n_classes)
        i, j, label = event.item, event.worker, int(event.label)
        unnorm = self.q[i] * self._mean[j, :, label]
        after = unnorm / unnorm.sum()
        self.alpha[j] = _soft_count(self.alpha[j], label, after)
        self._mean[j] = self.alpha[j] / self.alpha[j].sum(axis=1, keepdims=True)
        self.q[i] = after

    def refit(
        self,
        items: ArrayLike,
        workers: ArrayLike,
        labels: ArrayLike,
        n_rounds: int = 3,
        from_prior: bool = True,
    ) -> None:
        """Re-read all labels: ``n_rounds`` rounds of (items: the prior times each label's
        likelihood E[π_j[k, l]] with the workers fixed; workers: prior + expected counts, row k
        column l += q_i(k)), the first round's workers at their prior (``from_prior``) or at
        the current beliefs — module docstring, "Refit"."""
        i, j, lab = _check_log(items, workers, labels, self.n_classes)
        n_classes = self.n_classes
        cell = j * n_classes + lab  # (worker, column l) of each label
        if from_prior:
            self.alpha = self._alpha0.copy()
            self._mean = self.alpha / self.alpha.sum(axis=2, keepdims=True)
        for _ in range(n_rounds):
            log_mean = np.log(self._mean)  # (m, K (true class), K (label))
            like = log_mean[j, :, lab]  # (n, K): log E[π_j[k, l]] for every class k
            extra = np.empty((self.n_items, n_classes))
            for k in range(n_classes):
                extra[:, k] = np.bincount(i, weights=like[:, k], minlength=self.n_items)
            self.q = _items_from_log_likelihood(self._q0, extra, i)
            alpha = self._alpha0.copy()
            for k in range(n_classes):
                counts = np.bincount(
                    cell, weights=self.q[i, k], minlength=self.n_workers * n_classes
                )
                alpha[:, k, :] += counts.reshape(self.n_workers, n_classes)
            self.alpha = alpha
            self._mean = alpha / alpha.sum(axis=2, keepdims=True)

    def lookahead(
        self, worker: int | IntArray | None = None, items: IntArray | None = None
    ) -> Lookahead:
        """As :meth:`OneCoinCategoricalPosterior.lookahead`, with P(label l | class k) the
        mean confusion entry E[π_j[k, l]]."""
        q = self.q if items is None else self.q[items]
        if worker is None:
            return _perfect_lookahead(q)
        n = q.shape[0]
        mean = np.broadcast_to(self._mean[worker], (n, self.n_classes, self.n_classes))
        # unnorm[p, l, k] = q[p, k] E[π[k, l]]
        unnorm = q[:, None, :] * np.swapaxes(mean, 1, 2)
        z = unnorm.sum(axis=2)
        return Lookahead(z / z.sum(axis=1, keepdims=True), unnorm / z[:, :, None])

    def confusion_matrices(self) -> FloatArray:
        """Posterior mean confusion matrices E[π_j], shape (n_workers, K, K), rows sum to 1."""
        return self._mean.copy()

    def worker_reliability(self) -> FloatArray:
        """Mean diagonal of E[π_j] (a one-coin summary), shape (n_workers,)."""
        return np.asarray(np.diagonal(self._mean, axis1=1, axis2=2).mean(axis=1), dtype=float)
