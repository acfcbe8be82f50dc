"""The incremental scoring of the one-coin worker-aware KG policies (the fast path of
:class:`~crowdbudget.policies.worker_aware.OneCoinKnowledgeGradient`, ``reference=False``).

A label changes item i and worker j, so the scores of every pair of item i and of worker j
change. Savings that change no decision: the current error of each item is kept per item
(``_item_error``); on a replay a pair with no unused record left is never rescored
(``remaining`` only decreases). With one threshold for every item (benchmarks/README.md,
"worker-aware KG per label") a pair's score is a function of the item's state (a, b) and the
worker's mean reliability alone, computed elementwise, so (i) pairs sharing a (state,
reliability) key are scored once, bit for bit the same; (ii) the look-ahead is fused — the Beta
moments of both orientations are kept per item, the reliability per worker, and a rescoring is
the operations of ``OneCoinPosterior.lookahead`` in the same order (same bits); (iii) the
push-mode argmax reads per-worker bests (:class:`~crowdbudget.policies._pair_scores.
WorkerBest`: each worker's best score and its multiplicity; item i's other workers updated in
O(1) each, compiled: :func:`~crowdbudget.policies._one_coin_kernel.update_worker_bests`)
instead of masking every pair, the tied pairs gathered in pair order so the tie draw is the
scan's.

At d = 1/2, for Opt-KG and KG (``_compiled``), the rescoring, the items' errors, the moments and
the refit's rounds run compiled (:mod:`~crowdbudget.policies._one_coin_kernel`: the same
operations in the same order, the same bits), and a worker's pairs are rescored lazily
(``lazy_workers``: just before a choice reads them, not at the label or the refit that changed
them — the same scores when read, so the same decisions). Three more savings there, none
changing a decision:

- **A pull-mode decision is one compiled pass** over the asking worker's pairs
  (:func:`~crowdbudget.policies._one_coin_kernel.choose_for_worker`): their rescoring if the
  worker is stale, the worker's best, and the argmax past the items it may not be asked, with
  the scan's tie set. The rescoring is keyed by an item *state number* (``_state_ids``: equal
  numbers, equal (a, b)), so the score of each distinct state is computed once and every other
  pair is a load and a store. A live campaign of 10^4 items keeps most items in a few states,
  so a stale worker costs O(n_items) memory traffic plus two ``betainc`` per distinct state —
  not two hash look-ups per pair.
- **A refit refreshes only the labeled items.** The refit restarts every item from its prior
  and re-reads its labels: an item without a label is in its prior state before and after, so
  its moments, current error and state number are unchanged; only the labeled items' are
  recomputed (:func:`~crowdbudget.policies._one_coin_kernel.refresh_items`, one ``betainc`` per
  distinct labeled state), O(labels) instead of O(n_items) per refit.
- A label gives its item a new state number without a look-up (a state equal to another's under
  a different number is scored twice, never wrongly shared); the numbering is redone when the
  numbers outgrow twice the items.

Weighed and not used (docs/decisions.md, "Worker-aware default at service speed"): a refit
schedule by evidence (a changed schedule changes the decisions, and so the accuracy, which every
bundled set would have to re-measure) and bounds on a state's score. The Opt-KG score is
monotone in the worker's reliability ρ on [1/2, 1] and symmetric in ρ ↔ 1 − ρ up to rounding,
so the score at the largest reliability bounds every worker's score of a state; with a
campaign's items in a hundred or so states and reliabilities close together, that bound keeps
nearly every state, and the per-state pass above already costs one score per state. KG's
expected reward is not monotone in ρ, so it has no such bound.

A push-mode Opt-KG choice on a replay (``bounded_push``) reads per-item bounds in a segment
tree instead of the per-worker bests (:mod:`~crowdbudget.policies._push_bounds`): after a
refit every worker's bests need every live pair rescored, the bounds one score per item. Once
push choices read the bounds, a label updates the item's moments and state number and marks
the item's workers stale (``_observe_pushed``) — the kept pair scores and per-worker bests
are rescored only if a scan reads them.

Two-coin and mixed thresholds keep the scan path (``reference=True`` forces it;
tests/test_worker_aware_speed.py checks the paths decide alike, tests/test_one_coin_kernel.py
the kernels' bits).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from scipy import special

from crowdbudget import _betainc_half_table
from crowdbudget._betainc_half_table import betainc_half_small, half_error
from crowdbudget._lean_load import lean_loads
from crowdbudget.policies._index import TieBreak, canonical_scores
from crowdbudget.policies._one_coin_kernel import (
    choose_for_worker,
    fill_item_moments,
    fill_moments,
    item_errors,
    number_states,
    refresh_items,
    rescore_pairs,
    update_worker_bests,
)
from crowdbudget.policies._pair_scores import WorkerBest, representatives
from crowdbudget.policies._push_bounds import FALLBACK, push_choose
from crowdbudget.policies._refit_incremental import workers_of_items
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.posteriors.one_coin import _S_FLOOR, OneCoinPosterior, _beta_moments, _Real
from crowdbudget.posteriors.two_coin import TwoCoinPosterior
from crowdbudget.types import CampaignState, FloatArray, IntArray

lean_loads(_betainc_half_table)  # the NumPy path's loop over the table kernel (_lean_load)

#: what the compiled pull choice returns when the scan of ``_choose`` must decide
SCAN = -1

#: ``remaining`` of a world without a replay's records (every pair askable again)
_NO_REMAINING = np.empty(0, dtype=np.int64)
#: no items (or workers) changed since the last push choice
_NO_ITEMS = np.empty(0, dtype=np.int64)


def _orientation_moments(ta: _Real, tb: _Real) -> list[_Real]:
    """The six per-item moments the fused look-ahead reads for one orientation of the item
    (``(a, b)`` for a label 1, ``(b, a)`` for a label 0): E[θ], 1 − E[θ], E[θ²], E[θ³],
    E[θ(1−θ)], E[θ²(1−θ)] — arrays or Python floats, the same operations either way
    (:func:`~crowdbudget.posteriors.one_coin._beta_moments`), so both give the same bits."""
    m1, m2, m3, m1m, m21m = _beta_moments(ta, tb)
    return [m1, 1.0 - m1, m2, m3, m1m, m21m]


class IncrementalPairScores:
    """The fast path's methods, mixed into the worker-aware KG policy (module docstring).

    The attributes below are set by the policy (``reset``, ``_build_pairs``, ``observe``):
    pairs as parallel arrays and CSR groups per item and per worker, the kept scores, the
    per-worker bests, the stale workers, the labeled items and the policy's parameters.
    """

    posterior_: OneCoinPosterior | TwoCoinPosterior
    optimistic: bool
    tie_break: TieBreak
    alpha: float | None
    _rng: np.random.Generator
    _pair_items: IntArray
    _pair_workers: IntArray
    _remaining: IntArray | None
    _item_ptr: IntArray
    _item_order: IntArray
    _worker_ptr: IntArray
    _worker_order: IntArray
    _scores: FloatArray
    _item_error: FloatArray
    _half_table: bool  # the table kernel of I_{1/2} for the errors at d = 1/2 (one-coin)
    _best: WorkerBest
    _stale: np.ndarray
    _stale_list: list[int]
    _lazy: bool
    _compiled: bool
    _labeled_items: IntArray
    _n_labeled: int
    _bounded: bool
    _n_states: int
    _reliability: FloatArray

    #: True: a push-mode Opt-KG choice on a replay reads per-item bounds
    #: (:mod:`~crowdbudget.policies._push_bounds`) instead of every live pair's score — the
    #: same choices; False: the per-worker bests (the reference it is tested against); set on
    #: an instance before ``reset``
    bounded_push = True
    #: True: on a push-mode replay the campaign loop may take the labels between two refits in
    #: one compiled call once push choices read the bounds (:mod:`~crowdbudget.policies.
    #: _push_replay`, :mod:`crowdbudget.engine.replay_push`) — the same campaign; False: one
    #: label at a time through ``select`` and ``observe`` (the reference it is tested against)
    compiled_replay = True

    # the one-coin look-ahead fused: per item the Beta moments of both orientations are kept
    # (they change only with the item), per worker the mean reliability; a rescoring is then
    # ~40 array operations on (pairs, 2) — the operations of OneCoinPosterior.lookahead
    # (_theta_after, _match, error_probability, kg_rewards) in the same order, so the same bits
    _fused = True

    def _worker_keys(self) -> np.ndarray:
        """What a worker's pair scores depend on, one exact value per worker: the mean
        reliability c/(c+d) (the look-ahead reads nothing else of the worker)."""
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior)
        return post.c / (post.c + post.d)

    def _assign_states(self) -> None:
        """Number the distinct item states (a, b): ``_sid`` per item; states met later get new
        numbers from ``_sid_of`` (a state equal to one numbered here may get a second number:
        then its pairs are scored twice, never wrongly shared)."""
        post = self.posterior_
        pairs = np.ascontiguousarray(np.column_stack([post.a, post.b])).view(np.complex128)
        states, sid = np.unique(pairs.reshape(-1), return_inverse=True)
        self._sid = sid.reshape(-1).astype(np.int64)
        self._n_sids = int(states.shape[0])
        self._sid_of: dict[tuple[float, float], int] = {}
        self._table = np.empty(max(64, 2 * self._n_sids), dtype=np.int64)

    def _state_id(self, item: int, a: float, b: float) -> None:
        key = (a, b)
        sid = self._sid_of.get(key)
        if sid is None:
            sid = self._sid_of[key] = self._n_sids
            self._n_sids += 1
            if self._n_sids > self._table.shape[0]:
                self._table = np.empty(2 * self._n_sids, dtype=np.int64)
        self._sid[item] = sid

    def _live(self, pairs: IntArray) -> IntArray:
        """The pairs that can still be asked for good (a recorded label left); the others get
        score -inf (used-up replay pairs never come back)."""
        if self._remaining is None:
            return pairs
        alive = self._remaining[pairs] > 0
        if alive.all():
            return pairs
        self._scores[pairs[~alive]] = -np.inf
        return pairs[alive]

    def _rescore_all(self) -> None:
        """Score every live pair, each distinct (item state, worker parameters) once."""
        self._prepare_fused()
        if not self._compiled:
            self._assign_states()
        live = self._live(np.arange(self._pair_items.shape[0], dtype=np.int64))
        if live.shape[0] == 0:
            return
        if self._compiled:
            self._rescore_compiled(live)
            return
        _, rid = np.unique(self._worker_keys(), return_inverse=True)
        rid = rid.reshape(-1).astype(np.int64)
        n_r = int(rid.max()) + 1
        if self._uniform_half:
            self._rescore_oriented(live, rid, n_r)
            return
        keys = self._sid[self._pair_items[live]] * n_r + rid[self._pair_workers[live]]
        reps, inverse = representatives(keys, self._n_sids * n_r)
        self._scores[live] = self._score_fused(live[reps])[inverse]

    def _rescore_oriented(self, pairs: IntArray, rid: IntArray, n_r: int) -> None:
        """Score ``pairs`` (thresholds all 1/2) sharing the item half of the look-ahead between
        mirrored states: a label 0 on (a, b) is computed as a label 1 on (b, a) (the same
        operations on the same numbers), and at d = 1/2 the error is symmetric in (a', b'), so
        each distinct (oriented state, reliability) is computed once — ~20% fewer ``betainc``
        than one per distinct (state, reliability) pair on RTE's refits."""
        post = self.posterior_
        n_items = post.n_items
        # oriented states: (a, b) (a label 1) and (b, a) (a label 0) of every item
        both = np.empty((2 * n_items, 2))
        both[:n_items, 0], both[:n_items, 1] = post.b, post.a
        both[n_items:, 0], both[n_items:, 1] = post.a, post.b
        _, oid = np.unique(both.view(np.complex128).reshape(-1), return_inverse=True)
        oid = oid.reshape(-1).astype(np.int64)
        n_o = int(oid.max()) + 1
        k = pairs.shape[0]
        items, workers = self._pair_items[pairs], self._pair_workers[pairs]
        # entries 0..k-1: a label 0 of each pair, k..2k-1: a label 1
        keys = np.concatenate([oid[items], oid[items + n_items]]) * n_r + np.tile(rid[workers], 2)
        reps, inverse = representatives(keys, n_o * n_r)
        orient = reps // k
        at = reps - orient * k
        g = self._moments[items[at], orient]
        r = self._reliability[workers[at]]
        omr = 1.0 - r
        z1 = g[:, 0] * r + g[:, 1] * omr
        mean = (g[:, 2] * r + g[:, 4] * omr) / z1
        second = (g[:, 3] * r + g[:, 5] * omr) / z1
        spread = mean * (1.0 - mean)
        var = np.maximum(second - mean * mean, spread * 1e-15)
        s = np.maximum(spread / var - 1.0, _S_FLOOR)
        na, nb = mean * s, (1.0 - mean) * s
        err = self._half_errors(na, nb)
        now = self._item_error[items]
        r0 = now - err[inverse[:k]]
        r1 = now - err[inverse[k:]]
        p1 = z1[inverse[k:]]
        self._scores[pairs] = self._combine(r1, r0, p1, 1.0 - p1)

    def _mark_stale(self, worker: int) -> None:
        if not self._stale[worker]:
            self._stale[worker] = True
            self._stale_list.append(worker)

    def _flush(self, worker: int | None) -> None:
        """Rescore the stale pairs that a choice for ``worker`` (None: any worker, push mode)
        reads, and refresh those workers' bests."""
        if not self._stale_list:
            return
        if worker is not None:
            if not self._stale[worker]:
                return
            stale = np.array([worker], dtype=np.int64)
            self._stale_list.remove(worker)
        else:
            stale = np.array(self._stale_list, dtype=np.int64)
            self._stale_list = []
        self._stale[stale] = False
        if stale.shape[0] == self._stale.shape[0]:  # after a refit: every pair, in pair order
            pairs = np.arange(self._pair_items.shape[0], dtype=np.int64)
        else:
            pairs, _ = self._best.pairs_of(stale)
        pairs = self._live(pairs)
        if pairs.shape[0]:
            self._rescore_compiled(pairs)
        if stale.shape[0] == 1:
            self._best.refresh_one(int(stale[0]))
        else:
            self._best.refresh(stale)

    def _observe_fast(self, i: int, j: int) -> None:
        """Rescore item i's live pairs and worker j's (those by item state: one score per
        distinct state; with ``lazy_workers``, mark worker j's stale instead) and refresh the
        per-worker bests."""
        post = self.posterior_
        a, b = float(post.a[i]), float(post.b[i])
        if not self._compiled:
            self._state_id(i, a, b)
        if self._push_active:
            # the operations of _moments_of, compiled (the same bits)
            fill_item_moments(i, post.a, post.b, self._moments)
        else:
            self._moments_of(i, a, b)
        assert isinstance(post, OneCoinPosterior)
        c, d = float(post.c[j]), float(post.d[j])
        moved = self._reliability[j] != c / (c + d)
        self._reliability[j] = c / (c + d)
        if self._push_active:
            self._observe_pushed(i, j, moved)
            return
        own = self._item_order[self._item_ptr[i] : self._item_ptr[i + 1]]
        before = self._scores[own]
        every_own = own
        own = self._live(own)
        if self._compiled:
            # the item's new state: a new number (no look-up; equal states numbered apart are
            # only scored twice)
            self._state_ids[i] = self._n_states
            self._n_states += 1
            if self._n_states > 2 * self._state_ids.shape[0] + 64:
                self._number_states()  # keep the per-state table O(n_items)
        if self._lazy:
            self._rescore_compiled(own)
            self._mark_stale(j)
        elif self._compiled:
            theirs = self._live(self._worker_order[self._worker_ptr[j] : self._worker_ptr[j + 1]])
            self._rescore_compiled(np.concatenate([own, theirs]))
        else:
            theirs = self._live(self._worker_order[self._worker_ptr[j] : self._worker_ptr[j + 1]])
            reps, inverse = representatives(
                self._sid[self._pair_items[theirs]], self._n_sids, self._table
            )
            scores = self._score_fused(np.concatenate([own, theirs[reps]]))
            n_own = own.shape[0]
            self._scores[own] = scores[:n_own]
            self._scores[theirs] = scores[n_own:][inverse]
        # per-worker bests: worker j's pairs all changed; every other worker of item i had one
        # pair change (old -> new), an O(1) update unless its only best pair went down
        # (a stale worker's best is recomputed when flushed)
        best = self._best
        if not self._lazy:
            best.refresh_one(j)
        update_worker_bests(
            every_own,
            before,
            self._scores,
            self._pair_workers,
            j,
            self._stale,
            best.best,
            best.count,
            best.ptr,
            best.order,
        )

    def _rescore_compiled(self, pairs: IntArray) -> None:
        """``_scores[pairs]`` by the compiled pass (d = 1/2, Opt-KG or KG): the bits of
        :meth:`_score_fused`, each distinct (item state, reliability) evaluated once."""
        post = self.posterior_
        rescore_pairs(
            pairs,
            self._pair_items,
            self._pair_workers,
            np.ascontiguousarray(post.a, dtype=float),
            np.ascontiguousarray(post.b, dtype=float),
            self._moments,
            self._reliability,
            self._item_error,
            self.optimistic,
            self._scores,
        )

    def _refresh_beliefs(self, items: IntArray, workers: IntArray) -> None:
        """The moments, errors and state numbers of ``items`` and the reliabilities of
        ``workers`` re-read from the posterior (no pair marked, no bound touched)."""
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior)
        if items.shape[0]:
            self._n_states = refresh_items(
                items, post.a, post.b, self._moments, self._item_error, self._state_ids,
                self._n_states,
            )  # fmt: skip
            if self._n_states > 2 * self._state_ids.shape[0] + 64:
                self._number_states()  # keep the per-state table O(n_items)
        if workers.shape[0]:
            c, d = post.c[workers], post.d[workers]
            self._reliability[workers] = c / (c + d)

    def _refresh_changed(self, items: IntArray, workers: IntArray) -> None:
        """After an incremental refit (lazy compiled path): the moments, errors and new state
        numbers of the changed ``items``, the reliabilities of the changed ``workers``; the
        push bounds re-read those items and workers, and the workers of the changed items'
        pairs and the changed workers are marked stale (their kept pair scores are rescored
        when next read) — what a label does to its item and worker, for several at once."""
        self._refresh_beliefs(items, workers)
        if self._bounded and not self._push_rebuild:
            self._push_dirty.extend(items.tolist())
            fresh = workers[~self._push_stale_mark[workers]]
            self._push_stale_mark[fresh] = True
            self._push_stale.extend(fresh.tolist())
        out = np.empty(self._stale.shape[0], dtype=np.int64)
        n = workers_of_items(
            items, self._item_ptr, self._item_order, self._pair_workers, self._stale, out
        )
        fresh = workers[~self._stale[workers]]
        self._stale[fresh] = True
        self._stale_list.extend(out[:n].tolist())
        self._stale_list.extend(fresh.tolist())

    def _compiled_item_errors(self) -> FloatArray:
        """Every item's current error at d = 1/2 (``error_probability``'s bits), compiled."""
        post = self.posterior_
        out = np.empty(post.n_items)
        item_errors(
            np.ascontiguousarray(post.a, dtype=float),
            np.ascontiguousarray(post.b, dtype=float),
            out,
        )
        return out

    def _number_states(self) -> None:
        """Number every item's state (a, b) afresh (``_state_ids``: equal numbers, equal
        states), as the compiled pull decision keys its per-state errors."""
        post = self.posterior_
        self._state_ids = np.empty(post.n_items, dtype=np.int64)
        self._n_base_states = number_states(
            np.arange(post.n_items, dtype=np.int64),
            np.ascontiguousarray(post.a, dtype=float),
            np.ascontiguousarray(post.b, dtype=float),
            self._state_ids,
            0,
        )
        self._n_states = self._n_base_states

    def _refresh_labeled_items(self) -> None:
        """After a refit (compiled path): the moments, current errors and state numbers of the
        items with a label, and every worker's reliability. The other items restarted from
        their prior state and were in it before, so what they hold is what a full pass gives
        (the same operations on the same bits); their state numbers (from the last full
        numbering) stay valid, and the labeled items get numbers above those."""
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior)
        self._n_states = refresh_items(
            self._labeled_items[: self._n_labeled],
            np.ascontiguousarray(post.a, dtype=float),
            np.ascontiguousarray(post.b, dtype=float),
            self._moments,
            self._item_error,
            self._state_ids,
            self._n_base_states,
        )
        self._reliability = np.ascontiguousarray(post.c / (post.c + post.d), dtype=float)

    def _choose_pull_compiled(
        self, state: CampaignState, worker: int, excluded: Collection[int]
    ) -> int | None:
        """The pull-mode choice of the compiled path in one pass over ``worker``'s pairs
        (:func:`~crowdbudget.policies._one_coin_kernel.choose_for_worker`): the current
        score of each distinct item state for this worker, the argmax past the items that may
        not be asked — the scan of :meth:`_choose` pair for pair and draw for draw. The kept
        pair scores are neither read nor written (a stale worker stays stale, to be rescored
        if a push-mode choice reads it). Returns the pair, None (nothing askable), or
        ``SCAN``: let the scan decide (every askable pair at −∞, where the scan's tie set is
        not the askable pairs')."""
        lo, hi = int(self._worker_ptr[worker]), int(self._worker_ptr[worker + 1])
        pairs = self._worker_order[lo:hi]
        open_items = state.eligible
        if excluded:
            open_items = open_items.copy()
            open_items[np.fromiter(excluded, dtype=np.int64, count=len(excluded))] = False
        tied = np.empty(hi - lo, dtype=np.int64)
        n_open, n_tied, best = choose_for_worker(
            pairs,
            self._pair_items,
            self._remaining is None,
            self._state_ids,
            self._n_states,
            self._moments,
            float(self._reliability[worker]),
            self._item_error,
            self.optimistic,
            _NO_REMAINING if self._remaining is None else self._remaining,
            open_items,
            tied,
        )
        if n_open == 0:
            return None
        if best == -np.inf:
            return SCAN
        if self.tie_break == "random" and n_tied > 1:
            return int(pairs[tied[self._rng.integers(n_tied)]])
        return int(pairs[tied[0]])

    def _init_push_bounds(self) -> None:
        """The per-item bounds of the push choice (``bounded_push``), all to be built at the
        first choice: Opt-KG (its score is monotone in the reliability), compiled, lazy, on a
        replay (recorded pairs; a full grid keeps the per-worker bests)."""
        self._bounded = (
            self.bounded_push
            and self._lazy
            and self.optimistic
            and self.alpha is None
            and self._remaining is not None
        )
        self._push_active = False
        if not self._bounded:
            return
        n_items, n_workers = self.posterior_.n_items, self.posterior_.n_workers
        n_leaves = 1
        while n_leaves < max(n_items, 2):
            n_leaves *= 2
        self._push_tree = np.full(2 * n_leaves, -np.inf)
        self._push_extremes = np.full((n_items, 2), -2, dtype=np.int64)
        self._push_valid = np.zeros(n_items, dtype=bool)
        self._push_scratch = np.zeros(n_items, dtype=np.int8)
        self._push_tied = np.empty(self._pair_items.shape[0], dtype=np.int64)
        # the last tie set's (valid, top, threshold, best, size): push_choose's memo
        self._push_memo = np.zeros(5)
        self._push_stale_mark = np.zeros(n_workers, dtype=bool)
        self._push_rebuild = True
        self._push_dirty: list[int] = []
        self._push_stale: list[int] = []
        # the arguments the compiled calls take, built once (the arrays are kept in place)
        self._push_csr = (
            self._item_ptr,
            self._item_order,
            self._worker_ptr,
            self._worker_order,
            self._pair_items,
            self._pair_workers,
            self._remaining,
        )
        self._observe_csr = (self._item_ptr, self._item_order, self._pair_workers)
        self._observe_counts = np.zeros(3, dtype=np.int64)
        self._fresh_workers = np.empty(n_workers, dtype=np.int64)

    def _choose_push_bounded(self, state: CampaignState) -> int:
        """The push choice from the per-item bounds (:func:`~crowdbudget.policies.
        _push_bounds.push_choose`): the scan's pair and draw, or ``SCAN``."""
        assert self._remaining is not None
        post = self.posterior_
        dirty, stale = self._push_dirty, self._push_stale
        n_tied = push_choose(
            self._push_rebuild,
            np.array(dirty, dtype=np.int64) if dirty else _NO_ITEMS,
            np.array(stale, dtype=np.int64) if stale else _NO_ITEMS,
            self._push_csr,
            (
                np.ascontiguousarray(post.a, dtype=float),
                np.ascontiguousarray(post.b, dtype=float),
                self._reliability,
                self._item_error,
                self._scores,
            ),
            self._moments,
            self._push_extremes,
            self._push_tree,
            self._push_valid,
            state.eligible,
            self._push_scratch,
            self._push_tied,
            self._push_memo,
        )
        self._push_active = True
        self._push_rebuild = False
        self._push_dirty = []
        if stale:
            if len(stale) == 1:  # a label's worker: no index array for one flag
                self._push_stale_mark[stale[0]] = False
            else:
                self._push_stale_mark[stale] = False
            self._push_stale = []
        if n_tied == FALLBACK:
            return SCAN
        if self.tie_break == "random" and n_tied > 1:
            return int(self._push_tied[self._rng.integers(n_tied)])
        return int(self._push_tied[0])

    def _observe_pushed(self, i: int, j: int, moved: bool = True) -> None:
        """A label of (i, j) once push choices read the bounds: i and j go to the bounds'
        lists; the kept pair scores and per-worker bests (the pull path's SCAN and the scan
        fallback read them) are not updated now — every worker of item i (j among them) is
        marked stale instead, so a scan rescores their pairs first (``_flush``)."""
        if not self._push_rebuild:
            self._push_dirty.append(i)
            # a worker whose reliability did not move (refit_tol: moved at refits only) has
            # the same scores on its other items: no bound to re-read
            if moved and not self._push_stale_mark[j]:
                self._push_stale_mark[j] = True
                self._push_stale.append(j)
        self._state_ids[i] = self._n_states  # a new state number, as _observe_fast
        self._n_states += 1
        if self._n_states > 2 * self._state_ids.shape[0] + 64:
            self._number_states()
        workers = self._pair_workers[self._item_order[self._item_ptr[i] : self._item_ptr[i + 1]]]
        fresh = workers[~self._stale[workers]]
        if fresh.shape[0]:
            self._stale[fresh] = True
            self._stale_list.extend(fresh.tolist())

    def _choose_fast(self, state: CampaignState) -> int | None:
        """The pair the scan of :meth:`_choose` would pick (same ties, same draws), read from
        the per-worker bests; None: let the scan decide (no finite score left, or a tied pair
        whose item is not eligible now)."""
        best = self._best
        while True:
            top, tied = best.tied()
            if top == -np.inf:
                return None
            if self._remaining is not None:
                used = self._remaining[tied] <= 0
                if used.any():  # stale: used up since scored; gone for good
                    self._scores[tied[used]] = -np.inf
                    for w in np.unique(self._pair_workers[tied[used]]).tolist():
                        best.refresh_one(w)
                    continue
            if not state.eligible[self._pair_items[tied]].all():
                return None
            break
        if self.tie_break == "random" and tied.shape[0] > 1:
            return int(tied[self._rng.integers(tied.shape[0])])
        return int(tied[0])

    def _combine(
        self, r1: FloatArray, r0: FloatArray, p1: FloatArray, p0: FloatArray
    ) -> FloatArray:
        """The score of a pair from its two rewards and label probabilities."""
        if self.alpha is None and self.optimistic:
            return canonical_scores(np.maximum(r1, r0))
        kg = p1 * r1 + p0 * r0
        if self.alpha is None:
            return canonical_scores(kg)
        # CVaR-α of the two-point reward, as crowdbudget.posteriors.beta_bernoulli.cvar_reward
        p_max = np.where(r1 >= r0, p1, p0)
        q_max = np.minimum(1.0, p_max / max(self.alpha, 1e-300))
        return canonical_scores(kg + (q_max - p_max) * np.abs(r1 - r0))

    def _prepare_fused(self) -> None:
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior)
        self._moments = np.empty((post.n_items, 2, 6))
        # orientation 0: a label 0 (θ enters as 1 − θ: the swapped item), 1: a label 1; the
        # operations of _orientation_moments, compiled (the same bits)
        fill_moments(
            np.ascontiguousarray(post.a, dtype=float),
            np.ascontiguousarray(post.b, dtype=float),
            self._moments,
        )
        self._reliability = np.ascontiguousarray(post.c / (post.c + post.d), dtype=float)
        self._uniform_half = bool(np.all(post.thresholds == 0.5))
        self._threshold = float(post.thresholds[0])

    def _moments_of(self, item: int, a: float, b: float) -> None:
        """The per-item moments of one item (Python floats, the same operations)."""
        self._moments[item] = [_orientation_moments(ta, tb) for ta, tb in ((b, a), (a, b))]

    def _current_errors(self) -> FloatArray:
        """Every item's current error, shape (n_items,): ``error_probability`` of the item
        Betas, with the table kernel of I_{1/2} at d = 1/2 when the policy scores with it
        (``_half_table``: one-coin)."""
        post = self.posterior_
        return error_probability(post.a, post.b, post.thresholds, table=self._half_table)

    def _half_error_of(self, a: float, b: float) -> float:
        """One item's error at d = 1/2 (:meth:`_current_errors`'s value, without its array
        machinery): 1/2 where a = b, else I_{1/2}(max, min) by the table kernel or SciPy."""
        if a == b:
            return 0.5
        if self._half_table:
            return float(betainc_half_small(max(a, b), min(a, b)))
        return float(special.betainc(max(a, b), min(a, b), 0.5))

    def _half_errors(self, na: FloatArray, nb: FloatArray) -> FloatArray:
        """``error_probability`` at d = 1/2 of the look-ahead's Betas (na, nb), any common
        shape: 1/2 where na = nb, else I_{1/2}(max, min) — from the table kernel
        (:func:`~crowdbudget._betainc_half_table.half_error`, the compiled kernels' bits)
        when the policy scores with it (``_half_table``), else SciPy's ``betainc``."""
        if self._half_table:
            return np.asarray(half_error(na, nb), dtype=float)
        tail = special.betainc(np.maximum(na, nb), np.minimum(na, nb), 0.5)
        return np.asarray(np.where(na == nb, 0.5, tail), dtype=float)

    def _score_fused(self, pairs: IntArray) -> FloatArray:
        """:meth:`_score_pairs` of the one-coin model, bit for bit (see ``_fused``)."""
        items = self._pair_items[pairs]
        g = self._moments[items]
        r = self._reliability[self._pair_workers[pairs]][:, None]
        omr = 1.0 - r
        z1 = g[:, :, 0] * r + g[:, :, 1] * omr
        mean = (g[:, :, 2] * r + g[:, :, 4] * omr) / z1
        second = (g[:, :, 3] * r + g[:, :, 5] * omr) / z1
        spread = mean * (1.0 - mean)
        var = np.maximum(second - mean * mean, spread * 1e-15)
        s = np.maximum(spread / var - 1.0, _S_FLOOR)
        na, nb = mean * s, (1.0 - mean) * s
        if self._uniform_half:
            err = self._half_errors(na, nb)
        else:
            # the posterior after a label 0 is the swapped one: (a', b') = (nb, na)
            after_a, after_b = na.copy(), nb.copy()
            after_a[:, 0], after_b[:, 0] = nb[:, 0], na[:, 0]
            err = error_probability(after_a, after_b, self._threshold)
        rewards = self._item_error[items][:, None] - err
        p1 = z1[:, 1]
        return self._combine(rewards[:, 1], rewards[:, 0], p1, 1.0 - p1)
