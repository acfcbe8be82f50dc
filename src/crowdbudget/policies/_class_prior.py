"""The class prior the binary worker-aware allocation learns (``class_prior="gated"``).

The item prior of :class:`~crowdbudget.policies.worker_aware.OneCoinKnowledgeGradient` is the
problem's (Beta(1, 1): uniform classes). On an imbalanced crowd whose per-label odds
``a / (1 − a)`` are below the class odds ``π / (1 − π)`` a lone label cannot change the Bayes
decision, and an allocation that believes the classes uniform spends the budget labelling
every item once (docs/stress-bed.md, "Why the one-label rows miss"). The rule here learns the
class share and the crowd's accuracy from the labels and gives every item a class prior
*only* where the evidence says a lone label cannot decide.

**The estimate** (:func:`share_and_accuracy`). A discrete Dawid–Skene model with two
classes fitted by EM on every label so far: items of class 1 with probability π; worker j
says 1 on a class-1 item with probability s_j (sensitivity) and 0 on a class-0 item with
probability t_j (specificity), each MAP under Beta(c0, d0) (the policy's worker prior), π
under Beta(1, 1); an item's posterior log-odds are ``logit π`` plus, per label, ``log(s_j /
(1 − t_j))`` for a 1 and ``log((1 − s_j) / t_j)`` for a 0. It is fitted from the labels
alone — not from the allocation's item beliefs, which the previous prior already pulled toward
the common class (the estimate would feed on itself). Per worker and two-coin: the allocation
asks the workers it believes reliable, so one crowd accuracy reads the share from whoever it
asked most, and a one-coin worker cannot express one who answers one class always. With one
label per item the share and the accuracy are not separately identified (only the share of
labels 1 is); the worker prior then decides, and items with two or more labels pin the
accuracy as they arrive.

**The gate** (:func:`gated_class_prior`). With ``|logit π| > logit a`` (a lone label cannot
overturn the common class) every item's prior becomes the Beta of total 2 whose
P(θ ≥ ½) is π (:func:`beta_for_share`), else it stays Beta(1, 1). The accuracy the gate
reads is a low quantile (:data:`GATE_QUANTILE`) of its posterior from the worker prior and
the labels of items with two or more labels, so the gate opens while the labels cannot yet
say how often a label is right (one label per item: the worker prior alone, Beta(16, 4),
whose 10 % quantile 0.68 makes every crowd with a class share beyond 0.32 look undecidable
by one label), the allocation then buys second labels where a first one said the rarer
class, and those pairs close the gate again on a crowd whose lone labels do decide. The
share it reads is its credible bound on the side of ½ at the same level (a few labels that
happen to agree do not open it). On crowds whose errors depend on the class (two-coin,
biased workers) the one-coin item model with a skewed prior mis-reads the workers — a
worker answering the common class always looks reliable, gets asked, and the labels bought
say the common class — so the prior is given only where it changes what a first label is
worth, and a share that runs away after the gate opened locks it shut (:class:`GateMemory`).

**The first-label check** (``class-prior=gated-checked``: the gate of ``gated-runaway16``
with ``check``; an option). In pull mode (the arriving worker is given) the share need not
run away, so the runaway lock need not fire, and a crowd whose workers lean to one class
can hold the gate open all campaign at a share the crowd's lean made up (trec: gold 0.56
class 1, the gate's share about 0.8; docs/stress-bed.md, "trec in pull"). The check
derived for it, and what was tried:

- *Pairs cannot tell a leaning crowd from an imbalanced one.* Given the first label, a
  second is drawn from the model whatever made the allocation buy it, so the agreement of
  (first, second) pairs given the first label is a valid check under value-selected
  partners. But for exchangeable labels a pair's law is a symmetric 2 × 2 table — two
  numbers — while a crowd of leaning workers has three (π, s, t): every balanced leaning
  crowd has a symmetric imbalanced twin with the same pair law (trec's pull pairs, first
  labels 1 on 0.65–0.66 and P(second 0 | first 0) 0.35–0.38, are those of a share of
  0.90–0.99 at accuracy 0.66–0.70). Measured on trec's pull campaigns that check stays
  within −1.9 … +1.0 standard errors: no misfit. Random "calibration" pairs add pairs of
  the same law, so they cannot separate the two either; agreement below chance is no sign
  (an 88/12 crowd at accuracy 0.65 gives P(second rare | first rare) 0.41).
- *The first labels reject the fit* (:func:`_first_label_z`). A first label is bought
  before anything is known of its item, so it is a draw from the model's marginal given
  its worker, P(1) = π s_j + (1 − π)(1 − t_j): the one sample the value-driven partners do
  not touch. The gate's fit, pulled by those partners, expects more first labels of the
  common class than the crowd gave (trec pull: 0.67–0.75 expected, 0.59–0.67 given; z
  −3.1 … −4.7 from 300 labels on). With ``check`` the gate shuts at a fit where
  z < −``check`` (:data:`CHECK_Z`) and stays shut for the campaign (:class:`GateMemory`;
  shut for that fit only, it can open again at a later fit, and trec at 2 labels per item
  still read as one class). What it does not do: tell a lean
  from an imbalance — it also fires on symmetric imbalanced crowds whose accuracy is below
  the worker prior's (Beta(16, 4): 0.8), whose per-worker rates, held near 0.8, expect too
  many common-class first labels (88/12 at 0.65–0.75, 1,000–3,000 items: z −1.6 … −6.7).
  Bed measurements and the decision: docs/stress-bed.md, "a first-label check".

**When it runs.** At every full refit of the policy (:meth:`ClassPriorSteps._update_class_prior`,
one call at the start of its rounds) — but while the gate is shut, only once the labels have
grown by :data:`SHUT_GROWTH` since the last fit (a balanced crowd never opens it; the fit at
every refit of a 3,200-label RTE replay cost about 0.5 s of CPU, on its growth points 0.05 s,
compiled 0.014 s).
With the incremental refit (``refit_tol`` > 0) the prior moves at the full refits only
(``refit_exact_until``, ``refit_exact_growth``): the incremental refits between them re-read
their items with the prior of the last full one, and its statistics are synchronised after
each full one with the new prior in place.
Measurements: docs/stress-bed.md, "a learned class prior in the worker-aware allocation".
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit
from scipy import special

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies._one_coin_kernel import fill_moments, item_errors
from crowdbudget.posteriors.one_coin import OneCoinPosterior
from crowdbudget.posteriors.two_coin import TwoCoinPosterior
from crowdbudget.types import FloatArray, IntArray, Problem

#: the item priors of the worker-aware policies (``class-prior=``, ``multiclass-class-prior=``)
CLASS_PRIORS = ("none", "gated")

#: the binary policy's (``class-prior=``): also ``gated-runaway16``, the same gate whose
#: runaway lock (:class:`GateMemory`) waits for odds 16 times those at the opening instead of
#: :data:`RUNAWAY` (an option: on a crowd whose rare class is a few per cent, a share first
#: read at 0.2–0.3 falls to its true 0.05 by odds × 5–9 and the × 4 lock shut the gate for
#: the campaign; the biased workers' collapse the lock is for runs to 0.017, × 30:
#: docs/stress-bed.md, "the default policy on held-out cells")
BINARY_CLASS_PRIORS = (*CLASS_PRIORS, "gated-runaway16", "gated-checked")

#: the share π is clipped to [SHARE_FLOOR, 1 − SHARE_FLOOR] before it becomes a prior (a
#: Beta of total 2 with P(θ ≥ ½) within 0.02 of 0 or 1 has a parameter near 0, where the
#: moment matching of a label loses precision)
SHARE_FLOOR = 0.02

#: the gate reads the crowd accuracy at this quantile of its posterior (:func:`gated_class_prior`;
#: 0.05 and 0.08 opened it on the bed's 65/35 cell with 30 % biased workers, where the
#: one-coin allocation with a skewed prior then asks the workers who answer the common class
#: always: docs/stress-bed.md)
GATE_QUANTILE = 0.10

#: a share whose odds grow by more than this factor after the gate opened locks it shut
#: (:class:`GateMemory`)
RUNAWAY = 4.0

#: the runaway factor of each gated binary class prior (:data:`BINARY_CLASS_PRIORS`)
RUNAWAYS = {"gated": RUNAWAY, "gated-runaway16": 16.0}

#: the binary class priors whose gate also runs the first-label check
#: (:func:`gated_class_prior`, ``check``), each with the gate it extends
CHECKED = {"gated-checked": "gated-runaway16"}

#: the first-label check shuts the gate at a fit where the first labels say the common
#: class this many binomial standard errors less often than the fitted model expects
#: (one-sided; fixed before any run: under a model the labels support, about one fit in
#: 700 by chance; it then locks the gate shut for the campaign)
CHECK_Z = 3.0

#: while the gate is shut, the fit runs again only once the labels have grown by this share
#: since the last fit (:class:`GateMemory`; at the refits of the policy in between the prior
#: stays the problem's): a balanced crowd never opens it, and its fit at every refit was
#: most of what the option cost (docs/stress-bed.md)
SHUT_GROWTH = 0.1

#: EM stops when neither π nor any accuracy moved by more than this in an iteration
_TOL = 1e-7


def share_and_accuracy(
    items: IntArray,
    workers: IntArray,
    labels: IntArray,
    n_items: int,
    worker_prior: tuple[float, float],
    n_iter: int = 100,
) -> tuple[float, float, float, float]:
    """(π, a, r2, n2) of the labels ``(items[t], workers[t], labels[t])`` (shapes (n,),
    labels in {0, 1}; ``n_items`` is the problem's, unused by the fit): the class-1 share π
    of a two-class Dawid–Skene model fitted by EM (module docstring) — per worker a
    sensitivity and a specificity, each MAP under Beta(c0, d0) = ``worker_prior``, Beta(1, 1)
    on π (its posterior mean over the labelled items) — with ``a`` the mean probability per
    label that it is right (the crowd as the allocation asked it), and the expected right
    answers ``r2`` among the ``n2`` labels of items with two or more labels (a lone label
    says nothing about the accuracy: only the share of labels 1 is identified from lone
    labels). Per worker and two-coin: the allocation asks the workers it believes reliable,
    so one crowd accuracy would read the share from whoever it asked most. Deterministic;
    O(n + max id) once (the grouping), then O(n + n_workers) per iteration, at most ``n_iter``
    iterations (stops when no rate and not π moved by more than 1e-7)."""
    pi, right_mean, right2, n2, _ = _share_fit(items, workers, labels, worker_prior, n_iter)
    return pi, right_mean, right2, n2


def _share_fit(
    items: IntArray,
    workers: IntArray,
    labels: IntArray,
    worker_prior: tuple[float, float],
    n_iter: int = 100,
) -> tuple[float, float, float, float, float]:
    """:func:`share_and_accuracy`'s (π, a, r2, n2) and the number of distinct items
    labelled (the gate's n for π's posterior), by one compiled call (:func:`_grouped_em`)."""
    c0, d0 = worker_prior
    # MAP of each rate under Beta(c0, d0): c0, d0 > 1 in the registry (16, 4), so the mode
    # is inside (0, 1); with c0 ≤ 1 or d0 ≤ 1 the posterior mean keeps it there
    shift = 1.0 if (c0 > 1.0 and d0 > 1.0) else 0.0
    pi, right_mean, right2, n2, n_seen = _grouped_em(
        np.ascontiguousarray(items, dtype=np.int64),
        np.ascontiguousarray(workers, dtype=np.int64),
        np.ascontiguousarray(np.asarray(labels) == 1),
        float(c0),
        float(d0),
        shift,
        int(n_iter),
        _TOL,
    )
    return float(pi), float(right_mean), float(right2), float(n2), float(n_seen)


@njit(cache=True, nogil=True)
def _dense_ranks(ids: IntArray) -> tuple[IntArray, IntArray]:
    """For ids (n,) ≥ 0: each id's rank among the distinct ids in increasing order (n,) and
    the count of each distinct id (n_distinct,) — ``np.unique(ids, return_inverse=True,
    return_counts=True)``'s inverse and counts, by one pass over a table of max(ids) + 1
    flags instead of a sort (O(n + max id))."""
    top = 0
    for t in range(ids.shape[0]):
        top = max(top, ids[t] + 1)
    rank = np.zeros(top, dtype=np.int64)
    for t in range(ids.shape[0]):
        rank[ids[t]] += 1  # the id's count, for now
    n_distinct = 0
    for k in range(top):
        if rank[k]:
            n_distinct += 1
    counts = np.empty(n_distinct, dtype=np.int64)
    r = 0
    for k in range(top):
        if rank[k]:
            counts[r] = rank[k]
            rank[k] = r
            r += 1
    dense = np.empty(ids.shape[0], dtype=np.int64)
    for t in range(ids.shape[0]):
        dense[t] = rank[ids[t]]
    return dense, counts


@njit(cache=True, nogil=True)
def _grouped_em(
    items: IntArray,
    workers: IntArray,
    one: np.ndarray,
    c0: float,
    d0: float,
    shift: float,
    n_iter: int,
    tol: float,
) -> tuple[float, float, float, float, int]:
    """:func:`_two_coin_em` on the raw ids ``items``, ``workers`` (n,), grouped first by
    :func:`_dense_ranks` (the dense indices ``np.unique`` gives: the same arrays, so the
    same sums in the same order, the same bits); also the number of distinct items. The
    grouping was most of a fit's time at the policy's refits (two sorts per fit)."""
    item, counts = _dense_ranks(items)
    worker, _ = _dense_ranks(workers)
    pi, right_mean, right2, n2, _, _ = _two_coin_em(
        item, worker, one, counts, c0, d0, shift, n_iter, tol
    )
    return pi, right_mean, right2, n2, counts.shape[0]


@njit(cache=True, nogil=True)
def _two_coin_em(
    item: IntArray,
    worker: IntArray,
    one: np.ndarray,
    counts: IntArray,
    c0: float,
    d0: float,
    shift: float,
    n_iter: int,
    tol: float,
) -> tuple[float, float, float, float, FloatArray, FloatArray]:
    """:func:`share_and_accuracy`'s EM, compiled: ``item``, ``worker`` (n,) dense indices,
    ``one`` (n,) the labels that say 1, ``counts`` (n_seen,) labels per item. One pass over
    the labels per half-step (the fit runs at the policy's refits: a NumPy loop paid a
    dozen array calls per iteration, most of the option's cost on a balanced crowd). Also the
    fitted rates (n_workers,): sensitivity and specificity per dense worker index."""
    n, n_seen = item.shape[0], counts.shape[0]
    n_w = 0
    for t in range(n):
        n_w = max(n_w, worker[t] + 1)
    sens = np.full(n_w, c0 / (c0 + d0))  # P(label 1 | class 1), per worker
    spec = sens.copy()  # P(label 0 | class 0)
    log_s1, log_s0 = np.empty(n_w), np.empty(n_w)
    x, p = np.empty(n_seen), np.full(n_seen, 0.5)
    num_s, den_s = np.empty(n_w), np.empty(n_w)
    num_q, den_q = np.empty(n_w), np.empty(n_w)
    pi = 0.5
    for _ in range(n_iter):
        for j in range(n_w):
            # rates clipped off 0 and 1: every log below is finite
            s_ = min(max(sens[j], 1e-9), 1.0 - 1e-9)
            q_ = min(max(spec[j], 1e-9), 1.0 - 1e-9)
            log_s1[j] = math.log(s_ / (1.0 - q_))  # a label 1's log-likelihood ratio
            log_s0[j] = math.log((1.0 - s_) / q_)  # a label 0's
        x[:] = 0.0
        for t in range(n):
            x[item[t]] += log_s1[worker[t]] if one[t] else log_s0[worker[t]]
        prior = math.log(pi / (1.0 - pi))
        total = 0.0
        for i in range(n_seen):
            # clipped: exp never overflows
            p[i] = 1.0 / (1.0 + math.exp(-min(max(prior + x[i], -700.0), 700.0)))
            total += p[i]
        num_s[:], den_s[:], num_q[:], den_q[:] = 0.0, 0.0, 0.0, 0.0
        for t in range(n):
            j, pt = worker[t], p[item[t]]
            den_s[j] += pt
            den_q[j] += 1.0 - pt
            if one[t]:
                num_s[j] += pt
            else:
                num_q[j] += 1.0 - pt
        moved = 0.0
        for j in range(n_w):
            new_s = (num_s[j] + c0 - shift) / (den_s[j] + c0 + d0 - 2.0 * shift)
            new_q = (num_q[j] + c0 - shift) / (den_q[j] + c0 + d0 - 2.0 * shift)
            moved = max(moved, abs(new_s - sens[j]), abs(new_q - spec[j]))
            sens[j], spec[j] = new_s, new_q
        new_pi = (total + 1.0) / (n_seen + 2.0)
        moved = max(moved, abs(new_pi - pi))
        pi = new_pi
        if moved < tol:
            break
    right_total, right2, n2 = 0.0, 0.0, 0.0
    for t in range(n):
        right = p[item[t]] if one[t] else 1.0 - p[item[t]]
        right_total += right
        if counts[item[t]] >= 2:
            right2 += right
            n2 += 1.0
    return pi, right_total / n, right2, n2, sens, spec


@njit(cache=True, nogil=True)
def _checked_em(
    items: IntArray,
    workers: IntArray,
    one: np.ndarray,
    c0: float,
    d0: float,
    shift: float,
    n_iter: int,
    tol: float,
) -> tuple[float, float, float, float, int, float]:
    """:func:`_grouped_em`'s (π, a, r2, n2, n_seen) and the first-label check's z
    (:func:`_first_label_z`) under the fitted rates — one grouping, one EM (the same
    sums in the same order as :func:`_grouped_em`: the same bits)."""
    item, counts = _dense_ranks(items)
    worker, _ = _dense_ranks(workers)
    pi, right_mean, right2, n2, sens, spec = _two_coin_em(
        item, worker, one, counts, c0, d0, shift, n_iter, tol
    )
    z = _first_label_z(item, worker, one, counts.shape[0], pi, sens, spec)
    return pi, right_mean, right2, n2, counts.shape[0], z


@njit(cache=True, nogil=True)
def _first_label_z(
    item: IntArray,
    worker: IntArray,
    one: np.ndarray,
    n_seen: int,
    pi: float,
    sens: FloatArray,
    spec: FloatArray,
) -> float:
    """The gate's posterior-predictive check (:func:`gated_class_prior`, ``check``): the
    count of *first* labels (each item's earliest in ``item``, ``worker``, ``one`` (n,),
    dense indices, arrival order) that say the fitted common class, against its expectation
    under the fitted model — a first label from worker j says 1 with probability
    π s_j + (1 − π)(1 − t_j) (share ``pi``, rates ``sens``, ``spec`` (n_workers,)).
    Returns z = (observed − expected) / √(Σ e (1 − e)), signed so that z < 0 says the model
    puts more first labels on the common class than the crowd gave (0: no label). A first
    label is bought before anything is known of its item, so however the allocation chose
    its item and worker it is a draw from the model's marginal given its worker: the one
    sample of the campaign no value-driven choice has touched."""
    seen = np.zeros(n_seen, dtype=np.bool_)
    observed, expect, var = 0.0, 0.0, 0.0
    for t in range(item.shape[0]):
        i = item[t]
        if seen[i]:
            continue
        seen[i] = True
        j = worker[t]
        e = pi * sens[j] + (1.0 - pi) * (1.0 - spec[j])  # P(first label 1)
        observed += 1.0 if one[t] else 0.0
        expect += e
        var += e * (1.0 - e)
    if var <= 0.0:
        return 0.0
    z = (observed - expect) / math.sqrt(var)
    return z if pi >= 0.5 else -z


def checked_fit(
    items: IntArray,
    workers: IntArray,
    labels: IntArray,
    worker_prior: tuple[float, float],
    n_iter: int = 100,
) -> tuple[float, float, float, float, float, float]:
    """:func:`_share_fit`'s (π, a, r2, n2, n_seen) and the first-label check's z
    (:func:`_first_label_z`) for the labels in arrival order (shapes (n,)); the same fit,
    the same bits, by one compiled call."""
    c0, d0 = worker_prior
    shift = 1.0 if (c0 > 1.0 and d0 > 1.0) else 0.0
    out = _checked_em(
        np.ascontiguousarray(items, dtype=np.int64),
        np.ascontiguousarray(workers, dtype=np.int64),
        np.ascontiguousarray(np.asarray(labels) == 1),
        float(c0),
        float(d0),
        shift,
        int(n_iter),
        _TOL,
    )
    pi, right_mean, right2, n2, n_seen, z = out
    return float(pi), float(right_mean), float(right2), float(n2), float(n_seen), float(z)


def beta_for_share(share: float, total: float = 2.0) -> tuple[float, float]:
    """The Beta(a0, b0) with ``a0 + b0 = total`` whose P(θ ≥ ½) is ``share`` (bisection:
    P(θ ≥ ½) rises with a0 at a fixed total; 60 halvings: a0 to ~1e-18 of ``total``)."""
    lo, hi = 1e-3, total - 1e-3
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if 1.0 - float(special.betainc(mid, total - mid, 0.5)) < share:
            lo = mid
        else:
            hi = mid
    return lo, total - lo


@dataclass
class GateMemory:
    """What the gate remembers between refits: the share's log-odds when it last opened
    (None: shut), whether a runaway share locked it shut for the campaign, and, while shut,
    the label count before which the fit does not run again (:data:`SHUT_GROWTH`)."""

    opened_at: float | None = None
    locked: bool = False
    next_fit: int = 0

    def skips(self, n_labels: int) -> bool:
        """Whether the gate stays shut at ``n_labels`` without a fit: locked, or shut at the
        last fit and the labels have not yet grown by :data:`SHUT_GROWTH` since it."""
        return self.locked or n_labels < self.next_fit

    def fitted(self, n_labels: int, is_open: bool) -> None:
        """After a fit at ``n_labels``: open, the next refit fits again; shut, the first
        refit at ``n_labels · (1 + SHUT_GROWTH)`` labels or later."""
        self.next_fit = 0 if is_open else int(np.ceil(n_labels * (1.0 + SHUT_GROWTH)))


def gated_class_prior(
    items: IntArray,
    workers: IntArray,
    labels: IntArray,
    n_items: int,
    worker_prior: tuple[float, float],
    quantile: float | None = GATE_QUANTILE,
    memory: GateMemory | None = None,
    runaway: float = RUNAWAY,
    check: float | None = None,
) -> tuple[float, float] | None:
    """The item prior (a0, b0) every item gets at a refit (module docstring), or None
    (Beta(1, 1): a lone label can decide, or no label yet). ``quantile``: the gate reads the
    accuracy at this quantile of Beta(c0 + r2, d0 + n2 − r2) — the worker prior and the
    labels of items with two or more labels (:func:`share_and_accuracy`) — so that it opens
    while few pairs say how often a label is right, and the share at the same quantile of
    its posterior on the side of ½ (so that a few labels that happen to agree do not open
    it); None: both at their point estimates. The prior given is the point estimate's.

    ``memory`` (updated in place): once open, a share whose odds run more than ``runaway``
    (:data:`RUNAWAY`) times further from ½ than when the gate opened locks it shut for good —
    the allocation's own doing (with the prior on, it asks the workers who answer the common
    class, and the labels it buys say the common class: docs/stress-bed.md).

    ``check`` (None: none): the first-label check (module docstring, :func:`_first_label_z`)
    at every fit; where the first labels say the fitted common class more than ``check``
    standard errors less often than the fit expects, the gate shuts and ``memory`` locks it
    for the campaign."""
    if items.shape[0] == 0 or (memory is not None and memory.locked):
        return None
    if check is None:
        pi, a, right2, n2, n_seen = _share_fit(items, workers, labels, worker_prior)
    else:
        pi, a, right2, n2, n_seen, z = checked_fit(items, workers, labels, worker_prior)
        if z < -check:  # the first labels reject the fit: shut for the campaign
            if memory is not None:
                memory.locked, memory.opened_at = True, None
            return None
    near = pi  # the share the gate reads: the credible one nearest ½
    if quantile is not None:
        c0, d0 = worker_prior
        a = min(a, float(special.betaincinv(c0 + right2, d0 + n2 - right2, quantile)))
        # π's posterior Beta(1 + Σ p, 1 + n − Σ p) over the n labelled items (π: its mean)
        ones = pi * (n_seen + 2.0) - 1.0
        level = 1.0 - quantile if pi < 0.5 else quantile
        near = float(special.betaincinv(1.0 + ones, 1.0 + n_seen - ones, level))
        if (near - 0.5) * (pi - 0.5) <= 0.0:
            return None
    if abs(float(special.logit(near))) <= float(special.logit(max(a, 0.5))):
        if memory is not None:
            memory.opened_at = None
        return None
    if memory is not None:
        odds = abs(float(special.logit(pi)))
        if memory.opened_at is None:
            memory.opened_at = odds
        elif odds > memory.opened_at + float(np.log(runaway)):
            memory.locked, memory.opened_at = True, None
            return None
    return beta_for_share(min(max(pi, SHARE_FLOOR), 1.0 - SHARE_FLOOR))


def shared_prior(
    known_prior: FloatArray | None,
    n_items: int,
    old_row: tuple[float, float],
    new_row: tuple[float, float],
) -> FloatArray:
    """The refit's item prior (n_items, 2), columns (b, a), after the shared row moves from
    ``old_row`` to ``new_row``: every row equal to ``old_row`` (each item not known) takes
    ``new_row``; a control item's known row (``known_prior``, far from any Beta of total 2)
    is kept. A new array: a copy a verdict's refit holds is never changed."""
    if known_prior is None:
        return np.tile(np.array(new_row, dtype=float), (n_items, 1))
    out = np.array(known_prior, dtype=float)
    shared = (out[:, 0] == old_row[0]) & (out[:, 1] == old_row[1])
    out[shared] = new_row
    return out


def unlabelled_state(
    post: OneCoinPosterior | TwoCoinPosterior,
    unlabelled: np.ndarray,
    moments: FloatArray,
    item_error: FloatArray,
) -> None:
    """The fast path's per-item moments (n_items, 2, 6) and current errors (n_items,) of
    the ``unlabelled`` items (mask, (n_items,)), all in one state (a, b) after a refit that
    moved the shared prior: computed once by the compiled kernels of the full pass
    (:func:`~crowdbudget.policies._one_coin_kernel.fill_moments`, ``item_errors``: the same
    bits) and copied to every unlabelled item. Their state numbers stay: only unlabelled
    items hold numbers below the labelled items' (the refit renumbers those above them), and
    they share one."""
    where = np.flatnonzero(unlabelled)
    if where.shape[0] == 0:
        return
    i = int(where[0])
    a = np.ascontiguousarray(post.a[i : i + 1], dtype=float)
    b = np.ascontiguousarray(post.b[i : i + 1], dtype=float)
    one = np.empty((1, 2, 6))
    fill_moments(a, b, one)
    error = np.empty(1)
    item_errors(a, b, error)
    moments[where] = one[0]
    item_error[where] = error[0]


def check_class_prior(class_prior: str, refit: int, refit_tol: float, full: bool) -> None:
    """One-line errors for a ``class_prior`` the policy cannot run. With ``refit_tol`` > 0
    the prior moves at the full refits only (``full``: ``refit_exact_until`` or
    ``refit_exact_growth`` > 0); an incremental refit re-reads the items with the prior of the
    last full one (its fit costs O(labels) — at every incremental refit it would undo what
    the incremental refit saves)."""
    if class_prior not in BINARY_CLASS_PRIORS:
        raise InvalidParameterError(
            f"class_prior must be one of {', '.join(BINARY_CLASS_PRIORS)}, got {class_prior!r}"
        )
    if class_prior == "none":
        return
    if not refit:
        raise InvalidParameterError("class_prior needs refit > 0 (one-coin)")
    if refit_tol and not full:
        raise InvalidParameterError(
            "class_prior with refit_tol > 0 needs full refits "
            "(refit_exact_until > 0 or refit_exact_growth > 0)"
        )


class ClassPriorSteps:
    """The class-prior steps of :class:`~crowdbudget.policies.worker_aware.
    OneCoinKnowledgeGradient`, mixed in: its reset, the prior update at the start of a refit's
    rounds, and the fast path's refresh of the unlabelled items after a refit (module
    docstring). The attributes below are the policy's."""

    class_prior: str
    worker_prior: tuple[float, float]
    problem_: Problem
    posterior_: OneCoinPosterior | TwoCoinPosterior
    _log: IntArray
    _n_log: int
    _known_prior: FloatArray | None
    _labeled: np.ndarray
    _pairs_built: bool
    _fresh_state: tuple[float, float]
    _moments: FloatArray
    _item_error: FloatArray

    def _reset_class_prior(self, problem: Problem) -> None:
        """The prior row (b, a) of every item not known, when every item has the same prior
        (None: per-item priors, no class prior); whether it moved at the last refit (the fast
        path's unlabelled items then take the new state); the gate's memory."""
        prior = problem.prior_array
        same = bool(np.all(prior == prior[0]))
        self._shared_row = (float(prior[0, 0]), float(prior[0, 1])) if same else None
        self._prior_moved = False
        self._gate = GateMemory()

    def _class_prior_state(self, kept: Any = None) -> Any:
        """The class-prior state (a copy; a verdict's refit of a copy must not change it), or,
        given one, put it back."""
        if kept is None:
            return (self._known_prior, self._shared_row, self._prior_moved, copy.copy(self._gate))
        self._known_prior, self._shared_row, self._prior_moved, self._gate = kept
        return None

    def _update_class_prior(self) -> None:
        """``class_prior="gated"`` (or ``"gated-runaway16"``: its runaway factor,
        :data:`RUNAWAYS`): before a refit's rounds, every item not known takes the
        prior :func:`gated_class_prior` gives for the labels so far (the problem's when the
        gate is shut); one shared state, so the unlabelled items stay in one state
        (``_prior_moved``: it changed)."""
        if self.class_prior == "none" or self._shared_row is None or not self._n_log:
            return
        if self._gate.skips(self._n_log):
            return  # shut (the problem's prior), too few new labels to fit again
        log = self._log[: self._n_log]
        n_items = self.problem_.n_items
        gate = CHECKED.get(self.class_prior, self.class_prior)
        state = gated_class_prior(
            log[:, 0],
            log[:, 1],
            log[:, 2],
            n_items,
            self.worker_prior,
            memory=self._gate,
            runaway=RUNAWAYS[gate],
            check=CHECK_Z if self.class_prior in CHECKED else None,
        )
        self._gate.fitted(self._n_log, state is not None)
        base = self.problem_.prior_array[0]
        row = (float(base[0]), float(base[1])) if state is None else (state[1], state[0])
        if row != self._shared_row:
            self._known_prior = shared_prior(self._known_prior, n_items, self._shared_row, row)
            self._shared_row, self._prior_moved = row, True
            if self._pairs_built:
                self._fresh_state = (row[1], row[0])  # the scan path's shared state (a, b)

    def _refresh_prior_state(self) -> None:
        """After a refit on the lazy compiled path, when the shared prior moved: the moments
        and current error of the unlabelled items (all in the new prior state, keeping their
        common state number) — what ``_refresh_labeled_items`` does for the others."""
        if self._prior_moved:
            unlabelled_state(self.posterior_, ~self._labeled, self._moments, self._item_error)
        self._prior_moved = False
