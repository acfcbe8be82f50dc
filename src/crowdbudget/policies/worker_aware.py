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
say how it breaks ties; its Fig. 3(b) shows error bars over 20 runs of the RTE replay, which a
pair-choosing policy only has if it is randomised (the replay itself is deterministic once the
pair is chosen), so the registry's ``opt-kg:posterior=...`` uses random ties. Measured on RTE
(20 replays, 3,200 labels): random 0.917, first 0.909 (the first-pair rule sends every fresh
item to the lowest-numbered workers first, so fewer workers' reliabilities get learned).

``refit=N`` (our variant, not in the paper; ``refit=10`` is the registry's default for
``posterior=one-coin`` since issue 15, ``refit=0`` the paper's rule that the reproductions name
— docs/reproductions.md, "The worker-aware default"): the online moment matching reads each
label with the worker belief of the moment it arrived — a worker's early labels are weighed with
the Beta(4, 1) prior and never re-read once the worker is known better. Every N labels the
variant re-reads all labels so far in three rounds of a variational-EM-like sweep inside the
paper's own model: (items) every item restarts from its prior and takes its labels in arrival
order by the paper's moment matching with the worker Betas held fixed; (workers) every worker's
Beta becomes prior + expected agreements with a noiseless worker, ``c_j = c0 + Σ P(agree)``,
``d_j = d0 + n_j − Σ P(agree)`` with P(agree) = E[θ_i] for a label 1 and 1 − E[θ_i] for a 0. (A
Dawid–Skene EM in place of the item step was tried and fails: with one label per item its
maximum-likelihood class posteriors are certain, so every worker looks perfect.) Then every
available pair is rescored. Cost per refit: O(labels so far) vectorised plus one scoring pass
over the pairs.

Push mode chooses the pair; pull mode (``select(state, worker=j)``) chooses the item for the
arriving worker. On a replay only pairs with an unused recorded label are candidates
(``state.pairs``).

Cost: a label changes item i and worker j, so the scores of every pair of item i and of worker j
are recomputed (vectorised): O(n_workers + n_items_of_worker). Savings that change no decision
(issue 21): the current error of each item is kept per item (``_item_error``); on a replay a
pair with no unused record left is never rescored (``remaining`` only decreases); the scores
come from ``posterior.lookahead(workers, items=...)`` (DESIGN §11: the KG family parametrised
by a posterior), which computes only the item half of the moment matching, both labels in one
pass; pairs of unlabeled items share one score per worker (when every item has the same prior
and threshold); the posterior's own update runs in Python floats. ``betainc`` (two calls per
rescored pair) dominates what is left. The choice is an argmax over the candidate pairs
(vectorised, O(n_pairs)). RTE (8,000 pairs, 3,200 labels): about 0.15–0.25 ms per label, from
about 0.35 (benchmarks/bench_worker_aware.py).

Ids: ``opt-kg:posterior=one-coin|two-coin``, ``kg:…``, ``cvar-kg:…:alpha=α`` (the old spelling
``workers=`` still reads, printing the new one once).
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np
from scipy import special

from crowdbudget._validation import check_probability
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies._index import TieBreak, canonical_scores, check_tie_break, csr_groups
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.posteriors.base import kg_rewards
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.posteriors.one_coin import OneCoinPosterior, one_coin_update
from crowdbudget.posteriors.two_coin import TwoCoinPosterior
from crowdbudget.types import Assignment, CampaignState, FloatArray, IntArray, LabelEvent, Problem


class OneCoinKnowledgeGradient(AllocationPolicy):
    """(Optimistic) knowledge gradient over (item, worker) pairs, one-coin workers (§4).

    Args:
        optimistic: True for Opt-KG (max of the two rewards), False for KG (expectation).
        worker_prior: Beta(c, d) prior of every worker's reliability ρ_j (paper: (4, 1)).
        tie_break: ``"first"`` (first candidate pair) or ``"random"`` (uniform among the tied
            pairs, from the policy's generator); see the module docstring.
        refit: re-read all labels every this many labels (0: never; one-coin only).
        alpha: None, or the CVaR level α of CVaR-KG (§3.2; 1: KG, 0: Opt-KG), which then
            replaces ``optimistic``: ``cvar-kg:posterior=one-coin``.

    Fitted attributes:
        posterior_: the :class:`OneCoinPosterior` (item and worker Betas).
    """

    chooses_workers = True
    searches_past_excluded = True

    worker_model = "one-coin"

    def __init__(
        self,
        optimistic: bool = True,
        worker_prior: tuple[float, float] = (4.0, 1.0),
        tie_break: TieBreak = "first",
        refit: int = 0,
        alpha: float | None = None,
    ) -> None:
        self.optimistic = optimistic
        self.worker_prior = worker_prior
        self.tie_break = tie_break
        self.refit = refit
        self.alpha = alpha

    def validate_params(self) -> None:
        check_tie_break(self.tie_break)
        c, d = self.worker_prior
        if not (c > 0 and d > 0):
            raise InvalidParameterError(
                f"worker_prior must be two numbers > 0, got {self.worker_prior}"
            )
        if not (isinstance(self.refit, int) and self.refit >= 0):
            raise InvalidParameterError(
                f"refit must be an integer >= 0 (0: never), got {self.refit!r}"
            )
        if self.refit and self.worker_model != "one-coin":
            raise InvalidParameterError("refit is implemented for posterior=one-coin only")
        if self.alpha is not None:
            check_probability(self.alpha, "alpha")

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.n_workers is None:
            raise InvalidParameterError(
                "a worker-aware policy needs a problem with workers (n_workers); "
                "use a homogeneous policy such as opt-kg for anonymous workers"
            )
        self._rng = rng
        self.posterior_: OneCoinPosterior | TwoCoinPosterior = self._make_posterior(problem)
        self._pairs_built = False
        self._log: list[tuple[int, int, int]] = []

    def _make_posterior(self, problem: Problem) -> OneCoinPosterior | TwoCoinPosterior:
        assert problem.n_workers is not None
        c, d = self.worker_prior
        return OneCoinPosterior(
            problem.prior_array, (d, c), problem.n_items, problem.n_workers, problem.threshold_array
        )

    def _build_pairs(self, state: CampaignState) -> None:
        problem = state.problem
        assert problem.n_workers is not None
        if state.pairs is None:
            k, m = problem.n_items, problem.n_workers
            self._pair_items = np.repeat(np.arange(k, dtype=np.int64), m)
            self._pair_workers = np.tile(np.arange(m, dtype=np.int64), k)
            self._remaining: IntArray | None = None
        else:
            self._pair_items = state.pairs.items
            self._pair_workers = state.pairs.workers
            self._remaining = state.pairs.remaining
        post = self.posterior_
        self._item_error = error_probability(post.a, post.b, post.thresholds)
        self._item_ptr, self._item_order = csr_groups(self._pair_items, problem.n_items)
        self._worker_ptr, self._worker_order = csr_groups(self._pair_workers, problem.n_workers)
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
        self._scores = np.empty(self._pair_items.shape[0])
        self._rescore(np.arange(self._pair_items.shape[0]))
        self._pairs_built = True

    def _score_pairs(self, pairs: IntArray) -> FloatArray:
        """Scores of ``pairs`` from the posterior's look-ahead of those (item, worker) pairs:
        the rewards ``now − error_after`` of the two labels, then the max (Opt-KG) or the
        expectation (KG), rounded to 40 bits."""
        items = self._pair_items[pairs]
        look = self.posterior_.lookahead(self._pair_workers[pairs], items=items)
        rewards = kg_rewards(look, self._item_error[items])
        r1, r0 = rewards[:, 1], rewards[:, 0]
        if self.alpha is None and self.optimistic:
            return canonical_scores(np.maximum(r1, r0))
        p1, p0 = look.label_probabilities[:, 1], look.label_probabilities[:, 0]
        kg = p1 * r1 + p0 * r0
        if self.alpha is None:
            return canonical_scores(kg)
        # CVaR-α of the two-point reward, as crowdbudget.posteriors.beta_bernoulli.cvar_reward
        p_max = np.where(r1 >= r0, p1, p0)
        q_max = np.minimum(1.0, p_max / max(self.alpha, 1e-300))
        return canonical_scores(kg + (q_max - p_max) * np.abs(r1 - r0))

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
        ``state.excluded`` (live: the worker's own items and the items with work pending)."""
        return self._choose(state, worker, state.excluded)

    def _choose(
        self, state: CampaignState, worker: int | None, excluded: Collection[int]
    ) -> Assignment | None:
        if not self._pairs_built:
            self._build_pairs(state)
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
        if not np.any(ok):
            return None
        masked = np.where(ok, scores, -np.inf)
        best = int(np.argmax(masked))
        if self.tie_break == "random":
            tied = np.flatnonzero(masked == masked[best])
            if tied.shape[0] > 1:
                best = int(tied[self._rng.integers(tied.shape[0])])
        pair = best if candidates is None else int(candidates[best])
        chosen_worker = int(self._pair_workers[pair])
        price = state.problem.price_of(chosen_worker)
        if not state.can_afford(price):
            return None
        return Assignment(item=int(self._pair_items[pair]), worker=chosen_worker, price=price)

    def observe(self, event: LabelEvent) -> None:
        self.posterior_.update(event)
        if self.refit:
            self._log.append((event.item, event.worker, event.label))
            if len(self._log) % self.refit == 0:
                self._refit_beliefs()
                return
        if not self._pairs_built:
            return
        i, j = event.item, event.worker
        post = self.posterior_
        a, b = float(post.a[i]), float(post.b[i])
        if self._half:
            # error_probability at d = 1/2 for one item, without its array machinery
            self._item_error[i] = 0.5 if a == b else special.betainc(max(a, b), min(a, b), 0.5)
        else:
            self._item_error[i] = error_probability(a, b, post.thresholds[i])
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

    def _refit_beliefs(self, n_rounds: int = 3) -> None:
        """Re-estimate every item and worker Beta from all labels (module docstring)."""
        post = self.posterior_
        assert isinstance(post, OneCoinPosterior)
        log = np.asarray(self._log, dtype=np.int64)
        items, workers, labels = log[:, 0], log[:, 1], log[:, 2]
        prior = self.problem_.prior_array
        c0, d0 = self.worker_prior
        answered = np.bincount(workers, minlength=post.n_workers)
        order = np.argsort(items, kind="stable")
        starts = np.searchsorted(items[order], items[order], side="left")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.shape[0]) - starts
        by_rank = [np.flatnonzero(rank == k) for k in range(int(rank.max()) + 1)]
        for _ in range(n_rounds):
            # items: the prior, then each item's labels in arrival order with the workers
            # fixed; rank k of every item at once (an item appears once per rank)
            a, b = prior[:, 1].copy(), prior[:, 0].copy()
            for sel in by_rank:
                i, j = items[sel], workers[sel]
                a[i], b[i], _, _, _ = one_coin_update(a[i], b[i], post.c[j], post.d[j], labels[sel])
            post.a, post.b = a, b
            # workers: prior + expected agreements with a noiseless worker, P = E[θ] or 1 − E[θ]
            mean = a[items] / (a[items] + b[items])
            right = np.bincount(
                workers, weights=np.where(labels == 1, mean, 1.0 - mean), minlength=post.n_workers
            )
            post.c = np.asarray(c0 + right, dtype=float)
            post.d = np.asarray(d0 + (answered - right), dtype=float)
        if self._pairs_built:
            self._item_error = error_probability(post.a, post.b, post.thresholds)
            if self._share:
                self._fresh = (post.a == self._fresh_state[0]) & (post.b == self._fresh_state[1])
            every = np.arange(self._pair_items.shape[0])
            if self._remaining is not None:
                every = every[self._remaining > 0]
            if self._share:
                self._rescore(every)
            else:
                self._scores[every] = self._score_pairs(every)

    def final_labels(self, state: CampaignState) -> IntArray:
        return self.posterior_.predict()


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

    def _make_posterior(self, problem: Problem) -> OneCoinPosterior | TwoCoinPosterior:
        assert problem.n_workers is not None
        c, d = self.worker_prior
        return TwoCoinPosterior(
            problem.prior_array, (d, c), problem.n_items, problem.n_workers, problem.threshold_array
        )
