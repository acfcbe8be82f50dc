"""CrowdSense (Ertekin, Rudin, Hirsh, "Approximating the crowd", DMKD 2014), as described by
Zhang, Ma, Sugiyama (Neural Computation 2015, §4.2).

Before each task, every worker's quality estimate is

    Q_j = (a_j + k) / (c_j + 2k)

(c_j: labels worker j gave on finished tasks, a_j: how many agreed with the task's weighted vote,
k: smoothing, 100 in the paper). The task's subset S_i starts with the two workers of highest
quality and one other worker drawn uniformly at random (exploration). With labels y ∈ {−1, +1}
the score is ``Score(S_i) = Σ_{j ∈ S_i} y_ij Q_j``; the remaining workers are visited in
decreasing quality and the candidate l is added while

    (|Score(S_i)| − Q_l) / (|S_i| + 1) < ε,

the score being recomputed after each addition; the first candidate that fails the test ends
the task (Ertekin et al.'s loop stops there — the Zhang et al. text does not say; we follow the
original). The final label is the Q-weighted vote sign(Score) (a tie: one random bit per task,
drawn at ``reset``), and a_j, c_j are updated for every worker of the subset.

Quality ties (all workers at the start) are broken by a random permutation drawn per task from
the policy's generator, so "the two best" are not always the lowest indices. The spend follows
from ε (tasks are processed once, in a random order); see
:mod:`crowdbudget.policies.bandits.iethresh` for the shared task-stream machinery, the replay
rule (candidates = workers with a recorded label) and the pull mode.
"""

from __future__ import annotations

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.bandits.iethresh import _SubsetPolicy, _TaskPlan
from crowdbudget.types import FloatArray, Problem


class CrowdSense(_SubsetPolicy):
    """CrowdSense; see the module docstring.

    Args:
        eps: ε of the add-a-worker test (larger: more workers per task, more spend).
        smoothing: k of the quality estimate (paper: 100).

    Fitted attributes: agree_ (a_j) and given_ (c_j), shape (n_workers,).
    """

    def __init__(self, eps: float = 0.1, smoothing: float = 100.0) -> None:
        self.eps = eps
        self.smoothing = smoothing

    def validate_params(self) -> None:
        if not np.isfinite(float(self.eps)):
            raise InvalidParameterError(f"eps must be a finite number, got {self.eps!r}")
        if not float(self.smoothing) > 0.0:
            raise InvalidParameterError(f"smoothing must be > 0, got {self.smoothing!r}")

    def _reset_stats(self, problem: Problem, rng: np.random.Generator) -> None:
        self.agree_ = np.zeros(self.n_workers_)
        self.given_ = np.zeros(self.n_workers_)
        self._order: dict[int, list[int]] = {}

    def quality(self) -> FloatArray:
        """Q_j = (a_j + k) / (c_j + 2k), shape (n_workers,)."""
        k = float(self.smoothing)
        return np.asarray((self.agree_ + k) / (self.given_ + 2.0 * k), dtype=float)

    def _score(self, plan: _TaskPlan, q: FloatArray) -> float:
        return float(sum((1.0 if y == 1 else -1.0) * q[j] for j, y in plan.labels.items()))

    def _plan(self, plan: _TaskPlan) -> list[int]:
        q = self.quality()[plan.candidates]
        shuffle = self.rng_.permutation(plan.candidates.shape[0])
        ranked = plan.candidates[shuffle][np.argsort(-q[shuffle], kind="stable")]
        first = [int(j) for j in ranked[:2]]
        rest = [int(j) for j in ranked[2:]]
        if rest:
            first.append(rest.pop(int(self.rng_.integers(len(rest)))))
        self._order[plan.item] = rest  # candidates in decreasing quality
        return first

    def _more(self, plan: _TaskPlan) -> list[int]:
        rest = self._order.get(plan.item, [])
        if not rest:
            return []
        q = self.quality()
        candidate = rest[0]
        size = len(plan.labels)
        if (abs(self._score(plan, q)) - q[candidate]) / (size + 1) < float(self.eps):
            rest.pop(0)
            return [candidate]
        rest.clear()
        return []

    def _finish(self, plan: _TaskPlan) -> int | None:
        self._order.pop(plan.item, None)
        if not plan.labels:
            return None
        score = self._score(plan, self.quality())
        vote = int(self.tie_bits_[plan.item]) if score == 0 else int(score > 0)
        for worker, label in plan.labels.items():
            self.given_[worker] += 1.0
            self.agree_[worker] += float(label == vote)
        return vote
