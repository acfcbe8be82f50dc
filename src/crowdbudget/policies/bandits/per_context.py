"""OptKG per context (Zhang, Ma, Sugiyama, Neural Computation 2015, §5.1, "OptKG (Multi.)").

"We split the total budget and allocate a sub-budget to a context in proportion to the number
of tasks with this context [T · |tasks with context s| / N]. Then we can run an instance of a
homogeneous method for each context within the associated sub-budget." The homogeneous method
is OptKG with one-coin worker reliability (Chen, Lin, Zhou 2013, §4; ρ_j ~ Beta(4, 1), the
§5.1 setting): each context has its own instance, hence its *own* reliability posterior for
every worker — which is what lets it learn that a worker is good on one context only.

Implementation. One :class:`~crowdbudget.posteriors.one_coin.OneCoinPosterior` whose workers are
the (context, worker) pairs: worker j on a task of context s is the virtual worker s·K + j, so
the S instances share no parameter and behave exactly as S separate OptKG runs. The Opt-KG score
of asking j about i is ``max(R_1, R_0)`` (:func:`one_coin_rewards`); within a context the pair
of largest score is asked. Ties: ``tie_break="random"`` (the default) picks
uniformly among the pairs of the context with the largest score (scores compared after
:func:`~crowdbudget.policies._index.canonical_scores`); ``"first"`` the smallest pair index —
the rule the ``bbta-*`` reproductions pin. At the start every pair of a
context ties (every task at its prior, every worker at Beta(4, 1)), so with ``"first"`` the
first pairs in file order get the first labels and the result depends on the item order.

Speed. After a label from worker j on item i, the pairs of i and of the virtual
worker s·K + j are rescored: at d = 0.5 in one compiled pass over the two CSR groups
(:func:`_rescore_label`; the item's error through SciPy's own ``betainc``, the same bits as
``error_probability``), the item half of the moment-matched update and the outcomes' errors
through our own incomplete beta at 1/2 (:func:`~crowdbudget._compiled_special.betainc_half`;
``one_coin_update`` + ``error_probability`` within its 1e-12 relative accuracy, not bit for
bit) — one incomplete beta per pair where one outcome dominates the other
(:func:`_half_after_one`). The pairs are held grouped by context, so the best pair of a
context is one compiled masked argmax over a slice (:func:`_masked_best`; rescoring is eager;
why not lazy: docs/decisions.md).

Sub-budgets without knowing T. A run of the experiment runner records every budget of a sweep
along one campaign, so the policy cannot split a T it does not know. Instead it serves, at each
step, the context furthest below its share: ``argmax_s (n + 1) N_s / N − n_s`` (n labels
issued, n_s of them in context s; ties by smallest s; contexts with no askable pair are
skipped). After n labels every context has had its share ``n N_s / N`` up to one label, and as
the instances are independent, the state of context s is the state of a separate OptKG run
with that sub-budget — the same campaign as the paper's at every budget of the sweep.

``contexts="single"`` runs one instance over all tasks: plain OptKG with worker reliability.

Modes: push (the paper's) picks the pair; pull picks the best task for the arriving worker in
the most-behind context where that worker can still be asked. On a replay only pairs with an
unused recorded label are candidates (``state.pairs``); in a synthetic world without
``pairs`` a pair may be asked again.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from numba import njit

from crowdbudget._compiled_special import betainc as _betainc
from crowdbudget._compiled_special import betainc_half
from crowdbudget._compiled_special import maximum as _maximum
from crowdbudget._compiled_special import minimum as _minimum
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies._index import (
    DEFAULT_TIE_BREAK,
    PAPER_TIE_BREAK,
    TieBreak,
    canonical_scores,
    csr_groups,
)
from crowdbudget.policies._one_coin_kernel import canonical, matched_after
from crowdbudget.policies.bandits.bbta import check_context_options, check_unit_prices
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.posteriors.one_coin import (
    OneCoinPosterior,
    one_coin_rewards,
    one_coin_update,
)
from crowdbudget.types import (
    Assignment,
    BoolArray,
    CampaignState,
    FloatArray,
    IntArray,
    LabelEvent,
    Problem,
    task_contexts,
)


def _half_error(a: FloatArray, b: FloatArray) -> FloatArray:
    """P(Bayes label wrong) under Beta(a, b) at threshold 1/2 (the smaller tail), shape of a."""
    return error_probability(a, b, 0.5)


@njit(cache=True, nogil=True, inline="always")
def _smaller_tail(na: float, nb: float) -> float:
    """The error of Beta(na, nb) at 1/2: ``betainc_half(max, min)``, 1/2 exactly at na = nb."""
    return 0.5 if na == nb else betainc_half(_maximum(na, nb), _minimum(na, nb))


@njit(cache=True, nogil=True)
def _half_after_one(a: float, b: float, c: float, d: float) -> float:
    """``min(err(a₁, b₁), err(a₀, b₀))`` at d = 0.5 for one pair: (a_z, b_z) the item
    posterior after label z from a worker Beta(c, d) (:func:`matched_after`, both outcomes)
    and ``err`` the smaller tail at 1/2 (:func:`_smaller_tail`). Both orientations take the
    same steps, so mirrored states (a, b) and (b, a) give the same value; NaN propagates
    through the minimum as in ``np.minimum``.

    One incomplete beta where an outcome dominates: with hi = max and lo = min of an
    outcome's (a_z, b_z), the error ``I_{1/2}(hi, lo)`` is decreasing in hi and increasing in
    lo (Beta(hi, lo) is stochastically increasing in hi and decreasing in lo), so an outcome
    with hi at least and lo at most the other's has the smaller error, exactly — the other
    is not evaluated. (Numerically the two computed errors could be ordered the other way
    only where they agree to the kernel's 1e-12, below the scores' canonical rounding.)
    Equal (hi, lo) — the mirrored outcomes of a tied state — are the same computation."""
    r1 = c / (c + d)
    q1 = 1.0 - r1
    na1, nb1 = matched_after(a, b, r1, q1)  # a label 1
    nb0, na0 = matched_after(b, a, r1, q1)  # a label 0: the mirrored steps
    hi1, lo1 = _maximum(na1, nb1), _minimum(na1, nb1)
    hi0, lo0 = _maximum(na0, nb0), _minimum(na0, nb0)
    if hi1 >= hi0 and lo1 <= lo0:
        return _smaller_tail(na1, nb1)
    if hi0 >= hi1 and lo0 <= lo1:
        return _smaller_tail(na0, nb0)
    return _minimum(_smaller_tail(na1, nb1), _smaller_tail(na0, nb0))


@njit(cache=True, nogil=True)
def _half_after_all(a: FloatArray, b: FloatArray, c: FloatArray, d: FloatArray) -> FloatArray:
    out = np.empty(a.shape[0])
    for k in range(a.shape[0]):
        out[k] = _half_after_one(a[k], b[k], c[k], d[k])
    return out


def _half_after(a: FloatArray, b: FloatArray, c: FloatArray, d: FloatArray) -> FloatArray:
    """``min(err(a₁, b₁), err(a₀, b₀))`` at d = 0.5 elementwise (shape of a): the Opt-KG
    look-ahead of item Beta(a, b) asked of a worker Beta(c, d) (:func:`_half_after_one`);
    equal to :func:`one_coin_update` + :func:`_half_error` within the incomplete beta's
    accuracy (``betainc_half``: 1e-12 relative)."""
    arrays = (np.ascontiguousarray(x, dtype=float) for x in (a, b, c, d))
    return np.asarray(_half_after_all(*arrays))


@njit(cache=True, nogil=True)
def _half_scores(
    pairs: IntArray,
    items: IntArray,
    virtual: IntArray,
    a: FloatArray,
    b: FloatArray,
    c: FloatArray,
    d: FloatArray,
    now: FloatArray,
    out: FloatArray,
) -> None:
    """``out[k]`` = the canonical Opt-KG score of pair ``pairs[k]`` at d = 0.5: item
    ``items[p]``'s error now minus its best error after asking virtual worker ``virtual[p]``
    (:func:`_half_after_one`), rounded as :func:`canonical_scores` rounds."""
    for k in range(pairs.shape[0]):
        p = pairs[k]
        i = items[p]
        v = virtual[p]
        out[k] = canonical(now[i] - _half_after_one(a[i], b[i], c[v], d[v]))


@njit(cache=True, nogil=True)
def _half_error_one(a: float, b: float) -> float:
    """:func:`_half_error` of one state, the same bits: 1/2 where a = b, else SciPy's
    ``betainc(max, min, 1/2)`` (the very Boost ``ibeta`` its ufunc calls)."""
    if a == b:
        return 0.5
    return _betainc(_maximum(a, b), _minimum(a, b), 0.5, 0)


@njit(cache=True, nogil=True)
def _rescore_label(
    item: int,
    virtual: int,
    item_ptr: IntArray,
    item_order: IntArray,
    virt_ptr: IntArray,
    virt_order: IntArray,
    items: IntArray,
    virtuals: IntArray,
    a: FloatArray,
    b: FloatArray,
    c: FloatArray,
    d: FloatArray,
    now: FloatArray,
    scores: FloatArray,
) -> None:
    """After a label on ``item`` from ``virtual`` (d = 0.5): ``now[item]`` anew, then the
    canonical score of every pair of the item and of the virtual worker (the CSR groups
    ``order[ptr[k]:ptr[k + 1]]``, positions into ``items``/``virtuals``/``scores``, shape
    (n_pairs,)) — :func:`_half_scores` of those positions, one pass, no index arrays built.
    A pair in both groups is scored twice, to the same value."""
    now[item] = _half_error_one(a[item], b[item])
    # the look-ahead of the previous pair, reused when this pair's four parameters are the
    # same numbers (the items still at their prior, the workers not yet heard): same bits
    last = (np.nan, np.nan, np.nan, np.nan)
    after = np.nan
    for group in range(2):
        ptr = item_ptr if group == 0 else virt_ptr
        order = item_order if group == 0 else virt_order
        key = item if group == 0 else virtual
        for k in range(ptr[key], ptr[key + 1]):
            p = order[k]
            i = items[p]
            v = virtuals[p]
            here = (a[i], b[i], c[v], d[v])
            if here != last:
                after = _half_after_one(here[0], here[1], here[2], here[3])
                last = here
            scores[p] = canonical(now[i] - after)


@njit(cache=True, nogil=True)
def _masked_best(
    scores: FloatArray,
    items: IntArray,
    allowed: BoolArray,
    remaining: IntArray,
    perm: IntArray,
    lo: int,
    hi: int,
) -> tuple[int, int, float]:
    """The largest of ``scores[lo:hi]`` with −∞ at the pairs whose item is not ``allowed``
    or (``remaining`` non-empty) whose label is used up (``remaining[perm[p]]``, ``perm``
    empty: the identity): ``(at, n_tied, best)``, ``at`` the first position of the largest
    value relative to ``lo`` (``np.argmax`` of the masked slice) and ``n_tied`` how many
    positions hold it; ``at`` = −1 when no pair is allowed. Scores are canonical (never
    NaN), so ``>`` alone finds the first largest.

    A pair below the best so far can neither win nor tie, so its mask is read only for the
    others (the scores stream through; the masks are random reads). When the best is −∞ the
    masked-out pairs tie with it: then every pair's mask decides, as in the plain pass
    :func:`_masked_best_all`."""
    check = remaining.shape[0] > 0
    mapped = perm.shape[0] > 0
    best = -np.inf
    at = -1
    n_tied = 0
    for p in range(lo, hi):
        value = scores[p]
        if value < best or value == -np.inf:
            continue
        if not allowed[items[p]]:
            continue
        if check and remaining[perm[p] if mapped else p] <= 0:
            continue
        if value > best:
            best = value
            at = p - lo
            n_tied = 1
        else:
            n_tied += 1
    if at >= 0:
        return at, n_tied, best
    return _masked_best_all(scores, items, allowed, remaining, perm, lo, hi)


@njit(cache=True, nogil=True)
def _masked_best_all(
    scores: FloatArray,
    items: IntArray,
    allowed: BoolArray,
    remaining: IntArray,
    perm: IntArray,
    lo: int,
    hi: int,
) -> tuple[int, int, float]:
    """:func:`_masked_best` reading every pair's mask (the case of a best of −∞)."""
    check = remaining.shape[0] > 0
    mapped = perm.shape[0] > 0
    any_ok = False
    best = -np.inf
    at = 0
    n_tied = 0
    for p in range(lo, hi):
        ok = allowed[items[p]]
        if ok and check:
            ok = remaining[perm[p] if mapped else p] > 0
        value = scores[p] if ok else -np.inf
        any_ok = any_ok or ok
        if p == lo or value > best:
            best = value
            at = p - lo
            n_tied = 1
        elif value == best:
            n_tied += 1
    if not any_ok:
        return -1, 0, best
    return at, n_tied, best


@njit(cache=True, nogil=True)
def _nth_tied(
    scores: FloatArray,
    items: IntArray,
    allowed: BoolArray,
    remaining: IntArray,
    perm: IntArray,
    lo: int,
    hi: int,
    best: float,
    nth: int,
) -> int:
    """The position (relative to ``lo``) of the ``nth`` (from 0) masked score equal to
    ``best`` (:func:`_masked_best`'s mask), −1 if there are fewer."""
    check = remaining.shape[0] > 0
    mapped = perm.shape[0] > 0
    seen = 0
    for p in range(lo, hi):
        ok = allowed[items[p]]
        if ok and check:
            ok = remaining[perm[p] if mapped else p] > 0
        value = scores[p] if ok else -np.inf
        if value == best:
            if seen == nth:
                return p - lo
            seen += 1
    return -1


_EMPTY = np.zeros(0, dtype=np.int64)


class PerContextOptKG(AllocationPolicy):
    """OptKG with one-coin workers, one instance per context, sub-budgets ∝ context sizes.

    Args:
        worker_prior: Beta(c, d) prior of every worker's reliability per context (paper 4, 1).
        contexts: ``"given"`` (one instance per context) or ``"single"`` (one instance).
        tie_break: ``"random"`` (default) or ``"first"`` among equal pair scores (module
            docstring).

    Fitted attributes: posterior_ (virtual workers s·K + j), issued_ (labels per context),
    share_ (N_s / N), shape (S,).
    """

    chooses_workers = True
    binary_only = True
    needs_workers = True
    unit_prices_only = True
    #: the rule the papers' reproductions pin (``registry.pin_paper_ties``)
    paper_tie_break: ClassVar[TieBreak] = PAPER_TIE_BREAK

    def __init__(
        self,
        worker_prior: tuple[float, float] = (4.0, 1.0),
        contexts: str = "given",
        tie_break: TieBreak = DEFAULT_TIE_BREAK,
    ) -> None:
        self.worker_prior = worker_prior
        self.contexts = contexts
        self.tie_break = tie_break

    def validate_params(self) -> None:
        c, d = self.worker_prior
        if not (c > 0 and d > 0):
            raise InvalidParameterError(
                f"worker_prior must be two numbers > 0, got {self.worker_prior}"
            )
        check_context_options(self.contexts, self.tie_break)

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.n_workers is None:
            raise InvalidParameterError(
                "OptKG per context chooses workers: the problem needs n_workers"
            )
        self.price_ = check_unit_prices(problem, "opt-kg-per-context")
        if self.contexts == "given":
            self.contexts_, self.n_contexts_ = task_contexts(problem)
        else:
            self.contexts_, self.n_contexts_ = np.zeros(problem.n_items, dtype=np.int64), 1
        k = problem.n_workers
        self.n_workers_ = k
        c, d = self.worker_prior
        self.posterior_ = OneCoinPosterior(
            problem.prior_array,
            (d, c),
            problem.n_items,
            self.n_contexts_ * k,
            problem.threshold_array,
        )
        sizes = np.bincount(self.contexts_, minlength=self.n_contexts_).astype(float)
        self.share_ = sizes / sizes.sum()
        self.issued_ = np.zeros(self.n_contexts_, dtype=np.int64)
        self._half = bool(np.all(problem.threshold_array == 0.5))
        self._now = _half_error(self.posterior_.a, self.posterior_.b)
        self._built = False

    def _build(self, state: CampaignState) -> None:
        n, k = state.problem.n_items, self.n_workers_
        if state.pairs is None:
            items = np.repeat(np.arange(n, dtype=np.int64), k)
            workers = np.tile(np.arange(k, dtype=np.int64), n)
            self._remaining: IntArray | None = None
        else:
            items = state.pairs.items
            workers = state.pairs.workers
            self._remaining = state.pairs.remaining
        # internal layout: the pairs grouped by context, ascending pair index inside a context
        # (position p holds pair _perm[p]), so a context is a slice and "smallest position"
        # is "smallest pair index" wherever the argmax runs (inside one context)
        self._ctx_ptr, perm = csr_groups(self.contexts_[items], self.n_contexts_)
        identity = bool(np.array_equal(perm, np.arange(perm.shape[0])))
        self._perm: IntArray | None = None if identity else perm
        self._items = items if identity else items[perm]
        self._workers = workers if identity else workers[perm]
        self._virtual = self.contexts_[self._items] * k + self._workers
        self._item_ptr, self._item_order = csr_groups(self._items, n)
        self._virt_ptr, self._virt_order = csr_groups(self._virtual, self.n_contexts_ * k)
        self._scores = self._score(np.arange(self._items.shape[0]))
        self._built = True

    def _score(self, pairs: IntArray) -> FloatArray:
        post = self.posterior_
        if not self._half:
            i = self._items[pairs]
            v = self._virtual[pairs]
            r1, r0, _ = one_coin_rewards(
                post.a[i], post.b[i], post.c[v], post.d[v], post.thresholds[i]
            )
            return canonical_scores(np.maximum(r1, r0))
        # d = 0.5 fast path, one_coin_rewards' numbers within the incomplete beta's accuracy:
        # with lo <= hi the error min(I, 1 - I) is the smaller tail betainc(hi, lo, 1/2), the
        # item half of the moment-matched update fused, compiled (_half_scores); canonical:
        # the symmetric states (a, b) and (b, a), which tie mathematically, reach us with
        # last-bit noise from the moment matching; rounded, they tie exactly and the smallest
        # pair index wins instead of the noise
        out = np.empty(pairs.shape[0])
        _half_scores(
            np.ascontiguousarray(pairs, dtype=np.int64),
            self._items,
            self._virtual,
            post.a,
            post.b,
            post.c,
            post.d,
            self._now,
            out,
        )
        return out

    def _score_reference(self, pairs: IntArray) -> FloatArray:
        """:meth:`_score` through :func:`one_coin_update` and :func:`_half_error` (d = 0.5):
        the computation the fused path must reproduce bit for bit (tests)."""
        post = self.posterior_
        i = self._items[pairs]
        v = self._virtual[pairs]
        a1, b1, _, _, _ = one_coin_update(post.a[i], post.b[i], post.c[v], post.d[v], 1)
        a0, b0, _, _, _ = one_coin_update(post.a[i], post.b[i], post.c[v], post.d[v], 0)
        best_after = np.minimum(_half_error(a1, b1), _half_error(a0, b0))
        return canonical_scores(self._now[i] - best_after)

    def _best_in_context(
        self, allowed: BoolArray, s: int, worker: int | None
    ) -> tuple[int, int] | None:
        """The best-scored pair of context ``s`` (of ``worker`` when given) whose item is in
        ``allowed`` (shape (n_items,)) and, on a replay, has an unused label; None when there
        is none."""
        lo, hi = int(self._ctx_ptr[s]), int(self._ctx_ptr[s + 1])
        if worker is None:
            # one compiled pass over the context's slice: the same pair as the NumPy path
            # below (first largest masked score; the same tie draw)
            left = self._remaining if self._remaining is not None else _EMPTY
            perm = self._perm if self._perm is not None else _EMPTY
            args = (self._scores, self._items, allowed, left, perm, lo, hi)
            at, n_tied, best = _masked_best(*args)
            if at < 0:
                return None
            if self.tie_break == "random" and n_tied > 1:
                at = _nth_tied(*args, best, int(self.rng_.integers(n_tied)))
            return self._at(lo + at)
        scores = self._scores[lo:hi]
        items = self._items[lo:hi]
        remaining = None
        if self._remaining is not None:
            remaining = (
                self._remaining[lo:hi] if self._perm is None else self._remaining[self._perm[lo:hi]]
            )
        chosen = None
        if worker is not None:
            chosen = np.flatnonzero(self._workers[lo:hi] == worker)
            scores, items = scores[chosen], items[chosen]
            if remaining is not None:
                remaining = remaining[chosen]
        if scores.shape[0] == 0:
            return None
        if not (remaining is None and chosen is None and allowed.all()):
            ok = allowed[items]
            if remaining is not None:
                ok &= remaining > 0
            if not ok.any():
                return None
            if not ok.all():
                scores = np.where(ok, scores, -np.inf)
        at = int(np.argmax(scores))
        if self.tie_break == "random":
            tied = np.flatnonzero(scores == scores[at])
            if tied.shape[0] > 1:
                at = int(tied[self.rng_.integers(tied.shape[0])])
        return self._at(lo + (at if chosen is None else int(chosen[at])))

    def _at(self, position: int) -> tuple[int, int]:
        return int(self._items[position]), int(self._workers[position])

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if not self._built:
            self._build(state)
        if not state.can_afford(self.price_):
            return None
        total = int(self.issued_.sum())
        deficit = (total + 1) * self.share_ - self.issued_
        availability = state.availability
        for s in np.argsort(-deficit, kind="stable").tolist():
            found = self._best_in_context(state.eligible, s, worker)
            if found is not None and not availability.is_open(found[0]):
                # closed to this question (live: the asking worker's own item, a saturated
                # or control item): choose again among the open items only. The first try
                # reads the eligible items, so that every choice of an open item — every
                # choice offline — keeps its tie-break draw
                found = self._best_in_context(availability.open_mask(), s, worker)
            if found is not None:
                self.issued_[s] += 1
                return Assignment(item=found[0], worker=found[1], price=self.price_)
        return None

    def observe(self, event: LabelEvent) -> None:
        if not 0 <= event.worker < self.n_workers_:
            return
        s = int(self.contexts_[event.item])
        virtual = s * self.n_workers_ + event.worker
        self.posterior_.update(
            LabelEvent(item=event.item, worker=virtual, label=event.label, cost=event.cost)
        )
        i = event.item
        post = self.posterior_
        if self._built and self._half:
            _rescore_label(
                i,
                virtual,
                self._item_ptr,
                self._item_order,
                self._virt_ptr,
                self._virt_order,
                self._items,
                self._virtual,
                post.a,
                post.b,
                post.c,
                post.d,
                self._now,
                self._scores,
            )
            return
        self._now[i] = _half_error(post.a[i : i + 1], post.b[i : i + 1])[0]
        if not self._built:
            return
        changed = np.concatenate(
            [
                self._item_order[self._item_ptr[i] : self._item_ptr[i + 1]],
                self._virt_order[self._virt_ptr[virtual] : self._virt_ptr[virtual + 1]],
            ]
        )
        self._scores[changed] = self._score(changed)

    def final_labels(self, state: CampaignState) -> IntArray:
        """Bayes rule on each task's Beta posterior (Chen et al. §4)."""
        return self.posterior_.predict()
