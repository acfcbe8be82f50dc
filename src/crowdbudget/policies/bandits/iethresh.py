"""IEThresh: interval-estimate thresholding of workers (Donmez, Carbonell, Schneider, KDD 2009),
as described by Zhang, Ma, Sugiyama (Neural Computation 2015, §4.1), plus the per-task
worker-subset machinery it shares with CrowdSense.

Model. Tasks arrive one at a time (here: a uniformly random order drawn at ``reset``); each
task is labeled by a *subset* of workers chosen when it arrives, and then never again. Spending
is therefore decided by the method's threshold ε, not by a budget: the total spend is what the
thresholds make it (the campaign stops when every task has been processed), and reproductions
report the spend next to the accuracy. The budget still caps the spend (``select`` returns None
when the next label is unaffordable).

IEThresh. The reward of worker j on a task is 1 if its label agrees with the majority vote of
the task's subset, else 0. Before each task, every worker's upper confidence interval is

    UI(j) = m_j + t^{(n_j − 1)}_{α/2} s_j / sqrt(n_j)

(m, s: mean and sample standard deviation (ddof 1) of j's rewards, n_j: their number,
``t^{(n−1)}_{α/2}`` the upper α/2 critical value of Student's t with n − 1 degrees of freedom,
``scipy.stats.t.ppf(1 − α/2, n − 1)``; α = 0.05), and the task goes to
``{j : UI(j) >= ε · max_a UI(a)}``. A worker with fewer than two rewards has no interval; we
give it UI = +∞ (always asked), so the first tasks go to every worker — the usual start of
interval estimation (the paper does not say how IEThresh starts). Majority-vote ties (reward
and final label) are broken at random: the reward tie by the policy's generator, the final
label by one random bit per task drawn at ``reset``. Final label: majority vote.

On a replay (``state.pairs``) a task's candidates are the workers with an unused recorded label
for it, and the threshold is relative to the best UI among them.

Modes. Push (the paper's): the policy emits the subset's (task, worker) pairs one by one and
moves on once the task's labels are in. Pull: an arriving worker gets a pair planned for them in
an open task (opening at most one new task per call), else None ("no work for you now"). A task
whose item is closed to the question (``state.availability``: under the live rules) keeps its
plan and is not named until its item is open again.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
from scipy import special

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.bandits.bbta import _PairIndex, check_unit_prices
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.types import Assignment, CampaignState, FloatArray, IntArray, LabelEvent, Problem


def upper_interval(
    count: IntArray, total: FloatArray, total_sq: FloatArray, alpha: float = 0.05
) -> FloatArray:
    """UI = m + t^{(n−1)}_{α/2} s / sqrt(n) per worker from reward counts, sums and sums of
    squares, shape (n_workers,); +∞ where n < 2."""
    n = np.asarray(count, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.asarray(total, dtype=float) / n
        var = (np.asarray(total_sq, dtype=float) - n * mean**2) / (n - 1.0)
        std = np.sqrt(np.maximum(var, 0.0))
        crit = special.stdtrit(np.maximum(n - 1.0, 1.0), 1.0 - alpha / 2.0)  # = stats.t.ppf
        ui = mean + crit * std / np.sqrt(n)
    return np.asarray(np.where(n >= 2, ui, np.inf), dtype=float)


@dataclass
class _TaskPlan:
    """One open task: workers still to ask, labels received, labels outstanding."""

    item: int
    candidates: IntArray
    queue: list[int] = field(default_factory=list)
    asked: list[int] = field(default_factory=list)
    labels: dict[int, int] = field(default_factory=dict)
    outstanding: int = 0


class _SubsetPolicy(AllocationPolicy):
    """Tasks in a random stream, each labeled by a worker subset planned by the subclass:
    ``_plan(plan)`` → the first workers to ask; ``_more(plan)`` → more workers once every
    asked label is in (empty: done); ``_finish(plan)`` → learn from the finished task and
    return its final label."""

    chooses_workers = True
    binary_only = True
    needs_workers = True
    unit_prices_only = True
    #: select opens tasks from the stream, plans their subsets and closes finished ones
    keeps_select_state = True

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:
        if problem.n_workers is None:
            raise InvalidParameterError(
                f"{type(self).__name__} chooses workers: the problem needs n_workers"
            )
        self.price_ = check_unit_prices(problem, type(self).__name__)
        self.n_workers_ = problem.n_workers
        self.stream_ = rng.permutation(problem.n_items).astype(np.int64)
        self.tie_bits_ = rng.integers(0, 2, size=problem.n_items).astype(np.int64)
        self.decided_ = np.full(problem.n_items, -1, dtype=np.int64)
        self.asked_ = np.zeros((problem.n_items, problem.n_workers), dtype=bool)
        self._next = 0
        self._open: OrderedDict[int, _TaskPlan] = OrderedDict()
        self._pair_index: _PairIndex | None = None
        self._reset_stats(problem, rng)

    def _reset_stats(self, problem: Problem, rng: np.random.Generator) -> None:
        raise NotImplementedError

    def _plan(self, plan: _TaskPlan) -> list[int]:
        raise NotImplementedError

    def _more(self, plan: _TaskPlan) -> list[int]:
        return []

    def _finish(self, plan: _TaskPlan) -> int | None:
        raise NotImplementedError

    # ---- machinery --------------------------------------------------------------------------
    def _open_next(self, state: CampaignState) -> _TaskPlan | None:
        assert self._pair_index is not None
        while self._next < self.stream_.shape[0]:
            item = int(self.stream_[self._next])
            self._next += 1
            if not state.eligible[item]:
                continue
            candidates = self._pair_index.candidates(item, self.asked_[item])
            if candidates.shape[0] == 0:
                continue
            plan = _TaskPlan(item=item, candidates=candidates)
            plan.queue = list(self._plan(plan))
            self._open[item] = plan
            return plan
        return None

    def _close(self, plan: _TaskPlan) -> None:
        label = self._finish(plan)
        if label is not None:
            self.decided_[plan.item] = label
        self._open.pop(plan.item, None)

    def _take(self, plan: _TaskPlan, worker: int) -> Assignment:
        plan.queue.remove(worker)
        plan.asked.append(worker)
        plan.outstanding += 1
        self.asked_[plan.item, worker] = True
        return Assignment(item=plan.item, worker=worker, price=self.price_)

    def _usable(self, state: CampaignState, plan: _TaskPlan) -> bool:
        """Drop queued workers that can no longer be asked; close a task that is over."""
        assert self._pair_index is not None
        if not state.eligible[plan.item]:
            plan.queue.clear()
        else:
            plan.queue = [
                j
                for j in plan.queue
                if not self.asked_[plan.item, j] and self._pair_index.allows(plan.item, j)
            ]
        if not plan.queue and plan.outstanding == 0:
            more = self._more(plan) if state.eligible[plan.item] else []
            if more:
                plan.queue.extend(more)
                return self._usable(state, plan)
            self._close(plan)
            return False
        return bool(plan.queue)

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        if self._pair_index is None:
            self._pair_index = _PairIndex(state, self.n_workers_)
        if not state.can_afford(self.price_):
            return None
        # a task whose item is closed to this question (the asking worker's own, saturated, a
        # control item: ``state.availability``) keeps its plan and waits until it is open
        availability = state.availability
        for plan in list(self._open.values()):
            if (
                self._usable(state, plan)
                and availability.is_open(plan.item)
                and (worker is None or worker in plan.queue)
            ):
                return self._take(plan, plan.queue[0] if worker is None else worker)
        while True:
            opened = self._open_next(state)
            if opened is None:
                return None
            if self._usable(state, opened):
                if not availability.is_open(opened.item):
                    if worker is None:
                        continue
                    return None  # pull: the new task waits until it is open
                if worker is None:
                    return self._take(opened, opened.queue[0])
                if worker in opened.queue:
                    return self._take(opened, worker)
                return None  # pull: the new task waits for its workers

    def observe(self, event: LabelEvent) -> None:
        plan = self._open.get(event.item)
        if plan is None or event.worker not in plan.asked or event.worker in plan.labels:
            return
        plan.labels[event.worker] = event.label
        plan.outstanding -= 1
        if plan.outstanding == 0 and not plan.queue:
            more = self._more(plan)
            if more:
                plan.queue.extend(more)
            else:
                self._close(plan)

    def final_labels(self, state: CampaignState) -> IntArray:
        """The label decided when the task closed; otherwise majority vote of the labels so
        far (ties and unlabeled tasks: ``tie_bits_``)."""
        counts = state.label_counts
        vote = np.where(
            counts[:, 1] > counts[:, 0], 1, np.where(counts[:, 1] < counts[:, 0], 0, self.tie_bits_)
        )
        return np.where(self.decided_ >= 0, self.decided_, vote).astype(np.int64)

    def _majority(self, plan: _TaskPlan) -> int:
        votes = np.array(list(plan.labels.values()), dtype=np.int64)
        ones = int(votes.sum())
        zeros = votes.shape[0] - ones
        if ones != zeros:
            return int(ones > zeros)
        return int(self.rng_.integers(2))


class IEThresh(_SubsetPolicy):
    """IEThresh (Donmez et al. 2009; Zhang et al. 2015 §4.1); see the module docstring.

    Args:
        eps: ε in (0, 1]: the task goes to the workers with UI >= ε · max UI (larger ε: fewer
            workers per task, less spend).
        alpha: significance level α of the interval (paper: 0.05).

    Fitted attributes: reward_count_, reward_sum_, reward_sq_ per worker, shape (n_workers,).
    """

    def __init__(self, eps: float = 0.9, alpha: float = 0.05) -> None:
        self.eps = eps
        self.alpha = alpha

    def validate_params(self) -> None:
        if not 0.0 < float(self.eps) <= 1.0:
            raise InvalidParameterError(f"eps must be in (0, 1], got {self.eps!r}")
        if not 0.0 < float(self.alpha) < 1.0:
            raise InvalidParameterError(f"alpha must be in (0, 1), got {self.alpha!r}")

    def _reset_stats(self, problem: Problem, rng: np.random.Generator) -> None:
        k = self.n_workers_
        self.reward_count_ = np.zeros(k, dtype=np.int64)
        self.reward_sum_ = np.zeros(k)
        self.reward_sq_ = np.zeros(k)

    def upper_intervals(self) -> FloatArray:
        """UI of every worker now, shape (n_workers,)."""
        return upper_interval(self.reward_count_, self.reward_sum_, self.reward_sq_, self.alpha)

    def _plan(self, plan: _TaskPlan) -> list[int]:
        ui = self.upper_intervals()[plan.candidates]
        best = ui.max()
        chosen = (
            plan.candidates[np.isinf(ui)]
            if np.isinf(best)
            else plan.candidates[ui >= self.eps * best]
        )
        return [int(j) for j in chosen]

    def _finish(self, plan: _TaskPlan) -> int | None:
        if not plan.labels:
            return None
        vote = self._majority(plan)
        for worker, label in plan.labels.items():
            reward = 1.0 if label == vote else 0.0
            self.reward_count_[worker] += 1
            self.reward_sum_[worker] += reward
            self.reward_sq_[worker] += reward * reward
        return vote
