"""UCB1-tuned for budget allocation, the frequentist baseline of Hu & Frazier, "Bayes-Optimal
Effort Allocation in Crowdsourcing: Bounds and Index Policies", §7.2 (citing Auer,
Cesa-Bianchi, Fischer, "Finite-time Analysis of the Multiarmed Bandit Problem", 2002).

The paper names UCB1-tuned without saying how a bandit built to find the *best* arm is turned
into a labeling rule. Our decision, the closest frequentist analogue of "label the task whose
class is least certain":

- every task is labeled once first (UCB's initialisation: an unlabeled task scores +inf);
- then, with n_x labels on task x, θ̂_x = n⁺_x / n_x, t = labels received so far (+1), the
  UCB1-tuned width (Auer et al., §4)

      c_x = sqrt( ln t / n_x · min(1/4, V_x) ),   V_x = θ̂_x (1 − θ̂_x) + sqrt(2 ln t / n_x),

  and the task with the largest c_x − |θ̂_x − d_x| is labeled: the one whose confidence
  interval [θ̂_x − c_x, θ̂_x + c_x] reaches deepest across its threshold d_x.

Ties: ``tie_break="random"`` (the default) picks uniformly among the tasks of
largest score, compared after rounding to 40 significant bits
(:func:`~crowdbudget.policies._index.canonical_scores`: the symmetric states n⁺ = k and
n⁺ = n − k tie mathematically but reach us with last-bit noise from ``|θ̂ − d|``) — so the
initial round visits the tasks in random order; ``"first"`` takes the smallest index on the
raw scores, the rule the ``hu-frazier-*`` reproductions pin.

No prior is used (frequentist); the final labels are the default Bayes rule on the posterior
(:meth:`AllocationPolicy.final_labels`). Cost: O(n_items) vectorised per decision (ln t changes
every step, so every width changes).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from crowdbudget.policies._index import (
    DEFAULT_TIE_BREAK,
    PAPER_TIE_BREAK,
    TieBreak,
    canonical_scores,
    check_tie_break,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.types import Assignment, CampaignState, FloatArray, IntArray, Problem


def ucb1_tuned_scores(
    positives: IntArray, totals: IntArray, thresholds: FloatArray, t: float
) -> FloatArray:
    """c_x − |θ̂_x − d_x| (module docstring) for tasks with ``totals > 0``; +inf where 0."""
    totals_f = np.asarray(totals, dtype=float)
    safe = np.maximum(totals_f, 1.0)
    mean = np.asarray(positives, dtype=float) / safe
    log_t = np.log(max(t, 1.0))
    variance = mean * (1.0 - mean) + np.sqrt(2.0 * log_t / safe)
    width = np.sqrt(log_t / safe * np.minimum(0.25, variance))
    return np.where(totals_f > 0, width - np.abs(mean - thresholds), np.inf)


class UCB1TunedPolicy(AllocationPolicy):
    """UCB1-tuned adapted to labeling (module docstring).

    Args:
        tie_break: ``"random"`` (default) or ``"first"`` among the tasks of largest score
            (module docstring, "Ties").

    Example:
        >>> policy = UCB1TunedPolicy(tie_break="first")
        >>> problem = Problem(n_items=3, budget=4)
        >>> policy.reset(problem, np.random.default_rng(0))
        >>> policy.select(CampaignState.initial(problem)).item
        0
    """

    binary_only = True
    #: the rule the papers' reproductions pin (``registry.pin_paper_ties``)
    paper_tie_break: ClassVar[TieBreak] = PAPER_TIE_BREAK

    def __init__(self, tie_break: TieBreak = DEFAULT_TIE_BREAK) -> None:
        self.tie_break = tie_break

    def validate_params(self) -> None:
        check_tie_break(self.tie_break)

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        self._thresholds = problem.threshold_array

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return state.availability.offer(worker, lambda price: self._best(state, worker, price))

    def _best(self, state: CampaignState, worker: int | None, price: float) -> Assignment | None:
        """The open item of largest UCB1-tuned score."""
        items = state.availability.open_items()
        if items.size == 0:
            return None
        counts = state.label_counts[items]
        totals = counts.sum(axis=1)
        t = float(state.label_counts.sum()) + 1.0
        scores = ucb1_tuned_scores(counts[:, 1], totals, self._thresholds[items], t)
        if self.tie_break == "first":
            best = int(np.argmax(scores))
        else:
            rounded = canonical_scores(scores)
            tied = np.flatnonzero(rounded == rounded.max())
            best = (
                int(tied[self.rng_.integers(tied.shape[0])]) if tied.shape[0] > 1 else int(tied[0])
            )
        return Assignment(item=int(items[best]), worker=worker, price=price)
