"""A lone label read through its worker's predictive ``E_q[e]`` (``lone_labels="skip-predictive"``
of :class:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene`).

A *lone* label is the only label of its item (the item's truth not known). ``"skip"`` leaves it
out of its worker's counts, so ``q(e_j)`` — fitted on the worker's partnered labels — does not
depend on it. The item's posterior then still read it the mean-field way, through
``exp E_q[log e_jcl]``. When a Dirichlet entry is small that under-states the entry by orders of
magnitude: at one label per item every worker's ``q(e)`` is the crowd prior, whose
off-diagonal pseudo-counts sit at the floor 0.1, so ``exp(ψ(0.1) − ψ(2.74)) ≈ 1e-5`` where the
prior's mean ``0.1 / 2.74 = 0.036`` is the probability of that label (docs/stress-bed.md,
"2026-12-07 (tempid)": every item read at 0.99999 where 76 % are right).

Derivation. Fix the factors the lone item's label does not enter: ``q(e_j)`` (fitted without
it) and ``q(π) = Dir(ν)``. The lone item ``i`` with label ``x`` from worker ``j`` has, under
the model, ``p(x | z_i = c, e_j) = e_jcx``. Its worker's confusion is uncertain, distributed as
``q(e_j)``, and the label is a single draw, so integrating ``e_j`` out exactly (a
Dirichlet–multinomial predictive of one draw; for a mixture of worker kinds, the kinds'
mixture of their Dirichlet means)::

    p(x | z_i = c) = ∫ e_jcx dq(e_j) = E_q[e_jcx]   (errors_ / worker_model(means=True))

and the class prior enters as in every other item's update, through ``q(π)``::

    log q(z_i = c) = E_q[log π_c] + log E_q[e_jcx] + const.

This is the coordinate update of ``q(z_i)`` in the evidence bound in which the lone label's
likelihood is its predictive under ``q(e_j)`` (the "cut" of Plummer 2015, "Cuts in Bayesian
graphical models": the label is read by its item but sends nothing back to its worker, which
is what ``"skip"`` already does to ``q(e)``), and it is exact as the item's posterior given
``q(e_j)`` and ``π``: collapsing ``π`` as well gives ``∝ E[π_c] E_q[e_jcx]``, which differs from
``exp E[log π_c] = exp(ψ(ν_c) − ψ(Σν))`` by a factor within ``[e^(−1/ν_c), 1]`` per class —
nothing next to the four orders of magnitude of ``exp E[log e]`` against ``E[e]`` (with
``ν_c`` the class's pseudo-count plus its items' shares; tested on a tiny crowd against
brute-force enumeration of the exact model, ``tests/test_lone_predictive.py``). ``exp E[log e]``
is what the mean-field bound gives when ``e_j`` is a factor the label updates; once the label
is cut from ``e_j`` there is nothing for the mean field to fit, and the predictive is the
posterior.

What feeds back. The lone items' shares ``T_i`` still enter ``q(π) = Dir(ν₀ + Σ_i T_i)`` — the
class proportions are the one factor a lone label informs — so the reading is applied inside
the variational loop (every iteration's lone rows), not after it: at the fixed point ``q(π)``
counts the lone items as read. The workers' counts are unchanged (the lone labels are cut from
them, as with ``"skip"``). When nothing can be checked (fewer than two workers with a partnered
label, where ``"skip"`` falls back to counting every label) ``"skip-predictive"`` does *not*
fall back: a lone label still does not count in its worker's model (counting it would make
``q(e_j)`` depend on the label its item is read through, and the predictive would no longer be
the posterior), so at one label per item every worker's ``q(e)`` is the crowd prior and every
item reads its label through the prior's mean, weighed against the class proportions.

Evidence bound. :meth:`~crowdbudget.aggregation.bayesian_dawid_skene.BayesianDawidSkene.
evidence_bound` is the model's bound with every label counted, a lower bound on the evidence
at *any* shares ``T``, so it is unchanged and still scores a fit made by this rule (as it
scores a ``"skip"`` fit); the bound is not the cut objective the loop ascends.

The compiled iterations (:mod:`~crowdbudget.aggregation._bds_kernel`) read every label through
``E[log e]``; a fit with lone labels under this rule runs the NumPy loop (the same updates
otherwise), a fit without lone labels is the ``"skip"`` fit bit for bit. The item-difficulty
mixture (:mod:`~crowdbudget.aggregation.item_difficulty`) reads its lone labels as before: only
its workers' model alone (the fit it is compared with, and every fit where nothing can be
checked) carries this reading.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from crowdbudget.aggregation.base import FloatArray, KnownTruth
from crowdbudget.datasets.loaders import LabelData


class LoneLabels:
    """The lone labels of ``data`` (module docstring): those alone on an item whose truth is
    not known. ``items``, ``workers``, ``labels``: their item, worker and label, each
    (n_lone,); ``checked``: per label of ``data``, whether it is not lone (n_labels,)."""

    def __init__(self, data: LabelData, known: KnownTruth | None) -> None:
        per_item = np.bincount(data.items, minlength=data.n_items)
        lone_item = per_item == 1
        if known is not None:
            lone_item &= ~known.mask(data.n_items)
        lone = lone_item[data.items]  # (n_labels,)
        self.checked = ~lone
        self.items = data.items[lone]
        self.workers = data.workers[lone]
        self.labels = data.labels[lone]

    def __len__(self) -> int:
        return int(self.items.size)

    def checked_incidence(self, data: LabelData, shape: tuple[int, int]) -> sp.csr_matrix:
        """The incidence (n_items, n_workers·C) of the labels that are not lone."""
        C = data.n_classes
        return sp.csr_matrix(
            (self.checked.astype(np.float64), (data.items, data.workers * C + data.labels)),
            shape=shape,
        )

    def read(self, scores: FloatArray, expected_log_pi: FloatArray, errors: FloatArray) -> None:
        """Overwrite the lone items' rows of the log scores ``scores`` (n_items, C), in place,
        with ``E[log π_c] + log E_q[e_jcx]`` (module docstring); ``errors`` the workers'
        posterior means ``E_q[e]`` (J, C, C)."""
        predictive = errors[self.workers, :, self.labels]  # (n_lone, C): E[e_j c x] over c
        # E_q[e] > 0: a Dirichlet mean with every pseudo-count > 0 (the prior's floor >= 1e-3)
        scores[self.items] = np.log(predictive) + expected_log_pi
