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
    """What ``share_and_accuracy`` returns for the same arguments, by array operations."""
    c0, d0 = worker_prior
    _, item, counts = np.unique(items, return_inverse=True, return_counts=True)
    item = item.reshape(-1)
    _, worker = np.unique(workers, return_inverse=True)
    worker = worker.reshape(-1)
    n_w = int(worker.max()) + 1
    one = labels == 1
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
