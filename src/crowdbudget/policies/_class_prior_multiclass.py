"""The class prior the categorical worker-aware allocation learns (``class_prior="gated"``).

The multi-class analogue of :mod:`crowdbudget.policies._class_prior` (the binary rule; its
docstring gives the reasons, docs/stress-bed.md the measurements). The item prior of
:class:`~crowdbudget.policies.worker_aware_multiclass.CategoricalWorkerKnowledgeGradient` is
the problem's (uniform classes). With one-coin workers of accuracy a a lone label l on an item
of class prior π moves it to ∝ π_l a for class l and π_k (1 − a)/(K − 1) for every other
class k, so a lone label decides the item's Bayes class whatever it says exactly when

    π_min / π_max > (1 − a) / (a (K − 1))                                  (1)

(the worst case: a label naming the rarest class on an item whose commonest class is
another). Where (1) fails an allocation that believes the classes uniform buys one label for
every item, each of which can only *lower* the accuracy of the items of the common class
(fact_eval's gold: docs/stress-bed.md, "fact_eval-gold: labels lower the accuracy").

**The estimate** (:func:`class_shares`). Dawid–Skene fitted by EM on every label so far:
class shares π under Dirichlet(1, …, 1), per worker a confusion matrix whose rows have the
Dirichlet prior :func:`~crowdbudget.posteriors.categorical_workers.confusion_prior` of the
policy's worker prior Beta(c0, d0) (mean diagonal c0/(c0 + d0)), each row the posterior mean
given the soft counts (inside (0, 1) always, so every log below is finite). Fitted from the
labels alone — not from the allocation's item beliefs, which the prior already pulled toward
the common class — and per worker with a full confusion matrix, because the allocation asks
the workers it believes reliable and a worker answering one class always looks reliable to a
one-coin model. O(n K) per iteration, at most ``n_iter`` iterations.

**The gate** (:func:`gated_class_prior`). (1) read at credible bounds: the accuracy a at the
:data:`~crowdbudget.policies._class_prior.GATE_QUANTILE` quantile of Beta(c0 + r2, d0 + n2 − r2)
(r2 of the n2 labels on items with two or more labels judged right by the fit: lone labels
say nothing about the accuracy), π_max and π_min at the same level of their Beta marginals of
the Dirichlet posterior on the side of the uniform share (a few agreeing early labels do not
open it). Open: every item not known gets the prior π (clipped to at least
:data:`SHARE_FLOOR` per class, renormalised); shut: the problem's. Common-class odds
π_max / (1 − π_max) that grow more than :data:`~crowdbudget.policies._class_prior.RUNAWAY`
times after the gate opened (the near credible bound now against the far one at opening, so
that an estimate firming up from a few labels does not count) lock it shut for the campaign
(the binary rule's :class:`~crowdbudget.policies._class_prior.GateMemory`: with the prior on,
the allocation's own labels can run the share away).
"""

from __future__ import annotations

import numpy as np
from scipy import special

from crowdbudget.policies._class_prior import GATE_QUANTILE, RUNAWAY, GateMemory
from crowdbudget.posteriors.categorical_workers import confusion_prior
from crowdbudget.types import FloatArray, IntArray

#: every class keeps at least this share in the prior given (a zero share would make a class
#: impossible for every item, whatever its labels say)
SHARE_FLOOR = 0.01

#: EM stops when no share and no confusion entry moved by more than this in an iteration
_TOL = 1e-7


def class_shares(
    items: IntArray,
    workers: IntArray,
    labels: IntArray,
    n_classes: int,
    worker_prior: tuple[float, float],
    n_iter: int = 100,
) -> tuple[FloatArray, FloatArray, float, float]:
    """(π, n_soft, r2, n2) of the labels ``(items[t], workers[t], labels[t])`` (shapes (n,),
    labels in 0..K−1): the class shares π (K,) of a Dawid–Skene fit by EM (module docstring;
    π the posterior mean under Dirichlet(1)), the soft class counts n_soft (K,) over the
    labelled items, and the expected right answers ``r2`` among the ``n2`` labels of items
    with two or more labels. Deterministic."""
    K = int(n_classes)
    _, item, counts = np.unique(items, return_inverse=True, return_counts=True)
    item = item.reshape(-1)
    _, worker = np.unique(workers, return_inverse=True)
    worker = worker.reshape(-1)
    n_i, n_w = counts.shape[0], int(worker.max()) + 1
    c0, d0 = worker_prior
    alpha = confusion_prior(K, c0, d0)  # (K, K): row k's Dirichlet of worker answers
    lab = np.asarray(labels, dtype=np.int64)
    pi = np.full(K, 1.0 / K)
    # start from the prior's confusion (every worker alike): the first E-step is a weighted vote
    conf = np.broadcast_to(alpha / alpha.sum(axis=1, keepdims=True), (n_w, K, K)).copy()
    post = np.full((n_i, K), 1.0 / K)
    for _ in range(n_iter):
        # E: log P(class k | item's labels) = log π_k + Σ_labels log conf_j[k, l]; conf > 0
        # (posterior means of Dirichlet rows with entries > 0), so the logs are finite
        like = np.log(conf[worker, :, lab])  # (n, K)
        logp = np.log(pi)[None, :] + np.stack(
            [np.bincount(item, weights=like[:, k], minlength=n_i) for k in range(K)], axis=1
        )
        logp -= logp.max(axis=1, keepdims=True)
        post = np.exp(logp)
        post /= post.sum(axis=1, keepdims=True)
        # M: soft counts per (worker, class, label), plus the prior
        soft = np.zeros((n_w * K, K))
        pt = post[item]  # (n, K)
        for k in range(K):
            soft[:, k] = np.bincount(worker * K + lab, weights=pt[:, k], minlength=n_w * K)
        # soft[j*K + l, k] = Σ P(class k) over j's labels l; rows of conf are classes
        counts_jkl = soft.reshape(n_w, K, K).transpose(0, 2, 1) + alpha[None, :, :]
        new_conf = counts_jkl / counts_jkl.sum(axis=2, keepdims=True)
        n_soft = post.sum(axis=0)
        new_pi = (n_soft + 1.0) / (n_i + K)
        moved = max(float(np.abs(new_conf - conf).max()), float(np.abs(new_pi - pi).max()))
        conf, pi = new_conf, new_pi
        if moved < _TOL:
            break
    n_soft = post.sum(axis=0)
    right = post[item, lab]
    several = counts[item] >= 2
    return pi, n_soft, float(right[several].sum()), float(several.sum())


def lone_label_decides(pi_min: float, pi_max: float, accuracy: float, n_classes: int) -> bool:
    """Condition (1) of the module docstring: a lone label of a one-coin worker of this
    accuracy decides the Bayes class of an item whose class prior has these extreme shares."""
    a = min(max(accuracy, 1.0 / n_classes), 1.0 - 1e-12)
    return bool(np.log(pi_max / pi_min) <= np.log(a * (n_classes - 1) / (1.0 - a)))


def gated_class_prior(
    items: IntArray,
    workers: IntArray,
    labels: IntArray,
    n_classes: int,
    worker_prior: tuple[float, float],
    memory: GateMemory | None = None,
    quantile: float = GATE_QUANTILE,
) -> FloatArray | None:
    """The class prior (K,) every item not known gets at a refit (module docstring), or None
    (the problem's prior: a lone label can decide, or no label yet). ``memory`` (updated in
    place) remembers the common class's log-odds logit π_max when the gate opened (at the
    far credible bound); log-odds (at the near bound) that run more than log RUNAWAY beyond
    them lock the gate shut."""
    if items.shape[0] == 0 or (memory is not None and memory.locked):
        return None
    K = int(n_classes)
    pi, n_soft, right2, n2 = class_shares(items, workers, labels, K, worker_prior)
    c0, d0 = worker_prior
    a = float(special.betaincinv(c0 + right2, d0 + n2 - right2, quantile))
    # the Dirichlet(1 + n_soft) posterior's marginals: Beta(1 + n_k, K − 1 + n − n_k)
    total = float(n_soft.sum())
    top, low = int(np.argmax(pi)), int(np.argmin(pi))
    top_beta = (1.0 + n_soft[top], K - 1.0 + total - n_soft[top])
    near_max = float(special.betaincinv(*top_beta, quantile))
    near_min = float(
        special.betaincinv(1.0 + n_soft[low], K - 1.0 + total - n_soft[low], 1.0 - quantile)
    )
    if near_max <= near_min or lone_label_decides(near_min, near_max, a, K):
        if memory is not None:
            memory.opened_at = None
        return None
    if memory is not None:
        # the common class's odds π_max / (1 − π_max), as the binary rule's |logit π| (not
        # π_max / π_min: a class the crowd hardly ever names has π_min ≈ 1/n, which runs away
        # with every label whatever the allocation does), read at credible bounds: at opening
        # the far one (what the labels then still allowed), later the near one — an estimate
        # firming up from a few labels stays within the first; one the allocation's own
        # labels run away goes beyond
        if memory.opened_at is None:
            memory.opened_at = float(special.logit(special.betaincinv(*top_beta, 1.0 - quantile)))
        elif float(special.logit(near_max)) > memory.opened_at + float(np.log(RUNAWAY)):
            memory.locked, memory.opened_at = True, None
            return None
    prior = np.maximum(pi, SHARE_FLOOR)
    return np.asarray(prior / prior.sum(), dtype=float)
