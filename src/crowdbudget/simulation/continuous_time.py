"""The continuous-time labeling world (Hu & Frazier, "Bayes-Optimal Effort Allocation in
Crowdsourcing: Bounds and Index Policies", §3–§4 and §6).

Model. Workers arrive as a Poisson process of rate r (or, optionally, a non-homogeneous
process of rate r(t) <= r_max, simulated by thinning: candidate times of a rate-r_max process,
each kept with probability r(t)/r_max). Each arriving worker, while fewer than U have been
hired, is given a task by the policy (pull mode), works an Exp(μ) time and then returns a
label; several assignments are pending at once. At the horizon T (may be ∞) pending work is
cancelled (§4: "all outstanding tasks on which workers are currently working are canceled").

This module is the world only: :class:`ContinuousTimeEnvironment` draws the arrival and work
times and answers; the one campaign loop (:func:`crowdbudget.engine.loop.drive` with an
:class:`~crowdbudget.engine.loop.ArrivalClock`) runs it event by event, exactly — no time
steps: the next arrival time and a heap of completion times are compared and each event is
processed at its exact time (:func:`crowdbudget.experiments.continuous.run_continuous_campaign`).

Labels come from a wrapped :class:`~crowdbudget.simulation.environment.LabelingEnvironment`,
asked at *completion* time: a :class:`SyntheticBernoulliEnvironment` (θ_x drawn from the prior,
truth 1{θ_x >= d_x}, the k-th answer of a task fixed by the seed) or a
:class:`~crowdbudget.simulation.replay.ReplayEnvironment` (the label of a uniformly chosen unused
record of the task — the worker identity is not used, as in the paper's §7.2 replay: the base is
asked ``Assignment(item, None, price)``). For a replay, :meth:`ContinuousTimeEnvironment.claim`
reserves a record when the work is handed out, and a task whose unused records are all
reserved becomes ineligible, so a label is always available when its worker finishes. The
world's end shows as every task ineligible (the campaign ends at the next arrival the policy
cannot serve), never as a terminated step.

Common random numbers. From the world seed: child 0 resets the wrapped environment (θ and the
answers), child 1 draws the arrival times, child 2 the work durations — the j-th *hired*
worker works the j-th duration whatever the policy. So every policy of a replication faces the
same θ, the same answers per task, the same arrival times and the same durations.

Reward (§3, eq. 2). :func:`posterior_reward` = Σ_x R(α'_x, β'_x), R = max(P(θ_x > d_x),
P(θ_x < d_x)) under the problem's prior and the final counts: the posterior expected number of
correctly classified tasks (what the paper plots, per task, in Fig. 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from crowdbudget._random import as_seed_sequence, child_seed
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.posteriors.beta_bernoulli import error_probability
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import Assignment, IntArray, Problem, StepResult

_CHUNK = 1024


class ContinuousTimeEnvironment(LabelingEnvironment):
    """Poisson arrivals and exponential work times around a label environment.

    Args:
        base: where labels come from (synthetic world or replay).
        arrival_rate: r > 0 (the maximum rate when ``rate_function`` is given).
        completion_rate: μ > 0 (a worker's time on a task is Exp(μ), mean 1/μ).
        horizon: T > 0, or ``math.inf``.
        rate_function: optional r(t) with 0 <= r(t) <= ``arrival_rate`` (thinning); must be a
            module-level function to run in worker processes.

    Example:
        >>> from crowdbudget.experiments.continuous import run_continuous_campaign
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
        self.n_items = base.n_items
        self.n_classes = base.n_classes
        self.arrival_rate = r
        self.completion_rate = mu
        self.horizon = float(horizon)
        self.rate_function = rate_function
        self._capacity: IntArray | None = None

    def problem(self, budget: float) -> Problem:
        return self.base.problem(budget)

    def check_budget(self, budget: float) -> None:
        self.base.check_budget(budget)

    # ---- the world ----------------------------------------------------------------------------
    def reset(self, *, seed: int | np.random.SeedSequence | None = None) -> dict[str, Any]:
        seq = as_seed_sequence(seed)
        info = self.base.reset(seed=child_seed(seq, 0))
        self._arrival_rng = np.random.default_rng(child_seed(seq, 1))
        self._work_rng = np.random.default_rng(child_seed(seq, 2))
        self._gaps = np.empty(0)
        self._gap_next = 0
        self._accept = np.empty(0)
        self._durations = np.empty(0)
        self._duration_next = 0
        self._clock = 0.0
        base = self.base
        self.true_labels = base.true_labels
        self.evaluation_mask = base.evaluation_mask
        # unused records per task that no pending assignment has claimed (replay only)
        self._capacity = _record_counts(base)
        # a copy: claims make tasks ineligible here, not in the base
        if base.eligible is not None:
            self.eligible = np.asarray(base.eligible, dtype=bool).copy()
        elif self._capacity is not None:
            self.eligible = np.ones(self.n_items, dtype=bool)
        else:
            self.eligible = None
        return info

    def arriving_worker(self) -> int:
        return self.base.arriving_worker()

    def claim(self, assignment: Assignment) -> None:
        """Work on ``assignment`` was handed out: a replay reserves one unused record of the
        task (the task leaves once every record is reserved); a synthetic world answers any
        number of times."""
        capacity = self._capacity
        if capacity is None or self.eligible is None:
            return
        capacity[assignment.item] -= 1
        if capacity[assignment.item] <= 0:
            self.eligible[assignment.item] = False

    def step(self, assignment: Assignment) -> StepResult:
        """The base's answer when the work completes (a replay is asked for the task's label,
        whoever recorded it: ``Assignment(item, None, price)``). The base's ``terminated``
        is dropped: a reserved record always exists, and the world's end shows as every task
        ineligible."""
        replay = self._capacity is not None
        asked = Assignment(assignment.item, None, assignment.price) if replay else assignment
        result = self.base.step(asked)
        base_eligible = self.base.eligible
        if (
            self.eligible is not None
            and base_eligible is not None
            and not base_eligible[assignment.item]
        ):
            self.eligible[assignment.item] = False
        return StepResult(result.event, info=result.info)

    # ---- the compiled engine's hooks (crowdbudget.engine.index_loop) ------------------
    def stream_generators(
        self,
    ) -> tuple[np.random.Generator, float, np.random.Generator, float, int]:
        """(arrival generator, mean gap 1/r, work generator, mean work time 1/μ, chunk) after
        ``reset``: the world draws ``exponential(1/r, chunk)`` then ``random(chunk)`` from the
        first per chunk of arrivals, ``exponential(1/μ, chunk)`` from the second per chunk of
        work times — the compiled engine makes the same calls on the same generators."""
        return (
            self._arrival_rng,
            1.0 / self.arrival_rate,
            self._work_rng,
            1.0 / self.completion_rate,
            _CHUNK,
        )

    def set_stream_position(
        self,
        gaps: np.ndarray,
        accept: np.ndarray,
        gaps_used: int,
        durations: np.ndarray,
        durations_used: int,
        clock: float,
    ) -> None:
        """Where the streams are after the compiled engine drew from them: the last chunks
        (empty when none was drawn), how many of each were used, the time of the last arrival
        drawn — the state the world's own draws would have left."""
        self._gaps, self._accept, self._gap_next = gaps, accept, int(gaps_used)
        self._durations, self._duration_next = durations, int(durations_used)
        self._clock = float(clock)
        if self._gap_next > 0:
            self._last_accept = float(accept[self._gap_next - 1])

    # ---- random streams (an ArrivalStream of crowdbudget.engine.loop) -------------------------
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
