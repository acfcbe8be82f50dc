"""KG and Opt-KG over (item, worker) pairs with one-coin or two-coin worker reliability.

Chen, Lin, Zhou (2013), §4: each worker j has a reliability ρ_j ~ Beta(c_j, d_j); the action is a
pair (i, j); the posterior of (θ_i, ρ_j) after a label is approximated by independent Betas
by moment matching (:mod:`crowdbudget.posteriors.one_coin`). The stage rewards of asking j about
i are ``R_z = h(I(a'_z, b'_z)) − h(I(a_i, b_i))`` for the two labels z; Opt-KG takes the pair of
largest ``max(R_1, R_0)``, KG the largest ``P(1) R_1 + P(0) R_0``.

Two-coin workers (§4, last paragraph): ρ_j1 (sensitivity) and ρ_j2 (specificity), each with a
Beta prior, posterior by moment matching (:mod:`crowdbudget.posteriors.two_coin`); the rewards
have the same form with the two-coin θ update (:class:`TwoCoinKnowledgeGradient`).

Ties. At the start every pair has the same score (every item Beta(1, 1), every worker the same
prior), and later many pairs share a state. Scores are rounded to 40 significant bits
(:func:`crowdbudget.policies._index.canonical_scores`) so mathematically equal rewards — e.g.
the symmetric item states (a, b) and (b, a) — tie exactly instead of being ordered by the
rounding of ``betainc``. ``tie_break="random"`` picks uniformly among the tied candidates,
``"first"`` the first candidate pair (items, then workers, in index order). The paper does not
say how it breaks ties; its Fig. 3(b) has error bars over 20 runs of the deterministic RTE
replay, so its policy was randomised: the registry's ``opt-kg:posterior=...`` uses random ties
(measurements: docs/decisions.md).

``refit=N`` (our variant, not in the paper; ``refit=10`` is the registry's default for
``posterior=one-coin``, ``refit=0`` the paper's rule that the reproductions name
— docs/reproductions.md, "The worker-aware default"): the online moment matching reads each
label with the worker belief of the moment it arrived — a worker's early labels are weighed with
the Beta(4, 1) prior and never re-read once the worker is known better. Every N labels the
variant re-reads all labels so far in three rounds of a variational-EM-like sweep inside the
paper's own model: (items) every item restarts from its prior and takes its labels in arrival
order by the paper's moment matching with the worker Betas held fixed; (workers) every worker's
Beta becomes prior + expected agreements with a noiseless worker, ``c_j = c0 + Σ P(agree)``,
``d_j = d0 + n_j − Σ P(agree)`` with P(agree) = E[θ_i] for a label 1 and 1 − E[θ_i] for a 0.
Then every available pair is rescored. Cost per refit: O(labels so far) plus one scoring pass.

``refit_growth=g`` (``refit-growth``; ours, default 0): after a refit at n labels the next is at
``n + max(N, ceil(g · n))`` (``refit_schedule``), so the refits re-read O(N/g² + T/g) labels in
all instead of T²/(2N); g = 0 is the fixed interval, decision for decision.

Refit variants (ours, non-default; what each was measured to do: docs/decisions.md):

- ``refit_items="exact"`` (``refit-items=exact``): the item step of a refit is order-free: with
  the workers fixed an item's posterior given its labels is a Beta mixture, computed exactly
  and matched to one Beta once (:func:`~crowdbudget.posteriors.one_coin.exact_item_beliefs`).
- ``refit_rounds`` (default 3), ``refit_final``: the Args below.
- ``refit_tol=t`` (t > 0): the incremental refit (:mod:`~crowdbudget.policies._refit_incremental`:
  a refit re-reads only the items with a new label and those of workers whose mean reliability
  moved by more than t, warm-started; between refits a label moves its item, not its worker):
  O(changed labels) per refit, beliefs within t of the full refit's reliabilities.
- ``refit_exact_until=N0``, ``refit_exact_growth=g``, ``refit_exact_items=r`` (with
  ``refit_tol`` > 0): full refits up to the exact phase — N0 labels, or with r > 0
  ``min(N0, max(2000, r · n_items))`` (``_refit_schedule.exact_phase``) — then incremental,
  and a full refit again whenever the labels grew by g since the last full one.
- ``refit_spread = B`` (an instance attribute; a live campaign's policy has it): a full refit
  computed over the labels after it, at most B units of work per label, its beliefs put in
  place when done with the labels since read again
  (:mod:`~crowdbudget.policies.worker_aware_refit`).

The registry's ``opt-kg:posterior=one-coin`` on two classes (sequential item step) has
``refit_tol=0.01``, ``refit_exact_until=10000``, ``refit_exact_items=1``,
``refit_exact_growth=0.1`` (``refit-tol=0``: every refit a full one; KG and CVaR-KG keep the
full refit unless ``refit-tol`` is named). The full refit every 10 labels costs O(T²/10) over
T labels, most of a 3,200-label RTE replay's time, while the early refits decide most: every
campaign up to its exact phase is the full refit's decision for decision (measured against
the full refit on rte, temp and trec: docs/decisions.md, "an exact phase by the problem's size").

The registry's default worker prior with a refit on two classes is Beta(16, 4), the paper's
mean worth 20 labels (``policies.builtin.REFIT_WORKER_PRIOR``; docs/reproductions.md, "A
stronger worker prior for the refit"); this class's own default is the paper's (4, 1).

The registry's default is read by the default verdict
(:data:`~crowdbudget.aggregation.registry.DEFAULT_VERDICT`; docs/stress-bed.md): the allocation
assumes one-coin workers and, with ``class_prior="gated"`` (the registry's default for Opt-KG
on two classes), a class prior learned from the labels where a lone label cannot overturn the
common class (uniform classes otherwise); the verdict reads the same labels with per-worker
confusion matrices and a learned class prior
(``OneCoinAnyClassKnowledgeGradient.default_verdict``).

Push mode chooses the pair; pull mode (``select(state, worker=j)``) chooses the item for the
arriving worker. On a replay only pairs with an unused recorded label are candidates
(``state.pairs``).

Cost: a label changes item i and worker j, so the scores of every pair of item i and of worker j
change: O(n_workers + n_items_of_worker) per label by the reference scan (``reference=True``).
The fast path (the default; one threshold for every item) keeps scores per item state and
worker reliability, per-worker bests, compiled kernels at d = 1/2, lazy per-worker rescoring
and a one-pass pull decision, and a push-mode Opt-KG choice on a replay from per-item bounds
(:mod:`~crowdbudget.policies._push_bounds`; there a label is one compiled call,
``_observe_compiled``), with the same decisions:
:mod:`~crowdbudget.policies._worker_aware_fast`. Two-coin and mixed thresholds keep the scan.

Ids: ``opt-kg:posterior=one-coin|two-coin``, ``kg:…``, ``cvar-kg:…:alpha=α`` (the old spelling
``workers=`` still reads, printing the new one once).
"""

from __future__ import annotations

import copy
from collections.abc import Collection

import numpy as np

from crowdbudget._lean_load import lean_loads
from crowdbudget._validation import check_probability
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies import (
    _class_prior,
    _one_coin_kernel,
    _push_bounds,
    _refit_incremental,
    worker_aware_refit,
)
from crowdbudget.policies._class_prior import ClassPriorSteps, check_class_prior
from crowdbudget.policies._index import TieBreak, check_tie_break, csr_groups
from crowdbudget.policies._pair_scores import WorkerBest
from crowdbudget.policies._push_bounds import observe_pushed
from crowdbudget.policies._refit_incremental import IncrementalRefitState
from crowdbudget.policies._refit_schedule import (
    check_refit_exact,
    check_refit_exact_items,
    check_refit_options,
    check_refit_tol,
    exact_phase,
    next_refit_at,
    refit_schedule,
)
from crowdbudget.policies._worker_aware_fast import SCAN, IncrementalPairScores
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.worker_aware_refit import RefitSteps
from crowdbudget.posteriors.base import kg_rewards, known_beta
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.posteriors.one_coin import (
    OneCoinPosterior,
    _theta_after,
    exact_item_beliefs,
    one_coin_update,
)
from crowdbudget.posteriors.two_coin import TwoCoinPosterior
from crowdbudget.types import Assignment, CampaignState, FloatArray, IntArray, LabelEvent, Problem

lean_loads(_one_coin_kernel, _push_bounds, _refit_incremental, _class_prior, worker_aware_refit)


class OneCoinKnowledgeGradient(
    ClassPriorSteps, RefitSteps, IncrementalPairScores, AllocationPolicy
):
    """(Optimistic) knowledge gradient over (item, worker) pairs, one-coin workers (§4).

    Args:
        optimistic: True for Opt-KG (max of the two rewards), False for KG (expectation).
        worker_prior: Beta(c, d) prior of every worker's reliability ρ_j (paper: (4, 1)).
        tie_break: ``"first"`` (first candidate pair) or ``"random"`` (uniform among the tied
            pairs, from the policy's generator); see the module docstring.
        refit: re-read all labels every this many labels (0: never; one-coin only).
        refit_growth: after a refit at n labels the next one is at
            ``n + max(refit, ceil(refit_growth · n))`` labels (0: every ``refit`` labels; > 0
            makes the refits' total cost linear-ish instead of quadratic, module docstring).
        alpha: None, or the CVaR level α of CVaR-KG (§3.2; 1: KG, 0: Opt-KG), which then
            replaces ``optimistic``: ``cvar-kg:posterior=one-coin``.
        refit_items: a refit's item step, ``"sequential"`` (the paper's moment matching label
            by label) or ``"exact"`` (all an item's labels at once; module docstring).
        refit_rounds: rounds of item and worker steps per refit (≥ 1).
        refit_final: the verdict reads a refit of a copy of the posterior when labels arrived
            since the last refit.
        refit_tol: 0 (the full refit), or > 0: the incremental refit with this tolerance on a
            worker's mean reliability (module docstring).
        refit_exact_until, refit_exact_items, refit_exact_growth: with ``refit_tol`` > 0, the
            exact phase (full refits up to the first refit past it; 0: none) and the growth of
            the labels since the last full refit that makes a full one (module docstring).
        class_prior: ``"none"`` (the problem's item prior throughout) or ``"gated"``: at
            every refit the items' prior becomes a class prior learned from the labels where
            a lone label cannot overturn the common class
            (:mod:`~crowdbudget.policies._class_prior`; needs ``refit``; with ``refit_tol``
            it moves at the full refits only).

    Fitted attributes:
        posterior_: the :class:`OneCoinPosterior` (item and worker Betas).
    """

    chooses_workers = True
    needs_workers = True

    worker_model = "one-coin"

    #: True (the compiled path): a label rescores its item's pairs at once and marks its
    #: worker's pairs stale; they are rescored when next read — at that worker's next request
    #: in pull mode, before any push-mode choice — and a refit marks every worker's. Scores are
    #: a function of the current beliefs, so the decisions are the eager path's (False), pair
    #: for pair and draw for draw; set on an instance before ``reset``
    lazy_workers = True

    #: True: the reference path (every pair of a changed item or worker rescored one by one,
    #: the argmax a scan over every pair) — the reference the fast path is tested against; set
    #: on an instance before ``reset``
    reference = False

    def __init__(
        self,
        optimistic: bool = True,
        worker_prior: tuple[float, float] = (4.0, 1.0),
        tie_break: TieBreak = "first",
        refit: int = 0,
        alpha: float | None = None,
        refit_growth: float = 0.0,
        refit_items: str = "sequential",
        refit_rounds: int = 3,
        refit_final: bool = False,
        refit_tol: float = 0.0,
        refit_exact_until: int = 0,
        refit_exact_growth: float = 0.0,
        class_prior: str = "none",
        refit_exact_items: float = 0.0,
    ) -> None:
        self.optimistic = optimistic
        self.worker_prior = worker_prior
        self.tie_break = tie_break
        self.refit = refit
        self.alpha = alpha
        self.refit_growth = refit_growth
        self.refit_items = refit_items
        self.refit_rounds = refit_rounds
        self.refit_final = refit_final
        self.refit_tol = refit_tol
        self.refit_exact_until = refit_exact_until
        self.refit_exact_growth = refit_exact_growth
        self.class_prior = class_prior
        self.refit_exact_items = refit_exact_items

    def validate_params(self) -> None:
        check_tie_break(self.tie_break)
        c, d = self.worker_prior
        if not (c > 0 and d > 0):
            raise InvalidParameterError(
                f"worker_prior must be two numbers > 0, got {self.worker_prior}"
            )
        check_refit_options(
            self.refit, self.refit_growth, self.refit_items, self.refit_rounds, self.worker_model
        )
        if self.alpha is not None:
            check_probability(self.alpha, "alpha")
        check_refit_tol(self.refit_tol, self.refit, self.worker_model, self.refit_items)
        check_refit_exact(self.refit_exact_until, self.refit_exact_growth, self.refit_tol)
        check_refit_exact_items(self.refit_exact_items, self.refit_tol)
        full = bool(self.refit_exact_until or self.refit_exact_growth or self.refit_exact_items)
        check_class_prior(self.class_prior, self.refit, self.refit_tol, full)

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.n_workers is None:
            raise InvalidParameterError(
                "a worker-aware policy needs a problem with workers (n_workers); "
                "use a homogeneous policy such as opt-kg for anonymous workers"
            )
        self._rng = rng
        self.posterior_: OneCoinPosterior | TwoCoinPosterior = self._make_posterior(problem)
        post = self.posterior_  # one-coin: the table kernel of I_{1/2} (_make_posterior)
        self._half_table = isinstance(post, OneCoinPosterior) and post.half_table
        self._pairs_built = False
        # the labels so far (for refit): rows (item, worker, label), grown by doubling
        self._log = np.empty((64, 3), dtype=np.int64)
        self._n_log = 0
        # the items with a label in the log, each once (a refit changes only their beliefs)
        self._labeled = np.zeros(problem.n_items, dtype=bool)
        self._labeled_items = np.empty(problem.n_items, dtype=np.int64)
        self._n_labeled = 0
        # the number of labels at which the next refit runs (refit_schedule)
        self._next_refit = self.refit
        self._last_refit = 0
        # the items' prior for a refit, with every control item's known class (None: none yet)
        self._known_prior: FloatArray | None = None
        self._reset_class_prior(problem)
        self._incremental: IncrementalRefitState | None = None
        self._spread = None  # a spread refit under way (refit_spread, worker_aware_refit)
        self._prior_columns = None
        # the label count of the last full refit (refit_exact_growth)
        self._last_full = 0
        # full refits up to the exact phase; the state is made at the first refit past it
        n0, items = self.refit_exact_until, self.refit_exact_items
        self._exact_until = exact_phase(n0, items, problem.n_items)
        if self.refit and self.refit_tol and not self._exact_until:
            c, d = self.worker_prior
            self._incremental = IncrementalRefitState(
                problem.n_items, problem.n_workers, float(c), float(d)
            )

    def _make_posterior(self, problem: Problem) -> OneCoinPosterior | TwoCoinPosterior:
        assert problem.n_workers is not None
        c, d = self.worker_prior
        post = OneCoinPosterior(
            problem.prior_array, (d, c), problem.n_items, problem.n_workers, problem.threshold_array
        )
        post.half_table = True  # the scoring's errors at d = 1/2: the compiled kernels' bits
        return post

    def _build_pairs(self, state: CampaignState) -> None:
        problem = state.problem
        assert problem.n_workers is not None
        if state.pairs is None:
            # every (item, worker): pair = item · m + worker, whose groups are known (what
            # csr_groups' stable sort gives, without sorting n_items · m keys)
            k, m = problem.n_items, problem.n_workers
            every = np.arange(k * m, dtype=np.int64)
            self._pair_items, self._pair_workers = np.divmod(every, m)
            self._remaining: IntArray | None = None
            self._item_ptr = np.arange(k + 1, dtype=np.int64) * m
            self._item_order = every
            self._worker_ptr = np.arange(m + 1, dtype=np.int64) * k
            self._worker_order = np.ascontiguousarray(every.reshape(k, m).T).reshape(-1)
        else:
            self._pair_items = np.ascontiguousarray(state.pairs.items, dtype=np.int64)
            self._pair_workers = np.ascontiguousarray(state.pairs.workers, dtype=np.int64)
            self._remaining = state.pairs.remaining
            self._item_ptr, self._item_order = csr_groups(self._pair_items, problem.n_items)
            self._worker_ptr, self._worker_order = csr_groups(self._pair_workers, problem.n_workers)
        post = self.posterior_
        self._item_error = self._current_errors()
        # Pairs of items in the same state (a, b) with the same worker have the same score bit
        # for bit — when every item has the same threshold: error_probability picks its
        # formula once per call, by all thresholds of the call, so with mixed thresholds a
        # value depends on what it is computed with, and the pairs are then scored in the
        # same groups as always. The state shared by many items is the prior (unlabeled).
        thresholds = post.thresholds
        prior = problem.prior_array
        self._share = bool(np.all(thresholds == thresholds[0])) and bool(np.all(prior == prior[0]))
        self._fresh_state = (float(prior[0, 1]), float(prior[0, 0]))
        self._half = bool(np.all(thresholds == 0.5))
        self._fresh = (post.a == self._fresh_state[0]) & (post.b == self._fresh_state[1])
        self._fresh &= self._share
        # the fast path: with one threshold for every item a pair's score is a function of the
        # item's state (a, b) and the worker's parameters alone, computed elementwise (the
        # formula of error_probability is then the same whatever else is in the call)
        self._fast = (
            bool(np.all(thresholds == thresholds[0])) and self._fused and not self.reference
        )
        # the fast path at d = 1/2 for Opt-KG and KG: compiled scoring (_one_coin_kernel)
        self._compiled = self._fast and self._half and self.alpha is None
        if self._compiled:
            self._item_error = self._compiled_item_errors()
        # workers whose pairs' scores are out of date (lazy_workers): a flag per worker and
        # the list of flagged ones, so a flush costs O(flagged), not O(n_workers)
        self._lazy = self._compiled and self.lazy_workers
        self._stale = np.zeros(problem.n_workers, dtype=bool)
        self._stale_list: list[int] = []
        if self._compiled:
            self._number_states()
        if self._lazy:
            # every worker stale: a pull choice computes its worker's scores itself, a push
            # choice rescores the stale workers first — the same scores when read
            self._scores = np.full(self._pair_items.shape[0], -np.inf)
            self._prepare_fused()
            self._stale[:] = True
            self._stale_list = list(range(problem.n_workers))
            self._best = WorkerBest(
                self._scores, self._worker_ptr, self._worker_order, refresh=False
            )
        elif self._fast:
            self._scores = np.full(self._pair_items.shape[0], -np.inf)
            self._rescore_all()
            self._best = WorkerBest(self._scores, self._worker_ptr, self._worker_order)
        else:
            self._scores = np.empty(self._pair_items.shape[0])
            self._rescore(np.arange(self._pair_items.shape[0]))
        self._init_push_bounds()
        self._pairs_built = True

    def _score_pairs(self, pairs: IntArray) -> FloatArray:
        """Scores of ``pairs`` from the posterior's look-ahead of those (item, worker) pairs:
        the rewards ``now − error_after`` of the two labels, then the max (Opt-KG) or the
        expectation (KG), rounded to 40 bits."""
        items = self._pair_items[pairs]
        look = self.posterior_.lookahead(self._pair_workers[pairs], items=items)
        rewards = kg_rewards(look, self._item_error[items])
        p1, p0 = look.label_probabilities[:, 1], look.label_probabilities[:, 0]
        return self._combine(rewards[:, 1], rewards[:, 0], p1, p0)

    def _rescore(self, pairs: IntArray) -> None:
        """Recompute the scores of ``pairs``; pairs of an unlabeled item share one score per
        worker, so each worker's are scored once (when sharing is exact, see _build_pairs)."""
        fresh = self._fresh[self._pair_items[pairs]]
        if not fresh.any():
            self._scores[pairs] = self._score_pairs(pairs)
            return
        shared = pairs[fresh]
        _, first, inverse = np.unique(
            self._pair_workers[shared], return_index=True, return_inverse=True
        )
        own = pairs[~fresh]
        scores = self._score_pairs(np.concatenate([own, shared[first]]))
        self._scores[own] = scores[: own.shape[0]]
        self._scores[shared] = scores[own.shape[0] :][inverse]

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        """The best available pair (of ``worker``, in pull mode) whose item is not in
        ``state.availability`` closes (live: the worker's own items; items with work pending
        last)."""
        availability = state.availability
        return availability.search(lambda: self._choose(state, worker, availability.closed))

    def _choose(
        self, state: CampaignState, worker: int | None, excluded: Collection[int]
    ) -> Assignment | None:
        if not self._pairs_built:
            self._build_pairs(state)
        if self._compiled and worker is not None:
            pair = self._choose_pull_compiled(state, worker, excluded)
            if pair is None:
                return None
            if pair != SCAN:
                return self._assignment(state, pair)
        # push mode under the live rules: blocked workers and held pairs shut (a scan)
        shut_any = worker is None and bool(
            state.availability.blocked or state.availability.worker_items
        )
        excluded_any = bool(excluded) or shut_any
        if self._bounded and worker is None and not excluded_any:
            pair = self._choose_push_bounded(state)
            if pair != SCAN:
                return self._assignment(state, pair)
        if self._lazy:
            self._flush(worker)
        if self._fast and worker is None and not excluded_any:
            fast = self._choose_fast(state)
            if fast is not None:
                return self._assignment(state, fast)
        if worker is not None:
            lo, hi = self._worker_ptr[worker], self._worker_ptr[worker + 1]
            candidates = self._worker_order[lo:hi]
        else:
            candidates = None
        scores = self._scores if candidates is None else self._scores[candidates]
        items = self._pair_items if candidates is None else self._pair_items[candidates]
        if self._remaining is not None and state.eligible.all():
            # the usual case: no gather of the eligibility over every pair (8,000 on RTE)
            ok = (self._remaining if candidates is None else self._remaining[candidates]) > 0
        else:
            ok = state.eligible[items]
            if self._remaining is not None:
                ok &= (self._remaining if candidates is None else self._remaining[candidates]) > 0
        if excluded:
            # O(candidates): one worker's pairs in pull mode (n_items of them)
            ok &= ~np.isin(items, np.fromiter(excluded, dtype=np.int64, count=len(excluded)))
        if shut_any and candidates is None:
            shut = state.availability.pairs_shut(self._pair_items, self._pair_workers)
            if shut is not None:
                ok &= ~shut
        if not np.any(ok):
            return None
        masked = np.where(ok, scores, -np.inf)
        best = int(np.argmax(masked))
        if self.tie_break == "random":
            tied = np.flatnonzero(masked == masked[best])
            if tied.shape[0] > 1:
                best = int(tied[self._rng.integers(tied.shape[0])])
        pair = best if candidates is None else int(candidates[best])
        return self._assignment(state, pair)

    def _assignment(self, state: CampaignState, pair: int) -> Assignment | None:
        chosen_worker = int(self._pair_workers[pair])
        price = state.problem.price_of(chosen_worker)
        if not state.can_afford(price):
            return None
        return Assignment(item=int(self._pair_items[pair]), worker=chosen_worker, price=price)

    def observe(self, event: LabelEvent) -> None:
        self._observe_label(event)
        if self._spread is not None:
            self._spread_step()  # a spread refit's next slice (worker_aware_refit)

    def _observe_label(self, event: LabelEvent) -> None:
        if self._pairs_built and self._push_active and event.label in (0, 1):
            self._spread_finish()  # push choices from bounds: refits at once
            self._observe_compiled(event)
            return
        post = self.posterior_
        if self._incremental is None:
            post.update(event)
        else:
            # refit_tol: the label moves the item (the paper's moment matching); the worker's
            # Beta moves at the refits only, from its statistics (module docstring)
            assert isinstance(post, OneCoinPosterior)
            c, d = post.c[event.worker], post.d[event.worker]
            post.update(event)
            post.c[event.worker], post.d[event.worker] = c, d
        if self.refit:
            if self._n_log == self._log.shape[0]:
                self._log = np.concatenate([self._log, np.empty_like(self._log)])
            self._log[self._n_log] = (event.item, event.worker, event.label)
            self._n_log += 1
            if not self._labeled[event.item]:
                self._labeled[event.item] = True
                self._labeled_items[self._n_labeled] = event.item
                self._n_labeled += 1
            if self._n_log >= self._next_refit and self._refit_now():
                return  # the refit refreshed what the label changed
        if not self._pairs_built:
            return
        i, j = event.item, event.worker
        post = self.posterior_
        a, b = float(post.a[i]), float(post.b[i])
        if self._half:
            # error_probability at d = 1/2 for one item, without its array machinery
            self._item_error[i] = self._half_error_of(a, b)
        else:
            self._item_error[i] = error_probability(a, b, post.thresholds[i])
        if self._fast:
            if not self._observe_all_stale(i, j):
                self._observe_fast(i, j)
            return
        if self._share:
            self._fresh[i] = (a, b) == self._fresh_state
        changed = np.concatenate(
            [
                self._item_order[self._item_ptr[i] : self._item_ptr[i + 1]],
                self._worker_order[self._worker_ptr[j] : self._worker_ptr[j + 1]],
            ]
        )
        if self._remaining is not None:
            # used-up pairs stay masked forever in select(); their stale scores are never read
            changed = changed[self._remaining[changed] > 0]
        if self._share:
            self._rescore(changed)
        else:
            self._scores[changed] = self._score_pairs(changed)

    def _observe_all_stale(self, i: int, j: int) -> bool:
        """:meth:`_observe_fast` when every worker's pairs are stale (lazy compiled path, no
        push bounds: after a refit, and from then on in pull mode, whose choices do not flush
        them): item i's moments and state number, worker j's reliability — the same bits —
        and no pair rescored, as every pair of item i is rescored when read (the flush) and
        stale workers' bests are recomputed there. False: not that case."""
        if not (self._lazy and not self._push_active and self._stale.all()):
            return False
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior)  # the compiled path is one-coin's
        self._moments_of(i, float(post.a[i]), float(post.b[i]))
        c, d = float(post.c[j]), float(post.d[j])
        self._reliability[j] = c / (c + d)
        self._state_ids[i] = self._n_states  # a new number, as _observe_fast's
        self._n_states += 1
        if self._n_states > 2 * self._state_ids.shape[0] + 64:
            self._number_states()  # keep the per-state table O(n_items)
        return True

    def _refit_now(self) -> bool:
        """The refit a label made due: the next one scheduled, then the incremental refit
        (``refit_tol``, once its state exists) or the full one. False: the beliefs are not
        refreshed — a spread refit under way (it stands for this one: the first label after
        it starts the next) or just started (``refit_spread``, worker_aware_refit)."""
        if self._spread is not None:
            return False
        self._next_refit = next_refit_at(self._n_log, self.refit, self.refit_growth)
        if self._incremental is not None:
            self._refit_incremental()
        else:
            self._refit_beliefs(self.refit_rounds)
        return self._spread is None

    def _observe_compiled(self, event: LabelEvent) -> None:
        """:meth:`observe` once push choices read the bounds (one-coin, compiled, d = 1/2): the
        posterior update, the log, the item's error and moments, the worker's reliability and
        the stale marks in one compiled call (:func:`~crowdbudget.policies._push_bounds.
        observe_pushed`: the same operations, the same bits), the refit as :meth:`observe`'s."""
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior)  # the push bounds are one-coin's
        i, j = event.item, event.worker
        if self.refit and self._n_log == self._log.shape[0]:
            self._log = np.concatenate([self._log, np.empty_like(self._log)])
        counts = self._observe_counts
        counts[0], counts[1], counts[2] = self._n_log, self._n_labeled, self._n_states
        code = observe_pushed(
            (i, j, event.label),
            self._incremental is None,
            self._next_refit if self.refit else 0,
            (post.a, post.b, post.c, post.d, self._moments, self._reliability, self._item_error),
            self._log,
            counts,
            self._labeled,
            self._labeled_items,
            (self._state_ids, self._stale),
            self._observe_csr,
            self._fresh_workers,
        )
        self._n_log, self._n_labeled = int(counts[0]), int(counts[1])
        if code < 0:  # a refit is due: it refreshes what the label changed
            self._refit_now()
            return
        self._n_states = int(counts[2])
        if self._n_states > 2 * self._state_ids.shape[0] + 64:
            self._number_states()  # keep the per-state table O(n_items)
        if not self._push_rebuild:
            self._push_dirty.append(i)
            # a worker whose reliability did not move (refit_tol) keeps its other bounds
            if code & 1 and not self._push_stale_mark[j]:
                self._push_stale_mark[j] = True
                self._push_stale.append(j)
        if code > 1:
            self._stale_list.extend(self._fresh_workers[: code >> 1].tolist())

    def refit_schedule(self, n_labels: int) -> list[int]:
        """The label counts (≤ ``n_labels``) after which this policy refits; [] if refit=0
        (:func:`~crowdbudget.policies._refit_schedule.refit_schedule`)."""
        return refit_schedule(n_labels, self.refit, self.refit_growth)

    def observe_known(self, event: LabelEvent, truth: int) -> None:
        """A control answer: the item's Beta (and its prior in every later refit) becomes the
        known class's (:func:`~crowdbudget.posteriors.base.known_beta`), then the label is
        observed — so the worker's Beta gets a definite success or failure, in the sequential
        update and in every refit."""
        self._spread_finish()  # the known row changes the prior a spread refit reads
        self._prior_columns = None  # and the incremental refit's (written in place below)
        if self._known_prior is None:
            prior = self.problem_.prior_array
            self._known_prior = np.array(np.broadcast_to(prior, (self.problem_.n_items, 2)))
        a, b = known_beta(truth)
        self._known_prior[event.item] = (b, a)  # columns (b, a), as the problem's prior
        self.posterior_.know(event.item, truth)
        self.observe(event)

    def _refit_beliefs(self, n_rounds: int = 3) -> None:
        """Re-estimate every item and worker Beta from all labels (module docstring), then
        rescore every pair (``lazy_workers``: mark every worker's pairs stale)."""
        if n_rounds:
            if self._spread_start():
                return  # computed over the next labels (worker_aware_refit)
            self._reestimate_beliefs(n_rounds)
            self._sync_incremental()
        self._last_refit = self._n_log
        post = self.posterior_
        if not self._pairs_built:
            return
        if self._lazy:
            # the per-item and per-worker inputs of the scores now, the scores at the flush;
            # an item without a label is in its prior state before and after, so only the
            # labeled items' moments, errors and state numbers change
            self._refresh_labeled_items()
            self._after_refit_lazy()
            return
        if self._fast and self._compiled:
            self._item_error = self._compiled_item_errors()
            self._number_states()
        else:
            self._item_error = self._current_errors()
        if self._fast:
            self._rescore_all()
            self._best.refresh(np.arange(post.n_workers, dtype=np.int64))
            return
        if self._share:
            self._fresh = (post.a == self._fresh_state[0]) & (post.b == self._fresh_state[1])
        every = np.arange(self._pair_items.shape[0])
        if self._remaining is not None:
            every = every[self._remaining > 0]
        if self._share:
            self._rescore(every)
        else:
            self._scores[every] = self._score_pairs(every)

    def _after_refit_lazy(self) -> None:
        """A refit's end on the lazy compiled path, the labelled items refreshed: the
        unlabelled items' state (a moved class prior), the push bounds to rebuild, every
        worker's pairs stale."""
        self._refresh_prior_state()
        if self._bounded:
            self._push_rebuild = True
            self._push_dirty = []
            self._push_stale_mark[self._push_stale] = False
            self._push_stale = []
        self._stale[:] = True
        self._stale_list = list(range(self.posterior_.n_workers))

    def _reestimate_beliefs(self, n_rounds: int) -> None:
        """The refit's rounds (module docstring): every item and worker Beta of
        ``posterior_`` re-estimated from the labels so far (new arrays, none changed in place)."""
        self._update_class_prior()
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior)
        log = self._log[: self._n_log]
        items, workers, labels = log[:, 0], log[:, 1], log[:, 2]
        prior = self.problem_.prior_array if self._known_prior is None else self._known_prior
        c0, d0 = self.worker_prior
        if self.refit_items == "sequential" and not self.reference:
            # the rounds below compiled (the same operations in the same order per item)
            from crowdbudget.policies._one_coin_kernel import reestimate

            post.a, post.b, post.c, post.d = reestimate(
                np.ascontiguousarray(items),
                np.ascontiguousarray(workers),
                np.ascontiguousarray(labels),
                np.ascontiguousarray(prior[:, 1], dtype=float),
                np.ascontiguousarray(prior[:, 0], dtype=float),
                np.ascontiguousarray(post.c, dtype=float),
                np.ascontiguousarray(post.d, dtype=float),
                float(c0),
                float(d0),
                int(n_rounds),
            )
            return
        answered = np.bincount(workers, minlength=post.n_workers)
        order = np.argsort(items, kind="stable")
        starts = np.searchsorted(items[order], items[order], side="left")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.shape[0]) - starts
        by_rank = [np.flatnonzero(rank == k) for k in range(int(rank.max()) + 1)]
        positive = labels == 1
        for _ in range(n_rounds):
            # items: the prior, then each item's labels in arrival order with the workers
            # fixed; rank k of every item at once (an item appears once per rank)
            a, b = prior[:, 1].copy(), prior[:, 0].copy()
            if self.refit_items == "exact":
                reliability = post.c / (post.c + post.d)
                a, b = exact_item_beliefs(a, b, items, labels, reliability[workers])
            elif self.reference:
                for sel in by_rank:
                    i, j = items[sel], workers[sel]
                    a[i], b[i], _, _, _ = one_coin_update(
                        a[i], b[i], post.c[j], post.d[j], labels[sel]
                    )
            else:
                # the item half of one_coin_update only (the same operations: _theta_after)
                reliability = post.c / (post.c + post.d)
                for sel in by_rank:
                    i, up = items[sel], positive[sel]
                    ai, bi = a[i], b[i]
                    na, nb, _ = _theta_after(
                        np.where(up, ai, bi), np.where(up, bi, ai), reliability[workers[sel]]
                    )
                    a[i], b[i] = np.where(up, na, nb), np.where(up, nb, na)
            post.a, post.b = a, b
            # workers: prior + expected agreements with a noiseless worker, P = E[θ] or 1 − E[θ]
            mean = a[items] / (a[items] + b[items])
            right = np.bincount(
                workers, weights=np.where(labels == 1, mean, 1.0 - mean), minlength=post.n_workers
            )
            post.c = np.asarray(c0 + right, dtype=float)
            post.d = np.asarray(d0 + (answered - right), dtype=float)

    def _final_posterior(self) -> OneCoinPosterior | TwoCoinPosterior:
        """The posterior the verdict reads: with ``refit_final`` and labels since the last
        refit, a refit of a copy (the policy's own beliefs, and so its next choices, are
        unchanged — a verdict may be asked mid-campaign)."""
        pending = self._spread_posterior()  # a spread refit under way, completed on a copy
        if not (self.refit and self.refit_final and self._n_log > self._last_refit):
            return self.posterior_ if pending is None else pending
        saved = self.posterior_
        kept = self._class_prior_state()
        self.posterior_ = copy.copy(saved)
        try:
            self._reestimate_beliefs(self.refit_rounds)
            return self.posterior_
        finally:
            self.posterior_ = saved
            self._class_prior_state(kept)

    def final_labels(self, state: CampaignState) -> IntArray:
        return self._final_posterior().predict()

    def final_probabilities(self, state: CampaignState) -> FloatArray:
        final = self._final_posterior()
        if final is self.posterior_:
            return super().final_probabilities(state)
        assert isinstance(final, OneCoinPosterior)
        return final.class_probabilities()


class TwoCoinKnowledgeGradient(OneCoinKnowledgeGradient):
    """(Optimistic) knowledge gradient over (item, worker) pairs, two-coin workers (§4).

    Each worker has a sensitivity ρ_j1 ~ Beta(c, d) and a specificity ρ_j2 ~ Beta(c, d)
    (the same prior for both, default the paper's Beta(4, 1)); the item posterior after a label
    is the two-coin moment match (:mod:`crowdbudget.posteriors.two_coin`). Everything else
    (pairs, push and pull mode, replay restrictions, ties) is as
    :class:`OneCoinKnowledgeGradient`.

    Measured behaviour (RTE replay, random ties): the *optimistic* rule does poorly with two
    coins — 0.72 at 1,600 labels and 0.87 at 3,200 (5 replays), below one-coin Opt-KG (0.84,
    0.917). Opt-KG scores a pair by its better label, and a worker with a lopsided posterior
    (high sensitivity, low specificity) has one very informative but unlikely answer, so the
    optimistic rule keeps asking the lopsided workers. The expected-reward rule does not have
    this bias: ``kg:posterior=two-coin:tie-break=random`` measured 0.856 at 800 and 0.893 at
    1,600 labels (2 replays), the best of the worker-aware rules at small budgets. The paper
    only names the two-coin extension (§4) and reports no numbers for it.

    Fitted attributes:
        posterior_: the :class:`~crowdbudget.posteriors.two_coin.TwoCoinPosterior`.
    """

    worker_model = "two-coin"

    # two-coin keeps the scan path: on RTE its pairs share no (item state, worker) key (272
    # pairs rescored per label either way), so the incremental structures only add their cost
    # (measured: ~10% slower)
    _fused = False

    def _make_posterior(self, problem: Problem) -> OneCoinPosterior | TwoCoinPosterior:
        assert problem.n_workers is not None
        c, d = self.worker_prior
        return TwoCoinPosterior(
            problem.prior_array, (d, c), problem.n_items, problem.n_workers, problem.threshold_array
        )
