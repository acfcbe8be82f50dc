"""Bandit-based task assignment (BBTA): per-context Exp3 worker selection with weighted voting.

Zhang, Ma, Sugiyama, "Bandit-Based Task Assignment for Heterogeneous Crowdsourcing", Neural
Computation 27(11), 2015, §2, Algorithm 1.

Model. N tasks, each with a context s ∈ {0..S−1} (``Problem.contexts``; none
means one context), K workers, binary labels y ∈ {−1, +1} (our classes 0/1). Worker j
has a weight w_j^s per context; the aggregate of task i is the weighted vote (eq. 1)

    ȳ_i = Σ_j w_j^s y_ij / Σ_j' w_j'^s   (sum over all K workers; y_ij = 0 if missing),

whose magnitude |ȳ_i| ∈ [0, 1] is the task's confidence score.

Algorithm 1.
1. *Pure exploration* (lines 11–13): N' tasks per context (drawn uniformly with the policy's
   generator) are labeled by every worker; each is aggregated by majority vote (eq. 2) and the
   cumulative losses start as ``L^s_{j,0} = Σ_{i ∈ I_1^s} 1{y_ij ≠ ŷ_i}``. These tasks then leave.
2. *Adaptive assignment* (lines 16–27), one label per step: the available task of lowest
   confidence ``i_t = argmin |ȳ_i|`` (ties: see below); its context
   s: ``t^s += 1``, ``η = sqrt(ln K / (t^s K))``, ``w_j = exp(−η L^s_j)``, worker
   ``j_t ~ p_j = w_j / Σ w``; after the label, ``l = 1{ŷ_i ≠ y_ij}`` against the weighted vote of
   the task *including* the new label, and the importance-weighted loss ``l / p_{j_t}`` is added
   to ``L^s_{j_t}`` (line 22); the confidence scores of every task of context s are recomputed
   with the new weights (line 23); a task leaves once every worker has labeled it (line 24).
3. Output (line 28): ``ŷ_i = sign(ȳ_i)``.

Decisions where the paper is silent (the authors' code, github.com/justhao/bbta, agrees with
each of them):
- a worker labels a task at most once, so ``j_t`` is drawn from p restricted to the workers who
  have not labeled ``i_t`` (renormalised), and the importance weight uses that restricted p;
  on a replay (``state.pairs``) only workers with an unused recorded label are candidates;
- ``sign(0)``: a tied weighted vote is broken uniformly at random (the policy's generator) when
  computing a loss; final labels of tied (or unlabeled) tasks use one random bit per task drawn
  at ``reset``, so ``final_labels`` is a pure function of the campaign;
- the "current" weights of context s, used for confidence scores and final labels, are
  ``exp(−η^s L^s)`` with the context's latest η (η for t^s = 1 before its first step);
- ties of ``argmin |ȳ_i|``: every task without labels has ȳ = 0, so after the
  exploration the whole context ties. ``tie_break="random"`` (the default) picks uniformly
  among the tied tasks (confidences compared after
  :func:`~crowdbudget.policies._index.canonical_scores`, so last-bit noise of the weighted sums
  does not decide), in a context and then among contexts of equal best confidence; pull mode
  ranks equal confidences in random order. ``"first"`` takes the smallest task index (the
  paper's code: numpy's ``argmin``), what the ``bbta-*`` reproductions pin — with it the
  tasks are labeled in file order;
- the weights are shifted by ``min_j L^s_j`` before exponentiating (a common factor, so p and
  ȳ are unchanged) to avoid underflow when importance-weighted losses grow large.

Modes. **Push** is the paper's setting: the policy picks the task and the worker
(``chooses_workers``). **Pull** (a worker w arrives): w gets the first exploration task it has
not labeled, else the lowest-confidence available task it has not labeled; the loss is
importance-weighted by ``1 / (number of candidate workers of the task)``, the probability that w
is the one asked if arrivals are uniform (an adaptation: the paper has no pull mode).

Budget: one unit per label (Problem prices must be equal; otherwise ``reset`` raises).
Decisions do not depend on the total budget (T only ends the loop), so the runner records every
budget of a sweep along one run.

Data structures and cost. Labels are appended to a per-context log (item, worker, ±1); the
weighted sums ``num_`` (n_items,) are recomputed for the context of the step by one
``np.bincount`` over its log (line 23 changes every weight of that context: η changes with t^s,
so no incremental update exists); each context caches its lowest-confidence available task, and
the step's choice is the best of S cached minima. Per decision: O(labels and tasks of one
context), vectorised; other contexts cost nothing.

Example:
    >>> import numpy as np
    >>> from crowdbudget.types import Problem
    >>> from crowdbudget.types import CampaignState, LabelEvent
    >>> problem = Problem(n_items=4, budget=10, n_workers=3, contexts=[0, 1, 0, 1])
    >>> policy = BanditTaskAssignment(n_explore=0)
    >>> policy.reset(problem, np.random.default_rng(0))
    >>> a = policy.select(CampaignState.initial(problem))
    >>> (a.item, a.worker is not None)
    (0, True)
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np
from numba import njit

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies._index import (
    DEFAULT_TIE_BREAK,
    PAPER_TIE_BREAK,
    TieBreak,
    canonical_scores,
    check_tie_break,
)
from crowdbudget.policies.base import AllocationPolicy
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

CONTEXT_MODES = ("given", "single")


def exp3_learning_rate(t: int | IntArray, n_workers: int) -> FloatArray:
    """η_t = sqrt(ln K / (t K)) (Algorithm 1, line 19), for t >= 1."""
    t_arr = np.maximum(np.asarray(t, dtype=float), 1.0)
    return np.asarray(np.sqrt(math.log(n_workers) / (t_arr * n_workers)), dtype=float)


def _step_learning_rate(t: int, n_workers: int) -> float:
    """:func:`exp3_learning_rate` of one round t, on Python floats (the same operations, so
    the same bits, without the array round trip)."""
    return math.sqrt(math.log(n_workers) / (max(float(t), 1.0) * n_workers))


def exp3_weights(cumulative_loss: FloatArray, eta: float) -> FloatArray:
    """w_j = exp(−η L_j), shifted by min L (same probabilities, no underflow), shape (K,)."""
    loss = np.asarray(cumulative_loss, dtype=float)
    return np.asarray(np.exp(-eta * (loss - loss.min())), dtype=float)


def exp3_probabilities(cumulative_loss: FloatArray, eta: float) -> FloatArray:
    """p_j = w_j / Σ w (Algorithm 1, line 20), shape (K,)."""
    w = exp3_weights(cumulative_loss, eta)
    return w / w.sum()


def check_context_options(contexts: str, tie_break: object) -> None:
    """Refuse a bad ``contexts`` (one of :data:`CONTEXT_MODES`) or ``tie_break`` — the options
    BBTA and OptKG per context share."""
    if contexts not in CONTEXT_MODES:
        raise InvalidParameterError(
            f"contexts must be one of {', '.join(CONTEXT_MODES)}, got {contexts!r}"
        )
    check_tie_break(tie_break)


def check_unit_prices(problem: Problem, name: str) -> float:
    """The common price of a label; raise if workers have different prices."""
    prices = problem.worker_prices
    if prices is not None and not np.allclose(prices, prices[0]):
        raise InvalidParameterError(
            f"{name} spends one budget unit per label; workers with different prices are not "
            "supported"
        )
    return problem.price_of(0 if problem.n_workers else None)


@njit(cache=True, nogil=True)
def _weighted_sums(
    items: IntArray,
    workers: IntArray,
    signs: FloatArray,
    size: int,
    weights: FloatArray,
    members: IntArray,
    num: FloatArray,
) -> None:
    """``num[members[l]]`` = Σ_k w[workers[k]]·signs[k] over the first ``size`` log entries k
    of local task l (eq. 1's numerator): ``np.bincount(items, w[workers] * signs)``'s
    products and additions in the log's order, so the same bits."""
    sums = np.zeros(members.shape[0])
    for k in range(size):
        sums[items[k]] += weights[workers[k]] * signs[k]
    for local in range(members.shape[0]):
        num[members[local]] = sums[local]


@njit(cache=True, nogil=True)
def _first_lowest(num: FloatArray, members: IntArray, available: BoolArray) -> int:
    """``np.argmin(np.where(available[members], |num[members]|, inf))`` — the local index of
    the first entry of least value, a NaN counting as least as in ``np.argmin`` — or −1 when
    no member is available."""
    any_available = False
    first_nan = -1
    best_local = -1
    best = np.inf
    for local in range(members.shape[0]):
        item = members[local]
        value = np.inf
        if available[item]:
            any_available = True
            value = abs(num[item])
        if value != value:
            if first_nan < 0:
                first_nan = local
            continue
        if best_local < 0 or value < best:
            best_local = local
            best = value
    if not any_available:
        return -1
    return first_nan if first_nan >= 0 else best_local


@njit(cache=True, nogil=True)
def _lowest_context(score: FloatArray, item: IntArray) -> int:
    """``np.lexsort((item, score))[0]``: the context of least cached score (a NaN sorting
    last), ties by smallest task index, then by smallest context; shape (S,) each."""
    best = 0
    for s in range(1, score.shape[0]):
        x, y = score[s], score[best]
        if x != x:  # NaN: after every number; among NaNs by task index
            if y != y and item[s] < item[best]:
                best = s
        elif y != y or x < y or (x == y and item[s] < item[best]):
            best = s
    return best


class _PairIndex:
    """Which workers may still label each task: every worker (synthetic world, live campaign)
    or those with an unused recorded label (replay, ``state.pairs``), never a worker blocked
    under the live rules (``state.availability.blocked``: empty offline)."""

    def __init__(self, state: CampaignState, n_workers: int) -> None:
        pairs = state.pairs
        self.pairs = pairs
        self.availability = state.availability
        n = state.problem.n_items
        #: the pairs are the full grid, pair i·K + j = (i, j) (a simulated world,
        #: ``ContextualWorkerEnvironment``): a pair is found by its index, not searched
        self.dense = (
            pairs is not None
            and pairs.items.shape[0] == n * n_workers
            and bool(np.array_equal(pairs.items, np.repeat(np.arange(n), n_workers)))
            and bool(np.array_equal(pairs.workers, np.tile(np.arange(n_workers), n)))
        )
        if pairs is not None:
            # by item, then by worker: a task's candidates come out sorted, duplicates adjacent
            self.order = np.lexsort((pairs.workers, pairs.items))
            self.ptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.bincount(pairs.items, minlength=n), out=self.ptr[1:])
        self.n_workers = n_workers

    def candidates(self, item: int, asked: BoolArray) -> IntArray:
        """Workers who have not labeled ``item`` (``asked`` row) and may be asked now."""
        blocked = self.availability.blocked
        if blocked:  # a block is never lifted within a run: asked, as far as this task goes
            asked = asked.copy()
            asked[[w for w in blocked if w < asked.shape[0]]] = True
        if self.pairs is None:
            return np.flatnonzero(~asked)
        if self.dense:  # the grid's row of the task: sorted, no repeats, as below
            k = self.n_workers
            return np.flatnonzero((self.pairs.remaining[item * k : (item + 1) * k] > 0) & ~asked)
        idx = self.order[self.ptr[item] : self.ptr[item + 1]]
        idx = idx[self.pairs.remaining[idx] > 0]
        workers = self.pairs.workers[idx]
        workers = workers[~asked[workers]]
        if workers.shape[0] > 1:  # sorted (the order above): drop repeats, as np.unique
            repeat = np.zeros(workers.shape[0], dtype=bool)
            np.equal(workers[1:], workers[:-1], out=repeat[1:])
            workers = workers[~repeat]
        return workers

    def allows(self, item: int, worker: int) -> bool:
        if worker in self.availability.blocked:
            return False
        if self.pairs is None:
            return True
        if self.dense:
            return bool(self.pairs.remaining[item * self.n_workers + worker] > 0)
        idx = self.order[self.ptr[item] : self.ptr[item + 1]]
        hit = idx[self.pairs.workers[idx] == worker]
        return bool(hit.size and np.any(self.pairs.remaining[hit] > 0))


class _ContextLog:
    """Growable arrays of the labels of one context: local item index, worker, sign ±1."""

    def __init__(self) -> None:
        self.items = np.empty(64, dtype=np.int64)
        self.workers = np.empty(64, dtype=np.int64)
        self.signs = np.empty(64, dtype=float)
        self.size = 0

    def append(self, local_item: int, worker: int, sign: float) -> None:
        if self.size == self.items.shape[0]:
            grow = 2 * self.size
            self.items = np.resize(self.items, grow)
            self.workers = np.resize(self.workers, grow)
            self.signs = np.resize(self.signs, grow)
        self.items[self.size] = local_item
        self.workers[self.size] = worker
        self.signs[self.size] = sign
        self.size += 1


class BanditTaskAssignment(AllocationPolicy):
    """BBTA (Zhang, Ma, Sugiyama 2015, Algorithm 1); see the module docstring.

    Args:
        n_explore: N', tasks per context in the pure exploration phase (paper: 0, 1, 5, 10).
        contexts: ``"given"`` uses the problem's task contexts; ``"single"`` treats every task
            as one context (the paper's homogeneous RTE setting, S = 1).

    Fitted attributes (after ``reset``):
        contexts_: context per task, shape (n_items,); n_contexts_: S.
        cumulative_loss_: L^s_j, shape (S, K); rounds_: t^s, shape (S,); eta_: η^s, shape (S,).
        weights_: current w^s_j, shape (S, K); confidence_(): |ȳ_i|, shape (n_items,).
        explore_items_: the exploration tasks, shape (≤ S·N',).
    """

    chooses_workers = True
    binary_only = True
    needs_workers = True
    unit_prices_only = True
    #: select moves t^s and η^s, the exploration queue, the pairs asked, the cached lowest
    #: confidence per context and the probability of each pending draw
    keeps_select_state = True
    #: the rule the papers' reproductions pin (``registry.pin_paper_ties``)
    paper_tie_break: ClassVar[TieBreak] = PAPER_TIE_BREAK

    def __init__(
        self, n_explore: int = 1, contexts: str = "given", tie_break: TieBreak = DEFAULT_TIE_BREAK
    ) -> None:
        self.n_explore = n_explore
        self.contexts = contexts
        self.tie_break = tie_break

    def validate_params(self) -> None:
        if not isinstance(self.n_explore, int | np.integer) or self.n_explore < 0:
            raise InvalidParameterError(
                f"n_explore must be an integer >= 0, got {self.n_explore!r}"
            )
        check_context_options(self.contexts, self.tie_break)

    # ---- setup ------------------------------------------------------------------------------
    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.n_workers is None:
            raise InvalidParameterError(
                "BBTA chooses workers: the problem needs n_workers (anonymous workers are not "
                "supported)"
            )
        self.price_ = check_unit_prices(problem, "BBTA")
        n, k = problem.n_items, problem.n_workers
        if self.contexts == "given":
            self.contexts_, self.n_contexts_ = task_contexts(problem)
        else:
            self.contexts_, self.n_contexts_ = np.zeros(n, dtype=np.int64), 1
        s_count = self.n_contexts_
        self.n_workers_ = k
        self.members_ = [np.flatnonzero(self.contexts_ == s) for s in range(s_count)]
        self.local_ = np.empty(n, dtype=np.int64)
        for members in self.members_:
            self.local_[members] = np.arange(members.shape[0])
        self.cumulative_loss_ = np.zeros((s_count, k))
        self.rounds_ = np.zeros(s_count, dtype=np.int64)
        self.eta_ = np.full(s_count, float(exp3_learning_rate(1, k)))
        self.weights_ = np.ones((s_count, k))
        self._wsum = np.array([row.sum() for row in self.weights_])  # Σ_j w^s_j per context
        # the full weight vector select drew from, (context, η, loss version, w): the
        # refresh that follows the label reuses it when the context's losses did not move
        self._drawn: tuple[int, float, int, FloatArray] | None = None
        self._loss_version = np.zeros(s_count, dtype=np.int64)
        self._weights_eta = self.eta_.copy()
        self.num_ = np.zeros(n)
        self.logs_ = [_ContextLog() for _ in range(s_count)]
        self.asked_ = np.zeros((n, k), dtype=bool)
        self.n_asked_ = np.zeros(n, dtype=np.int64)
        self.available_ = np.ones(n, dtype=bool)
        self.tie_bits_ = rng.integers(0, 2, size=n).astype(np.int64)
        # exploration tasks (chosen now, from the policy's generator)
        chosen = [
            rng.choice(m, size=min(self.n_explore, m.shape[0]), replace=False)
            for m in self.members_
            if m.shape[0]
        ]
        self.explore_items_ = (
            np.concatenate(chosen).astype(np.int64) if chosen else np.zeros(0, dtype=np.int64)
        )
        self.available_[self.explore_items_] = False
        self._explore_queue: list[tuple[int, int]] | None = None  # built at the first select
        self._explore_expected: dict[int, int] = {}
        self._explore_labels: dict[int, list[tuple[int, float]]] = {}
        self._pending: dict[tuple[int, int], float] = {}
        self._best_item = np.full(s_count, -1, dtype=np.int64)
        self._best_score = np.full(s_count, np.inf)
        self._dirty = [True] * s_count  # a list: read per context each step, no array call
        self._pair_index: _PairIndex | None = None

    def _build(self, state: CampaignState) -> None:
        self._pair_index = _PairIndex(state, self.n_workers_)
        queue: list[tuple[int, int]] = []
        for item in self.explore_items_.tolist():
            workers = self._pair_index.candidates(item, self.asked_[item])
            self._explore_expected[item] = int(workers.shape[0])
            self._explore_labels[item] = []
            queue.extend((item, int(j)) for j in workers)
        self._explore_queue = queue

    # ---- scores -----------------------------------------------------------------------------
    def confidence_(self) -> FloatArray:
        """|ȳ_i| under the current weights, shape (n_items,)."""
        wsum = self.weights_.sum(axis=1)
        return np.asarray(np.abs(self.num_) / wsum[self.contexts_], dtype=float)

    def _refresh_context(self, s: int) -> None:
        """Line 23: current weights of context s and the weighted sums of its tasks."""
        eta = float(self.eta_[s])
        drawn = self._drawn
        if drawn is not None and drawn[:3] == (s, eta, int(self._loss_version[s])):
            self.weights_[s] = drawn[3]  # exp3_weights of the same losses and η: same bits
        else:
            self.weights_[s] = exp3_weights(self.cumulative_loss_[s], eta)
        self._wsum[s] = self.weights_[s].sum()
        self._weights_eta[s] = self.eta_[s]
        log = self.logs_[s]
        _weighted_sums(
            log.items,
            log.workers,
            log.signs,
            log.size,
            self.weights_[s],
            self.members_[s],
            self.num_,
        )
        self._dirty[s] = True

    def _context_best(self, s: int) -> None:
        members = self.members_[s]
        if self.tie_break == "first":
            local = _first_lowest(self.num_, members, self.available_)
            if local < 0:
                self._best_item[s], self._best_score[s] = -1, np.inf
            else:
                item = members[local]
                score = abs(self.num_[item]) if self.available_[item] else np.inf
                self._best_item[s] = item
                self._best_score[s] = score / self._wsum[s]
            self._dirty[s] = False
            return
        ok = self.available_[members]
        if not np.any(ok):
            self._best_item[s], self._best_score[s] = -1, np.inf
        else:
            scores = np.where(ok, np.abs(self.num_[members]), np.inf)
            local = int(np.argmin(scores))
            if self.tie_break == "random":
                rounded = canonical_scores(scores)
                tied = np.flatnonzero(rounded == rounded[local])
                if tied.shape[0] > 1:
                    local = int(tied[self.rng_.integers(tied.shape[0])])
            self._best_item[s] = members[local]
            self._best_score[s] = scores[local] / self._wsum[s]
        self._dirty[s] = False

    def _lowest_confidence(self, state: CampaignState) -> tuple[int, IntArray] | None:
        """The available task of lowest confidence that is eligible and has a candidate
        worker, with those candidates; drops tasks found unusable."""
        assert self._pair_index is not None
        while True:
            for s in [c for c, dirty in enumerate(self._dirty) if dirty]:
                self._context_best(s)
            if self.tie_break == "first":
                # smallest score; ties by smallest task index (argmin over all tasks); with
                # no task left every cached item is −1 (score ∞), the pick one of them
                s = _lowest_context(self._best_score, self._best_item)
            elif not np.any(self._best_item >= 0):
                return None
            else:
                rounded = canonical_scores(self._best_score)
                tied = np.flatnonzero(rounded == rounded.min())
                s = (
                    int(tied[self.rng_.integers(tied.shape[0])])
                    if tied.shape[0] > 1
                    else int(tied[0])
                )
            item = int(self._best_item[s])
            if item < 0:
                return None
            # push: a closed item (a control item under the live rules) is closed for good
            open_ = state.availability.is_open(item)
            if open_ and self.n_asked_[item] < self.n_workers_:
                workers = self._pair_index.candidates(item, self.asked_[item])
                if workers.shape[0]:
                    return item, workers
            self.available_[item] = False
            self._dirty[s] = True

    # ---- the contract -----------------------------------------------------------------------
    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if self._explore_queue is None:
            self._build(state)
        assert self._explore_queue is not None and self._pair_index is not None
        if not state.can_afford(self.price_):
            return None
        # pure exploration phase
        for pos, (item, j) in enumerate(self._explore_queue):
            if worker is not None and j != worker:
                continue
            if not state.eligible[item] or self.asked_[item, j]:
                continue
            if worker is None and not state.availability.is_open(item):
                continue  # push: closed for the run (control items under the live rules)
            if not self._pair_index.allows(item, j):
                continue
            del self._explore_queue[pos]
            self._mark_asked(item, j)
            return Assignment(item=item, worker=j, price=self.price_)
        if worker is not None:
            return self._select_pull(state, worker)
        found = self._lowest_confidence(state)
        if found is None:
            return None
        item, workers = found
        s = int(self.contexts_[item])
        self.rounds_[s] += 1
        self.eta_[s] = _step_learning_rate(int(self.rounds_[s]), self.n_workers_)
        full = exp3_weights(self.cumulative_loss_[s], float(self.eta_[s]))
        self._drawn = (s, float(self.eta_[s]), int(self._loss_version[s]), full)
        w = full[workers]
        cdf = np.cumsum(w)
        if not cdf[-1] > 0:
            # every candidate's weight underflowed (each far behind the context's best worker,
            # who is not a candidate of this task): the same probabilities, shifted by the
            # candidates' own least loss — without it p = 0/0 and the loss turned NaN
            w = exp3_weights(self.cumulative_loss_[s][workers], float(self.eta_[s]))
            cdf = np.cumsum(w)
        pick = int(np.searchsorted(cdf, self.rng_.random() * cdf[-1], side="right"))
        pick = min(pick, workers.shape[0] - 1)
        j = int(workers[pick])
        self._pending[(item, j)] = float(w[pick] / cdf[-1])
        self._mark_asked(item, j)
        return Assignment(item=item, worker=j, price=self.price_)

    def _select_pull(self, state: CampaignState, worker: int) -> Assignment | None:
        assert self._pair_index is not None
        scores = self.confidence_()
        ok = self.available_ & state.eligible & ~self.asked_[:, worker]
        candidates = np.flatnonzero(ok)
        if candidates.shape[0] == 0:
            return None
        if self.tie_break == "first":
            ranked = candidates[np.argsort(scores[candidates], kind="stable")]
        else:  # equal confidences in random order
            ranked = candidates[
                np.lexsort(
                    (self.rng_.random(candidates.shape[0]), canonical_scores(scores[candidates]))
                )
            ]
        for item in ranked.tolist():
            if not self._pair_index.allows(item, worker):
                continue
            n_candidates = self._pair_index.candidates(item, self.asked_[item]).shape[0]
            s = int(self.contexts_[item])
            self.rounds_[s] += 1
            self.eta_[s] = _step_learning_rate(int(self.rounds_[s]), self.n_workers_)
            self._pending[(item, worker)] = 1.0 / max(n_candidates, 1)
            self._mark_asked(item, worker)
            return Assignment(item=item, worker=worker, price=self.price_)
        return None

    def _mark_asked(self, item: int, worker: int) -> None:
        if not self.asked_[item, worker]:
            self.asked_[item, worker] = True
            self.n_asked_[item] += 1
        if self.n_asked_[item] >= self.n_workers_ and self.available_[item]:
            self.available_[item] = False
            self._dirty[int(self.contexts_[item])] = True

    def observe(self, event: LabelEvent) -> None:
        item, j = event.item, event.worker
        if not 0 <= j < self.n_workers_:
            return
        s = int(self.contexts_[item])
        sign = 1.0 if event.label == 1 else -1.0
        self._mark_asked(item, j)
        self.logs_[s].append(int(self.local_[item]), j, sign)
        if self._weights_eta[s] != self.eta_[s]:
            self._refresh_context(s)  # η moved at select time: w_{t^s} = exp(-η_{t^s} L_{t^s-1})
        else:
            self.num_[item] += self.weights_[s][j] * sign
            self._dirty[s] = True
        loss_changed = False
        if item in self._explore_labels:
            labels = self._explore_labels[item]
            labels.append((j, sign))
            if len(labels) == self._explore_expected[item]:
                # eq. (2): majority vote of all workers; loss 1 for each disagreeing worker
                vote = self._sign(sum(y for _, y in labels))
                for worker, y in labels:
                    if y != vote:
                        self.cumulative_loss_[s, worker] += 1.0
                        self._loss_version[s] += 1
                        loss_changed = True
        p = self._pending.pop((item, j), None)
        if p is not None and self._sign(float(self.num_[item])) != sign:
            # lines 21-22: weighted vote including the new label, importance-weighted loss
            self.cumulative_loss_[s, j] += 1.0 / p
            self._loss_version[s] += 1
            loss_changed = True
        if loss_changed:
            self._refresh_context(s)  # line 23

    def _sign(self, total: float) -> float:
        """sign(total), a tie broken uniformly at random."""
        if total != 0:
            return 1.0 if total > 0 else -1.0
        return 1.0 if self.rng_.random() < 0.5 else -1.0

    def final_labels(self, state: CampaignState) -> IntArray:
        """Line 28: sign of the weighted vote; ties and unlabeled tasks by ``tie_bits_``."""
        return np.where(self.num_ > 0, 1, np.where(self.num_ < 0, 0, self.tie_bits_)).astype(
            np.int64
        )


class RandomPairPolicy(AllocationPolicy):
    """The naive baseline of §5.1: a uniformly random available task, then a uniformly random
    worker among those who have not labeled it; majority vote (ties: one random bit per task,
    drawn at ``reset``). Pull mode: a random available task the arriving worker has not
    labeled."""

    chooses_workers = True
    binary_only = True
    needs_workers = True
    unit_prices_only = True
    keeps_select_state = True  # select marks its pair asked (kept when it is released)

    def __init__(self) -> None:
        pass

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.n_workers is None:
            raise InvalidParameterError("random-pair chooses workers: the problem needs n_workers")
        self.price_ = check_unit_prices(problem, "random-pair")
        self.asked_ = np.zeros((problem.n_items, problem.n_workers), dtype=bool)
        self.n_asked_ = np.zeros(problem.n_items, dtype=np.int64)
        self.tie_bits_ = rng.integers(0, 2, size=problem.n_items).astype(np.int64)
        self._pair_index: _PairIndex | None = None

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if self._pair_index is None:
            self._pair_index = _PairIndex(state, state.problem.n_workers or 1)
        if not state.can_afford(self.price_):
            return None
        k = self.asked_.shape[1]
        ok = state.eligible & (self.n_asked_ < k)
        if worker is not None:
            ok &= ~self.asked_[:, worker]
        items = np.flatnonzero(ok)
        while items.shape[0]:
            pos = int(self.rng_.integers(items.shape[0]))
            item = int(items[pos])
            if worker is not None:
                if self._pair_index.allows(item, worker):
                    self._ask(item, worker)
                    return Assignment(item=item, worker=worker, price=self.price_)
            else:
                workers = self._pair_index.candidates(item, self.asked_[item])
                if workers.shape[0]:
                    j = int(workers[int(self.rng_.integers(workers.shape[0]))])
                    self._ask(item, j)
                    return Assignment(item=item, worker=j, price=self.price_)
            items = np.delete(items, pos)
        return None

    def _ask(self, item: int, worker: int) -> None:
        if not self.asked_[item, worker]:
            self.asked_[item, worker] = True
            self.n_asked_[item] += 1

    def observe(self, event: LabelEvent) -> None:
        if 0 <= event.worker < self.asked_.shape[1]:
            self._ask(event.item, event.worker)

    def final_labels(self, state: CampaignState) -> IntArray:
        counts = state.label_counts
        return np.where(
            counts[:, 1] > counts[:, 0], 1, np.where(counts[:, 1] < counts[:, 0], 0, self.tie_bits_)
        ).astype(np.int64)
