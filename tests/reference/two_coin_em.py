"""The two-class Dawid–Skene EM of ``policies._class_prior.share_and_accuracy`` written with
NumPy array operations, one step per line: the reference its compiled loop is held to."""

from __future__ import annotations

import numpy as np
from scipy import special

from crowdbudget.types import IntArray


def share_and_accuracy_numpy(
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
    O(n log n) once (the grouping), then O(n + n_workers) per iteration, at most ``n_iter``
    iterations (stops when no rate and not π moved by more than 1e-7)."""
    c0, d0 = worker_prior
    _, item, counts = np.unique(items, return_inverse=True, return_counts=True)
    item = item.reshape(-1)
    _, worker = np.unique(workers, return_inverse=True)
    worker = worker.reshape(-1)
    n_w = int(worker.max()) + 1
    one = labels == 1
    # MAP of each rate under Beta(c0, d0): c0, d0 > 1 in the registry (16, 4), so the mode
    # is inside (0, 1); with c0 ≤ 1 or d0 ≤ 1 the posterior mean keeps it there
    shift = 1.0 if (c0 > 1.0 and d0 > 1.0) else 0.0
    sens = np.full(n_w, c0 / (c0 + d0))  # P(label 1 | class 1), per worker
    spec = sens.copy()  # P(label 0 | class 0)
    pi = 0.5
    p = np.full(counts.shape[0], 0.5)
    for _ in range(n_iter):
        s_, q_ = np.clip(sens, 1e-9, 1.0 - 1e-9), np.clip(spec, 1e-9, 1.0 - 1e-9)
        # each label's log-likelihood ratio class 1 : class 0
        s_, q_ = s_[worker], q_[worker]
        ratio = np.where(one, np.log(s_ / (1.0 - q_)), np.log((1.0 - s_) / q_))
        x = special.logit(pi) + np.bincount(item, weights=ratio)
        p = special.expit(np.clip(x, -700.0, 700.0))  # clipped: exp never overflows
        pt = p[item]
        new_sens = (np.bincount(worker, weights=pt * one, minlength=n_w) + c0 - shift) / (
            np.bincount(worker, weights=pt, minlength=n_w) + c0 + d0 - 2.0 * shift
        )
        new_spec = (np.bincount(worker, weights=(1.0 - pt) * ~one, minlength=n_w) + c0 - shift) / (
            np.bincount(worker, weights=1.0 - pt, minlength=n_w) + c0 + d0 - 2.0 * shift
        )
        new_pi = (float(p.sum()) + 1.0) / (counts.shape[0] + 2.0)
        moved = max(
            float(np.abs(new_sens - sens).max()),
            float(np.abs(new_spec - spec).max()),
            abs(new_pi - pi),
        )
        sens, spec, pi = new_sens, new_spec, new_pi
        if moved < 1e-7:
            break
    right = np.where(one, p[item], 1.0 - p[item])
    several = counts[item] >= 2
    return float(pi), float(right.mean()), float(right[several].sum()), float(several.sum())
