"""Requallo: requirement-based budget allocation (Li, Ma, Gao, Su, Quinn. *Crowdsourcing High
Quality Labels with a Tight Budget.* WSDM 2016, §3).

Model (§3.1). Item i has vote counts ``(a_i, b_i)`` (votes for +1 and −1, pseudo-votes
included, §3.3) and a requester's :class:`~crowdbudget.requirements.Requirement` with its
``r(x)`` (Table 2). Its *expected completeness* is (eq. 1)

    V(a, b) = P(Z=+1 | a, b) · (a+b)/r(b) + P(Z=−1 | a, b) · (a+b)/r(a),

with the modified estimate of eq. 2

    P(Z=+1 | a, b) = a/(a+b) + b/r(b)  if a > b;   1/2 if a = b;   a/(a+b) − a/r(a)  if a < b,

so that V = 1 exactly when the item meets the requirement. Decisions (our reading of the
paper, cited):

- A complete item has V = 1 (§3.1: "once the instance achieves the requirement, then the
  ratio becomes 1") and leaves: it is taken out of the index and never chosen again (we do
  not touch ``state.eligible``, which ``select`` may not modify).
- Both completeness ratios are clipped at 1 and P(Z) to [0, 1] (for incomplete states they
  already are: ``a/(a+b) + b/r(b) < 1`` when ``a + b < r(b)``).
- The stage reward is the optimistic ``max(R⁺¹, R⁻¹)`` (§3.1, after eq. 7) with
  ``R^{±1} = V(after a ±1 vote) − V(a, b)``; the policy labels the item of largest reward and
  **stops** (``select`` returns None, the rest of the budget is saved) when no item has a
  positive reward — Algorithm 1, line 1. In practice that happens when every item is
  complete (the caps ``max-labels`` / ``max-total`` guarantee it).
- Pseudo-labels (§3.3, "one pseudo-label for each class as the initial label"): every item
  starts at ``(a, b) = (pseudo, pseudo)`` (``pseudo_labels``, default 1). The vote-based rules
  see them as votes; the label-count rules count real labels (see
  :mod:`crowdbudget.requirements`).
- Multi-class (§3.3): the class with the most votes is +1, the runner-up −1; the state is
  ``(top + pseudo, second + pseudo)``. Final labels are the plurality (majority vote, §3.1
  "determine the final label by majority voting"), exact ties broken by per-item random
  priorities drawn at ``reset``.
- Several pending assignments: rewards use the labels received; pending ones are ignored
  (the paper is sequential).

Speed: the reward depends only on the (sorted) state ``(max(a, b), min(a, b))`` — V is
symmetric under swapping the classes — so it is memoised per state; items sit in
:class:`~crowdbudget.policies._index.ScoreBuckets`; a label costs one memo look-up and one
O(log n_distinct) bucket update. The weighted mode (below) recomputes the labeled item's score
from its own labels, O(labels of that item).

Worker reliability (§3.2), ``workers=``:

- ``"none"`` (default; the paper's experiments use the basic setting, §4.1).
- ``"spammer"`` (Fisher requirements, §3.2): a worker's labels on *completed* items are
  compared with the item's majority label; once a worker has ``spammer_min_labels`` such
  labels, a one-sided exact binomial test of H0: θ_j = 1/2 against θ_j > 1/2 is run at level
  ``spammer_alpha``; if H0 is not rejected the worker is a spammer and is blocked: his votes
  are removed from every incomplete item (Example 4), his later labels are not counted, and
  in pull mode he gets no work (``select`` returns None for him). Items already complete stay
  complete. In push mode the platform picks the worker, so a blocked worker's label can still
  arrive (and is paid for) but is ignored. Under the live rules (a live campaign, or a
  simulated one with control tasks) the block is also the campaign's, through the same
  ledger as a control-rule block (:meth:`RequalloPolicy.worker_blocks`,
  :func:`crowdbudget.engine.live.policy_blocks`): the worker is refused (``blocked``), listed
  with the test's numbers, and the verdict drops their labels when the requester chose so.
- ``"weighted"`` (ratio requirements, §3.2): P_i is the MLE of eq. 8–9 under the worker
  reliabilities θ_j (pseudo-labels come from noiseless workers, θ = 1, §3.3), found by
  bisection on the derivative of the concave log-likelihood; the weighted votes are
  ``ã = P_i (a+b)``, ``b̃ = (1 − P_i)(a+b)``; completeness and eq. 10 use them; the reward
  assumes the next label comes from the worst worker (θ closest to 1/2, §3.2). θ_j are
  ``worker_reliability`` (known, shape (n_workers,)) or, when not given, estimated online as
  the smoothed agreement with the majority label on completed items (Beta(4, 1) pseudo-counts,
  clipped to [0.5, 0.99]); the worst worker is taken among the workers seen so far. Scores of
  items are refreshed when they receive a label (others keep the θ they were scored with —
  the O(1)-per-decision compromise). Final labels: weighted vote (P_i vs 1/2). Binary only.

Example:
    >>> import numpy as np
    >>> from crowdbudget.types import CampaignState, LabelEvent, Problem
    >>> policy = RequalloPolicy(fisher=0.2, max_labels=14)
    >>> problem = Problem(n_items=3, budget=100)
    >>> policy.reset(problem, np.random.default_rng(0))
    >>> state = CampaignState.initial(problem)
    >>> policy.select(state).item
    0
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from numpy.typing import ArrayLike

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies._index import (
    DEFAULT_TIE_BREAK,
    PAPER_TIE_BREAK,
    ScoreBuckets,
    TieBreak,
    canonical_scores,
    check_tie_break,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.requirements import Requirement, as_requirement, combine, make_rule
from crowdbudget.types import (
    Assignment,
    BoolArray,
    CampaignState,
    FloatArray,
    IntArray,
    LabelEvent,
    Problem,
)

#: the paper's main policy (Requallo-p0.2, §4.1)
DEFAULT_REQUIREMENT = "fisher=0.2:max-labels=14"
WORKER_MODES = ("none", "spammer", "weighted")
_POSITIVE_EPS = 1e-12


# ---- the MDP quantities (vectorised over states) ----------------------------------------------
def modified_positive_probability(
    a: ArrayLike, b: ArrayLike, requirement: Requirement, pseudo: float = 0.0
) -> FloatArray:
    """``P(Z = +1 | a, b)`` of eq. 2 (eq. 10 for weighted votes), clipped to [0, 1].

    Args:
        a, b: vote counts (pseudo-votes included), broadcastable arrays.
        requirement: gives ``r``.
        pseudo: pseudo-votes per class (for the label-count rules).
    """
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    n = a + b
    safe_n = np.where(n > 0, n, 1.0)
    freq = np.where(n > 0, a / safe_n, 0.5)
    up = freq + b / requirement.min_total(b, pseudo)
    down = freq - a / requirement.min_total(a, pseudo)
    p = np.where(a > b, up, np.where(a < b, down, 0.5))
    return np.asarray(np.clip(p, 0.0, 1.0), dtype=float)


def expected_completeness(
    a: ArrayLike, b: ArrayLike, requirement: Requirement, pseudo: float = 0.0
) -> FloatArray:
    """``V(a, b)`` of eq. 1 with eq. 2; exactly 1 for states meeting the requirement."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=float), np.asarray(b, dtype=float))
    n = a + b
    p = modified_positive_probability(a, b, requirement, pseudo)
    if_positive = np.minimum(1.0, n / requirement.min_total(b, pseudo))
    if_negative = np.minimum(1.0, n / requirement.min_total(a, pseudo))
    value = p * if_positive + (1.0 - p) * if_negative
    return np.asarray(
        np.where(requirement.is_complete(a, b, pseudo), 1.0, np.minimum(value, 1.0)), dtype=float
    )


def completeness_rewards(
    a: ArrayLike, b: ArrayLike, requirement: Requirement, pseudo: float = 0.0
) -> tuple[FloatArray, FloatArray]:
    """``(R⁺¹, R⁻¹)``: change of the expected completeness after a +1 / −1 vote (§3.1)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    now = expected_completeness(a, b, requirement, pseudo)
    plus = expected_completeness(a + 1.0, b, requirement, pseudo) - now
    minus = expected_completeness(a, b + 1.0, requirement, pseudo) - now
    return plus, minus


def optimistic_completeness_reward(
    a: ArrayLike, b: ArrayLike, requirement: Requirement, pseudo: float = 0.0
) -> FloatArray:
    """Requallo's stage reward ``max(R⁺¹, R⁻¹)``; 0 for complete states (they leave)."""
    plus, minus = completeness_rewards(a, b, requirement, pseudo)
    done = requirement.is_complete(a, b, pseudo)
    return np.asarray(np.where(done, 0.0, np.maximum(plus, minus)), dtype=float)


def reliability_mle(
    labels: ArrayLike, reliability: ArrayLike, pseudo: float = 1.0, n_iter: int = 60
) -> float:
    """MLE of ``P_i`` (eq. 8–9) from binary ``labels`` (1 = +1) of workers with reliability
    θ, plus ``pseudo`` noiseless (θ = 1) votes for each class (§3.3).

    The log-likelihood ``Σ log(θ P + (1−θ)(1−P))`` (+1 votes) ``+ Σ log(θ(1−P) + (1−θ)P)``
    (−1 votes) is concave in P; its derivative is decreasing, so bisection on [0, 1] finds the
    maximiser (an endpoint when the derivative does not change sign).
    """
    y = np.asarray(labels, dtype=float)
    theta = np.asarray(reliability, dtype=float)
    slope = 2.0 * theta - 1.0  # d/dP of θP + (1−θ)(1−P)

    def derivative(p: float) -> float:
        pos = theta * p + (1.0 - theta) * (1.0 - p)
        neg = 1.0 - pos
        d = float(np.sum(np.where(y == 1, slope / pos, -slope / neg)))
        if pseudo > 0:
            d += pseudo / p - pseudo / (1.0 - p)
        return d

    lo, hi = 1e-9, 1.0 - 1e-9
    if derivative(lo) <= 0:
        return 0.0 if pseudo == 0 else lo
    if derivative(hi) >= 0:
        return 1.0 if pseudo == 0 else hi
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        if derivative(mid) > 0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


# ---- the policy ---------------------------------------------------------------------------
class RequalloPolicy(AllocationPolicy):
    """Requallo (Algorithm 1): label the incomplete item of largest optimistic completeness
    reward; stop when no item has a positive reward. See the module docstring.

    Args:
        ratio, fisher, min_labels, max_labels, max_total: requirement rules
            (:mod:`crowdbudget.requirements`); combined with ``requirement``. With none given,
            ``fisher=0.2:max-labels=14`` (the paper's Requallo-p0.2).
        requirement: a :class:`Requirement` or its text.
        pseudo_labels: pseudo-votes per class (§3.3; default 1, as in the paper's experiments).
        workers: ``"none"``, ``"spammer"`` or ``"weighted"`` (§3.2).
        worker_reliability: known θ_j, shape (n_workers,), for ``workers="weighted"``.
        spammer_alpha, spammer_min_labels: the spammer test (``workers="spammer"``).
        tie_break: ``"random"`` (default: every item starts tied, and the smallest index
            would make a result depend on the item order) or ``"first"`` (smallest
            index, Algorithm 1's argmax: what the ``requallo-*`` reproductions pin,
            ``tie-break=first``).

    Fitted attributes:
        requirement_: the combined requirement.
        counts_: counted votes per item and class, shape (n_items, n_classes).
        complete_: items meeting the requirement, shape (n_items,).
        blocked_: workers blocked as spammers (set of ids).
        block_evidence_: the test's numbers for each (:meth:`worker_blocks`).
        stopped_early_: True once ``select`` stopped with budget left (rewards all <= 0).
    """

    binary_only: ClassVar[bool] = False
    #: the papers' rule among tied items (:func:`crowdbudget.registry.pin_paper_ties`)
    paper_tie_break: ClassVar[TieBreak] = PAPER_TIE_BREAK

    def __init__(
        self,
        ratio: float | None = None,
        fisher: float | None = None,
        min_labels: int | None = None,
        max_labels: int | None = None,
        max_total: int | None = None,
        requirement: Requirement | str | None = None,
        pseudo_labels: float = 1.0,
        workers: str = "none",
        worker_reliability: ArrayLike | None = None,
        spammer_alpha: float = 0.05,
        spammer_min_labels: int = 20,
        tie_break: TieBreak = DEFAULT_TIE_BREAK,
    ) -> None:
        self.ratio = ratio
        self.fisher = fisher
        self.min_labels = min_labels
        self.max_labels = max_labels
        self.max_total = max_total
        self.requirement = requirement
        self.pseudo_labels = pseudo_labels
        self.workers = workers
        self.worker_reliability = worker_reliability
        self.spammer_alpha = spammer_alpha
        self.spammer_min_labels = spammer_min_labels
        self.tie_break = tie_break

    # ---- parameters ----------------------------------------------------------------------
    def build_requirement(self) -> Requirement:
        """The requirement from ``requirement`` and the rule parameters."""
        rules: list[Requirement] = []
        if self.requirement is not None:
            rules.append(as_requirement(self.requirement))
        for key, value in (
            ("ratio", self.ratio),
            ("fisher", self.fisher),
            ("min-labels", self.min_labels),
            ("max-labels", self.max_labels),
            ("max-total", self.max_total),
        ):
            if value is not None:
                rules.append(make_rule(key, value))
        if not rules:
            return as_requirement(DEFAULT_REQUIREMENT)
        return combine(rules)

    def validate_params(self) -> None:
        self.build_requirement()
        check_tie_break(self.tie_break)
        if self.workers not in WORKER_MODES:
            raise InvalidParameterError(
                f"workers must be one of {', '.join(WORKER_MODES)}, got {self.workers!r}"
            )
        if not (np.isfinite(self.pseudo_labels) and self.pseudo_labels >= 0):
            raise InvalidParameterError(
                f"pseudo_labels must be a number >= 0, got {self.pseudo_labels!r}"
            )
        if not 0 < self.spammer_alpha < 1:
            raise InvalidParameterError(
                f"spammer_alpha must be in (0, 1), got {self.spammer_alpha!r}"
            )
        if int(self.spammer_min_labels) != self.spammer_min_labels or self.spammer_min_labels < 1:
            raise InvalidParameterError(
                f"spammer_min_labels must be an integer >= 1, got {self.spammer_min_labels!r}"
            )

    # ---- campaign ------------------------------------------------------------------------
    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        n, n_classes = problem.n_items, problem.n_classes
        if self.workers == "weighted" and n_classes != 2:
            raise InvalidParameterError(
                "workers='weighted' handles binary problems only; use workers='none' or "
                "'spammer' for multi-class"
            )
        self.requirement_ = self.build_requirement()
        self.pseudo_ = float(self.pseudo_labels)
        self.counts_ = np.zeros((n, n_classes), dtype=np.int64)
        self.complete_ = np.zeros(n, dtype=bool)
        self.blocked_: set[int] = set()
        self.block_evidence_: dict[int, dict[str, Any]] = {}
        self.stopped_early_ = False
        # per-item random priorities for exact ties in the final labels
        self._tie_rank = rng.random((n, n_classes))
        self._memo: dict[tuple[float, float], float] = {}
        self._done_memo: dict[tuple[float, float], bool] = {}
        start = self._state_score(0.0, 0.0)
        self._index = ScoreBuckets(np.full(n, start), self.tie_break)
        # event log (for spammer detection and weighted votes): linked lists by item / worker
        self._ev_item: list[int] = []
        self._ev_worker: list[int] = []
        self._ev_label: list[int] = []
        self._ev_counted: list[bool] = []
        self._next_by_item: list[int] = []
        self._next_by_worker: list[int] = []
        self._head_item = np.full(n, -1, dtype=np.int64)
        self._head_worker: dict[int, int] = {}
        self._agree: dict[int, int] = {}
        self._judged: dict[int, int] = {}
        if self.workers == "weighted":
            if self.worker_reliability is not None:
                theta = np.asarray(self.worker_reliability, dtype=float).reshape(-1)
                if np.any((theta < 0) | (theta > 1)):
                    raise InvalidParameterError("worker_reliability must lie in [0, 1]")
                self._theta_known: FloatArray | None = np.maximum(theta, 1.0 - theta)
            else:
                self._theta_known = None
            self._weighted_p = np.full(n, 0.5)
            self._seen_workers: set[int] = set()

    # ---- scores --------------------------------------------------------------------------
    def _state_score(self, top: float, second: float) -> float:
        key = (top, second)
        score = self._memo.get(key)
        if score is None:
            p = self.pseudo_
            raw = optimistic_completeness_reward(
                np.array([top + p]), np.array([second + p]), self.requirement_, p
            )
            score = float(canonical_scores(raw)[0])
            self._memo[key] = score
        return score

    def _top_two(self, item: int) -> tuple[float, float]:
        row = self.counts_[item]
        if row.shape[0] == 2:
            hi, lo = (row[0], row[1]) if row[0] >= row[1] else (row[1], row[0])
            return float(hi), float(lo)
        two = np.sort(row)[-2:]
        return float(two[1]), float(two[0])

    def votes(self) -> tuple[FloatArray, FloatArray]:
        """The Requallo state of all items: (top, runner-up) vote counts with pseudo-votes,
        shape (n_items,) each (weighted counts ã, b̃ in the weighted mode, as (a, b))."""
        p = self.pseudo_
        if self.workers == "weighted":
            n = self.counts_.sum(axis=1) + 2 * p
            return self._weighted_p * n, (1.0 - self._weighted_p) * n
        srt = np.sort(self.counts_, axis=1).astype(float)
        return np.asarray(srt[:, -1] + p, dtype=float), np.asarray(srt[:, -2] + p, dtype=float)

    # ---- the contract --------------------------------------------------------------------
    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if worker is not None and worker in self.blocked_:
            return None  # a blocked spammer gets no work (§3.2)
        return state.availability.offer(worker, lambda price: self._best(state, worker, price))

    def _best(self, state: CampaignState, worker: int | None, price: float) -> Assignment | None:
        """The best open item with work left (``stopped_early_`` when none is left)."""
        closed = state.availability.closed
        if closed:  # live: the best item outside them, nothing removed
            item = self._index.best_excluding(
                closed,
                lambda i: bool(state.eligible[i]) and self._index.score(i) > _POSITIVE_EPS,
                self.rng_,
            )
            return None if item is None else Assignment(item=item, worker=worker, price=price)
        while True:
            item = self._index.best(self.rng_)
            if item is None:
                self.stopped_early_ = True
                return None
            if not state.eligible[item]:
                self._index.remove(item)
                continue
            if self._index.score(item) <= _POSITIVE_EPS:
                self.stopped_early_ = True
                return None
            return Assignment(item=item, worker=worker, price=price)

    def observe(self, event: LabelEvent) -> None:
        item, worker, label = event.item, event.worker, event.label
        counted = worker not in self.blocked_
        if self.workers != "none":
            self._log(item, worker, label, counted)
        if not counted:
            return
        self.counts_[item, label] += 1
        if self.complete_[item]:
            # a pending label that arrived after completion: it still teaches about workers
            if self.workers == "spammer":
                self._judge_workers_of(item, only_event=len(self._ev_item) - 1)
            return
        self._refresh(item)

    def _refresh(self, item: int) -> None:
        """Recompute ``item``'s score and completion after its counts changed."""
        if self.workers == "weighted":
            score, done = self._weighted_score(item)
        else:
            top, second = self._top_two(item)
            # completion is a pure function of the (top, runner-up) counts for a fixed
            # requirement, so it is memoised per state like the score: the requirement's
            # vectorised r(x) costs ~300 µs on a scalar, a dict hit ~0.1 µs
            memo = self._done_memo.get((top, second))
            if memo is None:
                p = self.pseudo_
                memo = bool(self.requirement_.is_complete(top + p, second + p, p))
                self._done_memo[(top, second)] = memo
            done = memo
            score = 0.0 if done else self._state_score(top, second)
        if done:
            self.complete_[item] = True
            self._index.remove(item)
            if self.workers == "spammer":
                self._judge_workers_of(item)
            elif self.workers == "weighted" and self._theta_known is None:
                self._learn_reliability(item)
        else:
            self._index.update(item, score)

    # ---- event log -----------------------------------------------------------------------
    def _log(self, item: int, worker: int, label: int, counted: bool) -> None:
        k = len(self._ev_item)
        self._ev_item.append(item)
        self._ev_worker.append(worker)
        self._ev_label.append(label)
        self._ev_counted.append(counted)
        self._next_by_item.append(int(self._head_item[item]))
        self._head_item[item] = k
        self._next_by_worker.append(self._head_worker.get(worker, -1))
        self._head_worker[worker] = k
        if self.workers == "weighted":
            self._seen_workers.add(worker)

    def _events_of_item(self, item: int) -> list[int]:
        out = []
        k = int(self._head_item[item])
        while k >= 0:
            out.append(k)
            k = self._next_by_item[k]
        return out

    def _events_of_worker(self, worker: int) -> list[int]:
        out = []
        k = self._head_worker.get(worker, -1)
        while k >= 0:
            out.append(k)
            k = self._next_by_worker[k]
        return out

    def _majority(self, item: int) -> int:
        row = self.counts_[item]
        return int(np.argmax(row * 2.0 + self._tie_rank[item]))

    # ---- spammer detection (Fisher requirements, §3.2) -------------------------------------
    def _judge_workers_of(self, item: int, only_event: int | None = None) -> None:
        truth = self._majority(item)
        events = [only_event] if only_event is not None else self._events_of_item(item)
        touched = set()
        for k in events:
            w = self._ev_worker[k]
            self._judged[w] = self._judged.get(w, 0) + 1
            self._agree[w] = self._agree.get(w, 0) + int(self._ev_label[k] == truth)
            touched.add(w)
        for w in sorted(touched):
            if w in self.blocked_ or self._judged[w] < self.spammer_min_labels:
                continue
            if self.is_spammer(self._agree[w], self._judged[w]):
                self.block_evidence_[w] = {
                    "policy": "requallo",
                    "test": "binomial: agreement with the majority, H0 theta = 1/2",
                    "agreements": self._agree[w],
                    "judged": self._judged[w],
                    "p_value": self.spammer_p_value(self._agree[w], self._judged[w]),
                    "alpha": float(self.spammer_alpha),
                }
                self._block(w)

    @staticmethod
    def spammer_p_value(agreements: int, judged: int) -> float:
        """``P(Binomial(judged, 1/2) >= agreements)``: the one-sided exact binomial test's
        p-value of θ = 1/2 against θ > 1/2 (§3.2)."""
        from scipy import stats  # here, not at import: scipy.stats costs 0.6 s to import

        return float(stats.binom.sf(agreements - 1, judged, 0.5))

    def is_spammer(self, agreements: int, judged: int) -> bool:
        """One-sided exact binomial test of θ = 1/2 against θ > 1/2 (§3.2): a spammer when
        ``P(Binomial(judged, 1/2) >= agreements) >= spammer_alpha``."""
        return self.spammer_p_value(agreements, judged) >= self.spammer_alpha

    def worker_blocks(self) -> dict[int, dict[str, Any]]:
        """The workers blocked as spammers with the test's numbers (agreements of judged
        labels, p-value, level; §3.2), ``{worker: evidence}``: the live rules make each a
        block of the campaign (:func:`crowdbudget.engine.live.policy_blocks`)."""
        return self.block_evidence_

    def _block(self, worker: int) -> None:
        """Block ``worker``: remove his votes from incomplete items (Example 4)."""
        self.blocked_.add(worker)
        changed = set()
        for k in self._events_of_worker(worker):
            if not self._ev_counted[k]:
                continue
            item = self._ev_item[k]
            if self.complete_[item]:
                continue
            self._ev_counted[k] = False
            self.counts_[item, self._ev_label[k]] -= 1
            changed.add(item)
        for item in sorted(changed):
            self._refresh(item)

    # ---- weighted votes (ratio requirements, §3.2) -----------------------------------------
    def _theta(self, worker: int) -> float:
        if self._theta_known is not None:
            if 0 <= worker < self._theta_known.shape[0]:
                return float(self._theta_known[worker])
            return 0.5
        agree = self._agree.get(worker, 0)
        judged = self._judged.get(worker, 0)
        return float(np.clip((agree + 4.0) / (judged + 5.0), 0.5, 0.99))

    def _worst_theta(self) -> float:
        if self._theta_known is not None:
            return float(self._theta_known.min())
        if not self._seen_workers:
            return 0.8  # the Beta(4, 1) prior mean
        return min(self._theta(w) for w in self._seen_workers)

    def _learn_reliability(self, item: int) -> None:
        truth = (
            self._majority(item)
            if self._weighted_p[item] == 0.5
            else int(self._weighted_p[item] > 0.5)
        )
        for k in self._events_of_item(item):
            w = self._ev_worker[k]
            self._judged[w] = self._judged.get(w, 0) + 1
            self._agree[w] = self._agree.get(w, 0) + int(self._ev_label[k] == truth)

    def _weighted_score(self, item: int) -> tuple[float, bool]:
        events = [k for k in self._events_of_item(item) if self._ev_counted[k]]
        labels = np.array([self._ev_label[k] for k in events], dtype=float)
        thetas = np.array([self._theta(self._ev_worker[k]) for k in events], dtype=float)
        p = self.pseudo_
        prob = reliability_mle(labels, thetas, p)
        self._weighted_p[item] = prob
        n = float(len(events)) + 2 * p
        req = self.requirement_
        a_w, b_w = prob * n, (1.0 - prob) * n
        if bool(req.is_complete(a_w, b_w, p)):
            return 0.0, True
        now = float(expected_completeness(a_w, b_w, req, p))
        worst = self._worst_theta()
        best = -np.inf
        for y in (1.0, 0.0):
            prob_after = reliability_mle(np.append(labels, y), np.append(thetas, worst), p)
            value = float(
                expected_completeness(prob_after * (n + 1), (1 - prob_after) * (n + 1), req, p)
            )
            best = max(best, value - now)
        return float(canonical_scores(np.array([best]))[0]), False

    # ---- results -------------------------------------------------------------------------
    def final_labels(self, state: CampaignState) -> IntArray:
        """Majority vote of the counted votes (weighted vote in the weighted mode); exact ties
        by the per-item random priorities drawn at reset."""
        if self.workers == "weighted":
            p = self._weighted_p
            coin = self._tie_rank[:, 1] > self._tie_rank[:, 0]
            return np.where(p > 0.5, 1, np.where(p < 0.5, 0, coin.astype(np.int64))).astype(
                np.int64
            )
        return np.argmax(self.counts_ * 2.0 + self._tie_rank, axis=1).astype(np.int64)

    def requirement_met(self) -> BoolArray:
        """Items meeting the quality rules, caps ignored (Table 3's "# Instances")."""
        a, b = self.votes()
        return np.asarray(self.requirement_.quality_met(a, b, self.pseudo_))

    def status(self) -> dict[str, Any]:
        """Counts for a report: complete items, items meeting the quality rules, blocked
        workers, whether the policy stopped by itself."""
        return {
            "complete": int(self.complete_.sum()),
            "requirement_met": int(self.requirement_met().sum()),
            "blocked_workers": len(self.blocked_),
            "stopped_early": bool(self.stopped_early_),
        }
