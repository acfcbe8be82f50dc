"""Continuous-time labeling campaigns (Hu & Frazier, "Bayes-Optimal Effort Allocation in
Crowdsourcing: Bounds and Index Policies", §3–§4), event-driven and exact.

Model. Workers arrive as a Poisson process of rate r (or, optionally, a non-homogeneous
process of rate r(t) <= r_max, simulated by thinning: candidate times of a rate-r_max process,
each kept with probability r(t)/r_max). Each arriving worker, while fewer than U have been
hired, is given a task by the policy (pull mode: ``policy.select(state, worker=w)``), works an
Exp(μ) time and then returns a label. Several assignments are pending at once
(``state.pending`` / ``state.committed`` via ``CampaignState.record_assignment``). At the
horizon T (may be ∞) pending work is cancelled (``release_assignment``; §4: "all outstanding
tasks on which workers are currently working are canceled"). The campaign ends when U workers
have been hired and have all finished, at T, or when the policy stops (``select`` returns
None) with nothing pending.

Exactness. No time steps: the next arrival time and a heap of completion times are compared;
each event is processed at its exact time.

Labels come from a wrapped :class:`~crowdbudget.simulation.environment.LabelingEnvironment`,
asked at *completion* time: a :class:`SyntheticBernoulliEnvironment` (θ_x drawn from the prior,
truth 1{θ_x >= d_x}, the k-th answer of a task fixed by the seed) or a
:class:`~crowdbudget.simulation.replay.ReplayEnvironment` (the label of a uniformly chosen unused
record of the task — the worker identity is not used, as in the paper's §7.2 replay). For a
replay, a task whose unused records are all taken by pending assignments becomes ineligible, so
a label is always available when its worker finishes.

Common random numbers. From the world seed: child 0 resets the wrapped environment (θ and the
answers), child 1 draws the arrival times, child 2 the work durations — the j-th *hired*
worker works the j-th duration whatever the policy. So every policy of a replication faces the
same θ, the same answers per task, the same arrival times and the same durations.

Reward (§3, eq. 2). ``reward`` = Σ_x R(α'_x, β'_x), R = max(P(θ_x > d_x), P(θ_x < d_x)) under the
problem's prior and the final counts: the posterior expected number of correctly classified
tasks (what the paper plots, per task, in Fig. 1). ``accuracy`` compares the policy's final
labels with the truth (Fig. 2).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from crowdbudget._random import as_seed_sequence, child_seed
from crowdbudget._validation import check_positive_int
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem

if TYPE_CHECKING:  # the hook's type only: experiments sit above simulation
    from crowdbudget.experiments.runner import MetricsHook

_CHUNK = 1024


class ContinuousTimeEnvironment:
    """Poisson arrivals and exponential work times around a label environment.

    Args:
        base: where labels come from (synthetic world or replay).
        arrival_rate: r > 0 (the maximum rate when ``rate_function`` is given).
        completion_rate: μ > 0 (a worker's time on a task is Exp(μ), mean 1/μ).
        horizon: T > 0, or ``math.inf``.
        rate_function: optional r(t) with 0 <= r(t) <= ``arrival_rate`` (thinning); must be a
            module-level function to run in worker processes.

    Example:
        >>> from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
        >>> env = ContinuousTimeEnvironment(SyntheticBernoulliEnvironment(5), arrival_rate=0.1,
        ...                                 completion_rate=0.4)
        >>> row = run_continuous_campaign(make_policy("opt-kg"), env, 6, world_seed=1,
        ...                               policy_rng=np.random.default_rng(0))
        >>> row["workers_hired"]
        6
    """

    def __init__(
        self,
        base: LabelingEnvironment,
        *,
        arrival_rate: float,
        completion_rate: float,
        horizon: float = math.inf,
        rate_function: Callable[[float], float] | None = None,
    ) -> None:
        r, mu = float(arrival_rate), float(completion_rate)
        if not (math.isfinite(r) and r > 0):
            raise InvalidParameterError(f"arrival rate must be a finite number > 0, got {r}")
        if not (math.isfinite(mu) and mu > 0):
            raise InvalidParameterError(f"completion rate must be a finite number > 0, got {mu}")
        if not (isinstance(horizon, (int, float)) and horizon > 0):
            raise InvalidParameterError(f"horizon must be > 0 (inf for none), got {horizon!r}")
        self.base = base
        self.arrival_rate = r
        self.completion_rate = mu
        self.horizon = float(horizon)
        self.rate_function = rate_function

    @property
    def n_items(self) -> int:
        return self.base.n_items

    def problem(self, budget: float) -> Problem:
        return self.base.problem(budget)

    def check_budget(self, budget: float) -> None:
        self.base.check_budget(budget)

    # ---- random streams ---------------------------------------------------------------------
    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> None:
        seq = as_seed_sequence(seed)
        self.base.reset(seed=child_seed(seq, 0))
        self._arrival_rng = np.random.default_rng(child_seed(seq, 1))
        self._work_rng = np.random.default_rng(child_seed(seq, 2))
        self._gaps = np.empty(0)
        self._gap_next = 0
        self._accept = np.empty(0)
        self._durations = np.empty(0)
        self._duration_next = 0
        self._clock = 0.0

    def _next_gap(self) -> float:
        if self._gap_next >= self._gaps.shape[0]:
            self._gaps = self._arrival_rng.exponential(1.0 / self.arrival_rate, _CHUNK)
            self._accept = self._arrival_rng.random(_CHUNK)
            self._gap_next = 0
        k = self._gap_next
        self._gap_next += 1
        self._last_accept = float(self._accept[k])
        return float(self._gaps[k])

    def next_arrival(self) -> float:
        """Time of the next worker arrival (thinning when a rate function is given)."""
        for _ in range(10_000_000):
            self._clock += self._next_gap()
            if self.rate_function is None:
                return self._clock
            rate = float(self.rate_function(self._clock))
            if rate < 0 or rate > self.arrival_rate * (1 + 1e-12):
                raise InvalidParameterError(
                    f"rate_function({self._clock:g}) = {rate:g} is outside [0, arrival_rate="
                    f"{self.arrival_rate:g}]"
                )
            if self._last_accept * self.arrival_rate < rate:
                return self._clock
            if self._clock >= self.horizon:
                return self._clock
        raise InvalidParameterError(
            "rate_function rejected 10^7 candidate arrivals in a row; it must not vanish for "
            "ever when the horizon is infinite"
        )

    def next_duration(self) -> float:
        """Work time of the next hired worker, Exp(μ)."""
        if self._duration_next >= self._durations.shape[0]:
            self._durations = self._work_rng.exponential(1.0 / self.completion_rate, _CHUNK)
            self._duration_next = 0
        k = self._duration_next
        self._duration_next += 1
        return float(self._durations[k])


def posterior_reward(problem: Problem, label_counts: np.ndarray) -> float:
    """Σ_x R(α'_x, β'_x) of eq. (2): the posterior expected number of correct tasks."""
    prior = problem.prior_array
    a = prior[:, 1] + label_counts[:, 1]
    b = prior[:, 0] + label_counts[:, 0]
    return float(np.sum(1.0 - error_probability(a, b, problem.threshold_array)))


def _record_counts(base: LabelingEnvironment) -> np.ndarray | None:
    """Recorded labels per task of a replay (None for a synthetic world): a
    :class:`ReplayEnvironment`, or any environment with a ``record_counts()`` method."""
    counts = getattr(base, "record_counts", None)
    if callable(counts):
        return np.asarray(counts(), dtype=np.int64).copy()
    if isinstance(base, ReplayEnvironment):
        return np.bincount(base.items, minlength=base.n_items).astype(np.int64)
    return None


def _prepare_policy(policy: AllocationPolicy, env: ContinuousTimeEnvironment) -> AllocationPolicy:
    """Policies that model the arrival and completion rates (``for_rates``) get the world's."""
    for_rates = getattr(policy, "for_rates", None)
    if callable(for_rates):
        prepared = for_rates(env.arrival_rate, env.completion_rate)
        assert isinstance(prepared, AllocationPolicy)
        return prepared
    return policy


def run_continuous_campaign(
    policy: AllocationPolicy,
    env: ContinuousTimeEnvironment,
    budget: int,
    *,
    world_seed: int | np.random.SeedSequence | None,
    policy_rng: np.random.Generator,
    metrics: MetricsHook | None = None,
) -> dict[str, Any]:
    """Run one continuous-time campaign with at most ``budget`` = U workers.

    Returns:
        A dict: ``budget``, ``reward`` (eq. 2, total), ``reward_per_item``, ``accuracy``
        (final labels vs truth on ``env.base.evaluation_mask``), ``correct``,
        ``workers_hired``, ``labels_used``, ``cancelled`` (pending at the horizon),
        ``max_labels_per_item``, ``end_time``, ``seconds`` and the hook's metrics.
    """
    budget = check_positive_int(budget, "budget")
    env.check_budget(budget)
    env.reset(seed=world_seed)
    base = env.base
    problem = env.problem(float(budget))
    state = CampaignState.initial(problem)
    state.pairs = None
    if base.eligible is not None:
        state.eligible &= base.eligible
    state.extra["arrival_rate"] = env.arrival_rate
    state.extra["completion_rate"] = env.completion_rate
    start = time.perf_counter()
    policy = _prepare_policy(policy, env)
    policy.reset(problem, policy_rng)
    # unused records per task that no pending assignment has claimed (replay only)
    capacity = _record_counts(base)
    replay = capacity is not None
    heap: list[tuple[float, int, Assignment]] = []
    hired = 0
    seq = 0
    horizon = env.horizon
    t_arrival = env.next_arrival()
    now = 0.0
    while True:
        t_done = heap[0][0] if heap else math.inf
        arrivals_open = hired < budget
        t_next = min(t_arrival if arrivals_open else math.inf, t_done)
        if t_next == math.inf:
            break
        if t_next >= horizon:
            now = horizon
            break
        if arrivals_open and t_arrival <= t_done:
            now = t_arrival
            state.time = now
            worker = base.arriving_worker()
            assignment = policy.select(state, worker=worker)
            if assignment is None:
                if not heap:
                    break
            else:
                state.record_assignment(assignment)
                hired += 1
                seq += 1
                heapq.heappush(heap, (now + env.next_duration(), seq, assignment))
                if capacity is not None:
                    capacity[assignment.item] -= 1
                    if capacity[assignment.item] <= 0:
                        state.eligible[assignment.item] = False
            t_arrival = env.next_arrival()
        else:
            now, _, assignment = heapq.heappop(heap)
            asked = Assignment(assignment.item, None, assignment.price) if replay else assignment
            result = base.step(asked)
            if result.event is None:
                state.release_assignment(assignment)
            else:
                ev = result.event
                event = LabelEvent(ev.item, ev.worker, ev.label, ev.cost, time=now)
                state.record_label(event, assignment)
                policy.observe(event)
            if base.eligible is not None and not base.eligible[assignment.item]:
                state.eligible[assignment.item] = False
    cancelled = len(heap)
    for _, _, assignment in heap:  # §4: outstanding work is cancelled at the horizon
        state.release_assignment(assignment)
    labels = policy.final_labels(state)
    truth = base.true_labels
    mask = (
        np.ones(problem.n_items, dtype=bool)
        if base.evaluation_mask is None
        else np.asarray(base.evaluation_mask, dtype=bool)
    )
    correct = int(np.sum(labels[mask] == truth[mask]))
    reward = posterior_reward(problem, state.label_counts)
    row: dict[str, Any] = {
        "budget": float(budget),
        "reward": reward,
        "reward_per_item": reward / problem.n_items,
        "accuracy": correct / max(int(mask.sum()), 1),
        "correct": float(correct),
        "workers_hired": hired,
        "labels_used": state.spent,
        "cancelled": cancelled,
        "max_labels_per_item": int(state.label_counts.sum(axis=1).max()),
        "end_time": now,
        "seconds": time.perf_counter() - start,
    }
    if metrics is not None:
        row.update(metrics(state, labels, truth, mask))
    return row
