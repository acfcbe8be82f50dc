"""The refits of the binary one-coin worker-aware policy
(:class:`~crowdbudget.policies.worker_aware.OneCoinKnowledgeGradient`) that run besides the
full refit at the label that makes it due: the incremental refit (``refit_tol``) and its
resynchronisation after a full refit, and the *spread* refit of a live campaign.

The spread refit (``refit_spread = B`` > 0 on an instance, set by the live campaign: a label
then does at most B units of refit work). A full refit re-reads every label so far in three
rounds — O(labels) at one label, every 10 labels: on a live campaign of 10^4 items that label
took 0.4–1.2 ms at 500–2,500 labels and grows with the labels, against 0.1–0.2 ms for the
others. Spread, the refit due at n labels is computed from the same inputs (the log up to n,
the item prior after the class-prior step, the workers' Betas of that moment) by
:func:`reestimate_slice`, B units per label — a unit is one label read in one pass or one
item set, 5–10 ns — on arrays of its own, while the labels n + 1, … are observed as usual
on the old beliefs; then the labelled items' moments and errors, B / 8 items a label. Once
done, the beliefs become the refit's and the labels since n are read again as
:meth:`observe` read them (the moment matching in arrival order; past the exact phase the
item only): the beliefs are then the ones the refit at n followed by those labels gives,
bit for bit (:func:`reestimate_slice` is :func:`~crowdbudget.policies._one_coin_kernel.
reestimate`'s operations in its order); at the next label the choices' arrays follow. What
changes are the choices in between: made on the beliefs before the refit (with the labels
since read online), for the labels the refit takes (its start, ``ceil(W / B)`` slices of
the rounds, W ≈ 3 · (2 · labels + 2 · labelled items) + items / 8, the refresh, the
numbering, the beliefs, the choices' arrays). A refit that comes due while one is under way
waits for it (the next label after it starts the next), so the refits of a long campaign
come every max(refit, the labels one takes) labels: O(B) work per label, whatever the
labels so far.
The same labels give the same run: the slices are counted in labels, not in time. A verdict
asked meanwhile reads the completed refit on a copy (:meth:`RefitSteps._spread_posterior`);
a control answer completes it first. Measurements: benchmarks/README.md ("the live
worker-aware label — the refit spread over the labels after it").
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from crowdbudget.policies._one_coin_kernel import match_label, number_states, refresh_items
from crowdbudget.policies._refit_incremental import IncrementalRefitState
from crowdbudget.posteriors.one_coin import OneCoinPosterior, _one_coin_update_scalar
from crowdbudget.types import FloatArray, IntArray, Problem

#: the live campaign's ``refit_spread``: refit work units per label (about 5–10 ns each, so
#: ≤ 0.1 ms a label; on 10^4 items and 256 slots a refit at 2,500 labels takes ~12 labels,
#: at 10^4 labels ~25)
LIVE_REFIT_SPREAD = 8_000

#: refit work units of one item's refresh (moments, error: a ``betainc``) after the rounds
ITEM_UNITS = 8

_DONE = 7  # the phase of a completed spread refit (reestimate_slice)


@njit(cache=True, nogil=True)
def reestimate_slice(
    log: IntArray,
    n_labels: int,
    labeled: IntArray,
    prior: FloatArray,
    c0: float,
    d0: float,
    n_rounds: int,
    beliefs: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    scratch: tuple[FloatArray, FloatArray, FloatArray],
    answered: IntArray,
    pos: IntArray,
    budget: int,
) -> bool:
    """At most about ``budget`` units of :func:`~crowdbudget.policies._one_coin_kernel.
    reestimate` on the first ``n_labels`` rows (item, worker, label) of ``log``; True once
    its rounds are done. ``beliefs`` (a, b) (n_items,), (c, d) (n_workers,): the result, c
    and d holding the workers' Betas of the refit's start at the first call; ``prior``
    (n_items, 2) columns (b, a); ``labeled``: the items in those rows, each once;
    ``scratch``: reliabilities (n_workers,), means (n_items,), agreements (n_workers,);
    ``answered`` (n_workers,) zeros at the first call; ``pos`` (3,) [round, phase, index],
    zeros at the first call. The same operations in the same order per item and worker as
    ``reestimate``, so the same bits: an item outside ``labeled`` keeps its prior (its mean
    is never read), so the per-round reset and means run over ``labeled`` only."""
    a, b, c, d = beliefs
    reliability, mean, right = scratch
    n_items, n_workers = a.shape[0], c.shape[0]
    left = budget
    while left > 0:
        phase, k = pos[1], pos[2]
        if phase == 0:  # every item at its prior (reestimate's copies of the prior)
            stop = min(n_items, k + 8 * left)  # a copy: eight items a unit
            for i in range(k, stop):
                a[i] = prior[i, 1]
                b[i] = prior[i, 0]
            left -= (stop - k) // 8 + 1
            pos[1], pos[2] = (1, 0) if stop == n_items else (0, stop)
        elif phase == 1:  # the labels per worker
            stop = min(n_labels, k + left)
            for m in range(k, stop):
                answered[log[m, 1]] += 1
            left -= stop - k + 1
            pos[1], pos[2] = (2, 0) if stop == n_labels else (1, stop)
        elif phase == 2:  # a round's start: reliabilities, the labelled items at their prior
            for w in range(n_workers):
                reliability[w] = c[w] / (c[w] + d[w])
            for m in range(labeled.shape[0]):
                i = labeled[m]
                a[i] = prior[i, 1]
                b[i] = prior[i, 0]
            left -= n_workers + labeled.shape[0] + 1
            pos[1], pos[2] = 3, 0
        elif phase == 3:  # items: their labels in arrival order, the workers fixed
            stop = min(n_labels, k + left)
            for m in range(k, stop):
                i = log[m, 0]
                a[i], b[i] = match_label(a[i], b[i], reliability[log[m, 1]], log[m, 2] == 1)
            left -= stop - k + 1
            pos[1], pos[2] = (4, 0) if stop == n_labels else (3, stop)
        elif phase == 4:  # an item's mean once per item
            stop = min(labeled.shape[0], k + left)
            for m in range(k, stop):
                i = labeled[m]
                mean[i] = a[i] / (a[i] + b[i])
            left -= stop - k + 1
            pos[1], pos[2] = (5, 0) if stop == labeled.shape[0] else (4, stop)
        elif phase == 5:  # workers: the expected agreements, summed in label order
            if k == 0:
                right[:] = 0.0
            stop = min(n_labels, k + left)
            for m in range(k, stop):
                mm = mean[log[m, 0]]
                right[log[m, 1]] += mm if log[m, 2] == 1 else 1.0 - mm
            left -= stop - k + 1
            pos[1], pos[2] = (6, 0) if stop == n_labels else (5, stop)
        elif phase == 6:  # c0 + right and d0 + (answered − right), as reestimate
            for w in range(n_workers):
                c[w] = c0 + right[w]
                d[w] = d0 + (float(answered[w]) - right[w])
            left -= n_workers + 1
            pos[0] += 1
            pos[1] = _DONE if pos[0] == n_rounds else 2
        else:
            return True
    return pos[1] == _DONE


@njit(cache=True, nogil=True)
def put_refreshed(
    items: IntArray,
    refreshed: tuple[FloatArray, FloatArray, IntArray],
    base: int,
    moments: FloatArray,
    item_error: FloatArray,
    state_ids: IntArray,
) -> None:
    """Row k of ``refreshed`` (moments (k, 2, 6), errors (k,), state numbers (k,)) copied to
    item ``items[k]`` of the fast path's arrays, the state numbers shifted by ``base``."""
    rows, errors, ids = refreshed
    for k in range(items.shape[0]):
        i = items[k]
        for o in range(2):
            for m in range(6):
                moments[i, o, m] = rows[k, o, m]
        item_error[i] = errors[k]
        state_ids[i] = ids[k] + base


class SpreadRefit:
    """A full refit under way (module docstring): its label count ``n``, its inputs and its
    arrays (:func:`reestimate_slice`)."""

    def __init__(
        self,
        n: int,
        log: IntArray,
        labeled: IntArray,
        prior: FloatArray,
        post: OneCoinPosterior,
        worker_prior: tuple[float, float],
        n_rounds: int,
    ) -> None:
        n_items, n_workers = post.n_items, post.n_workers
        self.n = n
        self.log = log  # rows below n are never written again (the log only grows)
        self.labeled = labeled
        self.prior = np.ascontiguousarray(np.broadcast_to(prior, (n_items, 2)), dtype=float)
        self.worker_prior = (float(worker_prior[0]), float(worker_prior[1]))
        self.n_rounds = int(n_rounds)
        self.beliefs = (
            np.empty(n_items),
            np.empty(n_items),
            np.array(post.c, dtype=float),
            np.array(post.d, dtype=float),
        )
        self.scratch = (np.empty(n_workers), np.empty(n_items), np.zeros(n_workers))
        self.answered = np.zeros(n_workers, dtype=np.int64)
        self.pos = np.zeros(3, dtype=np.int64)
        self.done = False
        self.started = False  # its first slice runs at the label after its start
        self.applied = False  # its beliefs are the posterior's (_spread_beliefs)
        # the labelled items' moments (k, 2, 6), errors (k,) and state numbers (k,, from 0)
        # for the fast path, computed after the rounds (refresh_step); None: not (yet)
        self.refreshed: tuple[FloatArray, FloatArray, IntArray] | None = None
        self.n_refreshed = 0
        self.numbered = False  # the refresh is complete
        self.n_states = 0
        self.compact: tuple[FloatArray, FloatArray] = (np.empty(0), np.empty(0))

    def step(self, budget: int) -> bool:
        """At most about ``budget`` units more; True once complete."""
        if not self.done:
            c0, d0 = self.worker_prior
            self.done = bool(
                reestimate_slice(
                    self.log,
                    self.n,
                    self.labeled,
                    self.prior,
                    c0,
                    d0,
                    self.n_rounds,
                    self.beliefs,
                    self.scratch,
                    self.answered,
                    self.pos,
                    int(budget),
                )
            )
        return self.done

    def refresh_step(self, budget: int) -> bool:
        """After the rounds, at most about ``budget`` units (:data:`ITEM_UNITS` an item) of
        the labelled items' moments, errors and state numbers from the refit's beliefs
        (:func:`~crowdbudget.policies._one_coin_kernel.refresh_items` on compact arrays:
        each item's values a function of its own (a, b), so the bits of a full pass), then
        their state numbers once over all (from 0, shifted when put in place); True once
        that is done."""
        k = self.labeled.shape[0]
        if self.refreshed is None:
            a, b = self.beliefs[0][self.labeled], self.beliefs[1][self.labeled]
            self.compact = (np.ascontiguousarray(a), np.ascontiguousarray(b))
            self.refreshed = (np.empty((k, 2, 6)), np.empty(k), np.empty(k, dtype=np.int64))
        moments, errors, ids = self.refreshed
        start = self.n_refreshed
        if start == k:
            # the last step: the state numbers afresh over every item at once, so equal
            # states hold one number, as a refit's refresh numbers them (a pull choice
            # scores each number once)
            self.n_states = number_states(
                np.arange(k, dtype=np.int64), self.compact[0], self.compact[1], ids, 0
            )
            self.numbered = True
            return True
        stop = min(k, start + max(1, int(budget) // ITEM_UNITS))
        self.n_states = refresh_items(
            np.arange(start, stop, dtype=np.int64),
            self.compact[0],
            self.compact[1],
            moments,
            errors,
            ids,
            self.n_states,
        )
        self.n_refreshed = stop
        return False


def replay_labels(post: OneCoinPosterior, rows: IntArray, item_only: bool) -> None:
    """``rows`` (k, 3) (item, worker, label) read into ``post`` in order as :meth:`observe`
    reads a label: the moment matching of the item and the worker (``item_only``: the
    worker's Beta kept, the incremental refit's rule)."""
    a, b, c, d = post.a, post.b, post.c, post.d
    for i, j, label in rows.tolist():
        # OneCoinPosterior.update's step (the labels were checked binary when observed)
        a[i], b[i], cj, dj = _one_coin_update_scalar(
            float(a[i]), float(b[i]), float(c[j]), float(d[j]), label
        )
        if not item_only:
            c[j], d[j] = cj, dj


class RefitSteps:
    """The incremental refit and the spread refit of :class:`~crowdbudget.policies.
    worker_aware.OneCoinKnowledgeGradient`, mixed in (module docstring). The attributes below
    are the policy's."""

    refit: int
    refit_rounds: int
    refit_tol: float
    refit_items: str
    refit_exact_growth: float
    reference: bool
    worker_prior: tuple[float, float]
    problem_: Problem
    posterior_: Any
    _log: IntArray
    _n_log: int
    _labeled_items: IntArray
    _n_labeled: int
    _known_prior: FloatArray | None
    _incremental: IncrementalRefitState | None
    _exact_until: int
    _last_full: int
    _last_refit: int
    _pairs_built: bool
    _lazy: bool
    _moments: FloatArray
    _item_error: FloatArray
    _state_ids: IntArray
    _n_states: int
    _n_base_states: int
    _reliability: FloatArray
    _stale: np.ndarray
    _bounded: bool
    _push_rebuild: bool

    #: refit work units per label (0: a full refit at the label that makes it due; module
    #: docstring); set on an instance (the live campaign sets :data:`LIVE_REFIT_SPREAD`)
    refit_spread = 0
    _spread: SpreadRefit | None = None
    #: the incremental refit's prior columns: (the prior array they are of, a, b)
    _prior_columns: tuple[FloatArray, FloatArray, FloatArray] | None = None

    if TYPE_CHECKING:  # the policy's and its other mixins' methods

        def _refit_beliefs(self, n_rounds: int = 3) -> None: ...

        def _update_class_prior(self) -> None: ...

        def _refresh_changed(self, items: IntArray, workers: IntArray) -> None: ...

        def _refresh_beliefs(self, items: IntArray, workers: IntArray) -> None: ...

        def _after_refit_lazy(self) -> None: ...

        def _number_states(self) -> None: ...

    def _refit_incremental(self) -> None:
        """The incremental refit (``refit_tol``; the policy's module docstring): re-read what
        changed, then refresh the changed items' moments, errors and state numbers and the
        changed workers' reliabilities, and mark for rescoring only the pairs they touch."""
        growth = self.refit_exact_growth
        if growth and self._n_log >= (1.0 + growth) * self._last_full:
            self._refit_beliefs(self.refit_rounds)  # a full refit; the statistics follow it
            return
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior) and self._incremental is not None
        prior = self.problem_.prior_array if self._known_prior is None else self._known_prior
        if self._prior_columns is None or self._prior_columns[0] is not prior:
            # the columns (a, b) of the prior, kept while it is the same array (a control
            # answer, which writes the known prior in place, drops them: observe_known)
            self._prior_columns = (
                prior,
                np.ascontiguousarray(prior[:, 1], dtype=float),
                np.ascontiguousarray(prior[:, 0], dtype=float),
            )
        for name in ("a", "b", "c", "d"):  # written in place: float64, contiguous
            setattr(post, name, np.ascontiguousarray(getattr(post, name), dtype=float))
        c0, d0 = self.worker_prior
        items, workers = self._incremental.refit(
            self._log[: self._n_log],
            (*self._prior_columns[1:], post.a, post.b, post.c, post.d),
            float(c0),
            float(d0),
            float(self.refit_tol),
            int(self.refit_rounds),
        )
        self._last_refit = self._n_log
        if not self._pairs_built:
            return
        if not self._lazy:
            # the eager paths rescore every pair after a refit (as the full refit's)
            self._refit_beliefs(0)
            return
        if (self._bounded and not self._push_rebuild) or not self._stale.all():
            self._refresh_changed(items.copy(), workers.copy())
            return
        # every worker's pairs stale already (pull mode after a refit): _refresh_changed's
        # refresh of the items and the reliabilities, the same bits, with no pair to mark
        self._refresh_beliefs(items, workers)

    def _sync_incremental(self) -> None:
        """After a full refit with ``refit_tol``: the incremental refit's statistics set to
        its beliefs (made here at the first full refit past the exact phase; from then
        on a label moves its worker at the refits only), so the next incremental refit starts
        from the full one's fit."""
        if not self.refit_tol or self._n_log <= self._exact_until:
            return
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior)
        self._last_full = self._n_log
        if self._incremental is None:
            c0, d0 = self.worker_prior
            self._incremental = IncrementalRefitState(
                post.n_items, post.n_workers, float(c0), float(d0)
            )
        for name in ("a", "b", "c", "d"):  # float64, contiguous
            setattr(post, name, np.ascontiguousarray(getattr(post, name), dtype=float))
        self._incremental.resync(self._log[: self._n_log], post.a, post.b, post.c, post.d)

    def _spread_start(self) -> bool:
        """At a full refit's due label: start it spread (True), or leave it to be run now
        (False: no ``refit_spread``, work within one label's budget, another model or item
        step, or push choices made from bounds — the push replay's compiled labels run their
        refits at once)."""
        post = self.posterior_
        if not (
            self.refit_spread
            and isinstance(post, OneCoinPosterior)
            and self.refit_items == "sequential"
            and not self.reference
            and not getattr(self, "_push_active", False)
            and (not self._pairs_built or self._lazy)
        ):
            return False
        # its work in units (reestimate_slice's count, the refresh's): within one label's
        # budget it runs now, as without a spread (a small campaign's choices unchanged)
        n, k = self._n_log, self._n_labeled
        rounds = self.refit_rounds * (2 * post.n_workers + 2 * k + 2 * n + 4)
        if post.n_items // 8 + n + rounds + ITEM_UNITS * k <= self.refit_spread:
            return False
        self._update_class_prior()  # the refit's item prior, from the labels up to n
        prior = self.problem_.prior_array if self._known_prior is None else self._known_prior
        self._spread = SpreadRefit(
            self._n_log,
            self._log,
            self._labeled_items[: self._n_labeled],
            prior,
            post,
            self.worker_prior,
            self.refit_rounds,
        )
        return True

    def _spread_step(self) -> None:
        """After a label, with a spread refit under way: nothing at its start's label, then
        its next slice — of the rounds, then (the fast path) of the labelled items' refresh
        — then its beliefs put in place, and at the next label what the choices read."""
        job = self._spread
        assert job is not None
        if not job.started:
            job.started = True
        elif not job.done:
            job.step(self.refit_spread)
        elif self._fast_refresh() and not job.numbered:
            job.refresh_step(self.refit_spread)
        elif not job.applied:
            self._spread_beliefs(job)
        else:
            self._spread_view(job)

    def _fast_refresh(self) -> bool:
        """Whether the refit's item refresh is the lazy compiled path's (pairs built)."""
        return self._pairs_built and self._lazy

    def _spread_finish(self) -> None:
        """Complete the spread refit under way (if any) at once: its remaining slices, its
        beliefs and its items' refresh put in place."""
        job = self._spread
        if job is None:
            return
        while not job.step(1 << 40):
            pass
        if not job.applied:
            self._spread_beliefs(job)
        self._spread_view(job)

    def _spread_beliefs(self, job: SpreadRefit) -> None:
        """The refit's beliefs in place, the incremental statistics of the log it read (past
        the exact phase), the labels since its count read again (module docstring); the
        choices read them from the next label's end on (:meth:`_spread_view`)."""
        post = self.posterior_
        post.a, post.b, post.c, post.d = job.beliefs
        n_now = self._n_log
        self._n_log = job.n  # the statistics of the log the refit read
        try:
            self._sync_incremental()
        finally:
            self._n_log = n_now
        replay_labels(post, self._log[job.n : n_now], self._incremental is not None)
        job.applied = True

    def _spread_view(self, job: SpreadRefit) -> None:
        """What a full refit does after its rounds: the items' moments, errors and state
        numbers (the job's refresh of the labelled items put in place, then the items of
        the labels since refreshed over it), the reliabilities, every worker's pairs
        stale; the refit is then over."""
        self._spread = None
        if not (self._fast_refresh() and job.numbered):
            self._refit_beliefs(0)  # the items' refresh now (no pairs when it was due)
            return
        assert job.refreshed is not None
        post = self.posterior_
        base = self._n_base_states
        put_refreshed(
            job.labeled, job.refreshed, base, self._moments, self._item_error, self._state_ids
        )
        self._n_states = base + job.n_states
        rows = self._log[job.n : self._n_log]
        if rows.shape[0]:
            items = np.array(list(dict.fromkeys(rows[:, 0].tolist())), dtype=np.int64)
            self._n_states = refresh_items(
                items,  # each once, in order (a few: no sort)
                post.a,
                post.b,
                self._moments,
                self._item_error,
                self._state_ids,
                self._n_states,
            )
        self._reliability = np.ascontiguousarray(post.c / (post.c + post.d), dtype=float)
        self._last_refit = self._n_log
        self._after_refit_lazy()

    def _spread_posterior(self) -> OneCoinPosterior | None:
        """A copy of the posterior with the spread refit under way completed (None: none is):
        what a verdict reads, the policy's own state untouched."""
        job = self._spread
        if job is None or job.applied:
            return None
        job = copy.copy(job)
        job.beliefs = tuple(np.array(x) for x in job.beliefs)  # type: ignore[assignment]
        job.scratch = tuple(np.array(x) for x in job.scratch)  # type: ignore[assignment]
        job.answered, job.pos = job.answered.copy(), job.pos.copy()
        while not job.step(1 << 40):
            pass
        post = copy.copy(self.posterior_)
        post.a, post.b, post.c, post.d = (np.array(x) for x in job.beliefs)
        item_only = self._incremental is not None or (
            bool(self.refit_tol) and job.n > self._exact_until
        )
        replay_labels(post, self._log[job.n : self._n_log], item_only)
        return post
