"""Control tasks: items with a known answer mixed into the work, and blocking from the answers.

A run with control tasks takes a seeded subset of its gold items as **control items**
(:meth:`ControlTasks.choose`). The policy never chooses them (they are closed to it); the live
step (:class:`~crowdbudget.engine.live.LiveStep`) serves them by this rule:

- **When.** In pull mode, a worker's n-th task (n = 1, 2, … counting every task handed to
  them) is a control task when ``n <= first_k``, or when ``rate > 0`` and ``(n - first_k)``
  is a multiple of ``period = round(1 / rate)`` (so a share ``rate`` of the later tasks). In
  push mode the same rule runs on the campaign's count of tasks, and a control task goes to
  no named worker (the world picks who answers).
- **Which.** The control item the worker has not been offered yet (any, for no named worker)
  that is eligible, not saturated and has the fewest labels received + pending (ties: the
  lowest index). None
  left: the policy is asked as usual.
- **Paid.** A control task is a label like any other: it costs the worker's price, counts
  against their capacity, and its answer is recorded in the campaign (the policy observes it).
- **Scored apart.** Accuracy and calibration are reported on the evaluated items that are not
  control items (:meth:`ControlTasks.evaluation_mask`).

**Blocking** (``block_below`` set): worker j with ``c`` correct among ``n`` control answers has
accuracy ``a_j`` with prior Beta(α, β) (``prior``, default Beta(1, 1): uniform on [0, 1]) and,
the answers being independent Bernoulli(a_j) draws, the conjugate posterior
Beta(α + c, β + n − c). The worker is blocked once

    P(a_j < block_below | answers) = I_{block_below}(α + c, β + n − c) >= block_confidence

(``I`` the regularized incomplete beta function, :func:`scipy.stats.beta.cdf`) and they have
given at least ``min_answers`` control answers (default 5: one unlucky answer of an accurate
worker on an ambiguous item gives P = 0.94 under the uniform prior at level 0.75): they get no
more work (pull: no assignment, cause ``blocked``; push: a pair naming them is refused). A
block is never lifted within a run; :attr:`ControlLedger.blocked` holds each one's evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from crowdbudget._random import child_seed
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import BoolArray, CampaignState, IntArray

__all__ = ["BlockEvidence", "ControlLedger", "ControlTasks", "control_seed"]

#: the key under the run's root seed from which the control subset is drawn: a pure
#: derivation, so it moves no other stream (worlds, policies) of the run
_CONTROL_KEY = 7


def control_seed(seed: int) -> np.random.SeedSequence:
    """The seed of a run's control subset, derived from its root ``seed``."""
    return child_seed(seed, _CONTROL_KEY)


@dataclass(frozen=True)
class ControlTasks:
    """How a run uses control tasks (module docstring for the rule).

    Attributes:
        fraction: share of the gold items taken as control items (rounded, at least one).
        n_items: or their number (give one of ``fraction`` and ``n_items``).
        first_k: every worker's first ``first_k`` tasks are control tasks.
        rate: then a share ``rate`` of their tasks (every ``round(1 / rate)``-th; 0: none).
        block_below: the accuracy level a worker must reach (None: no blocking).
        block_confidence: the posterior probability of being below it that blocks.
        prior: (α, β) of the Beta prior on a worker's accuracy.
        min_answers: control answers a worker gives before a block can happen.
        calibrate: None, or how an aggregator verdict's probabilities are calibrated on the
            control answers (``"floor"`` or ``"difficulty"``;
            :mod:`crowdbudget.aggregation.control_calibration`).
    """

    fraction: float | None = None
    n_items: int | None = None
    first_k: int = 3
    rate: float = 0.05
    block_below: float | None = None
    block_confidence: float = 0.95
    prior: tuple[float, float] = (1.0, 1.0)
    min_answers: int = 5
    calibrate: str | None = None

    def __post_init__(self) -> None:
        if (self.fraction is None) == (self.n_items is None):
            raise InvalidParameterError("give one of the control fraction and control items")
        if self.fraction is not None and not 0.0 < self.fraction < 1.0:
            raise InvalidParameterError(f"control fraction must be in (0, 1), got {self.fraction}")
        if self.n_items is not None and self.n_items < 1:
            raise InvalidParameterError(f"control items must be >= 1, got {self.n_items}")
        if self.first_k < 0:
            raise InvalidParameterError(f"first_k must be >= 0, got {self.first_k}")
        if not 0.0 <= self.rate <= 1.0:
            raise InvalidParameterError(f"control rate must be in [0, 1], got {self.rate}")
        if self.block_below is not None and not 0.0 < self.block_below < 1.0:
            raise InvalidParameterError(f"block level must be in (0, 1), got {self.block_below}")
        if not 0.0 < self.block_confidence < 1.0:
            raise InvalidParameterError(
                f"block confidence must be in (0, 1), got {self.block_confidence}"
            )
        if len(self.prior) != 2 or min(self.prior) <= 0:
            raise InvalidParameterError(f"prior must be two numbers > 0, got {self.prior}")

    @property
    def period(self) -> int | None:
        """Every ``period``-th task after the first k is a control task (None: rate 0)."""
        return None if self.rate == 0 else max(1, round(1.0 / self.rate))

    def choose(self, gold: BoolArray, seed: np.random.SeedSequence | int) -> BoolArray:
        """The control items: a uniformly drawn subset of the ``gold`` items (shape
        (n_items,)), the same for the same ``seed``; shape (n_items,), bool."""
        gold = np.asarray(gold, dtype=bool)
        candidates = np.flatnonzero(gold)
        if self.n_items is not None:
            size = self.n_items
        else:
            size = max(1, round(float(self.fraction or 0.0) * candidates.size))
        if size >= candidates.size:
            raise InvalidParameterError(
                f"{size} control items leave no gold item to score among {candidates.size}"
            )
        rng = np.random.default_rng(seed)
        mask = np.zeros(gold.size, dtype=bool)
        mask[rng.choice(candidates, size=size, replace=False)] = True
        return mask

    @staticmethod
    def evaluation_mask(gold: BoolArray, control_items: BoolArray) -> BoolArray:
        """The items accuracy is reported on: the gold items that are not control items."""
        return np.asarray(gold, dtype=bool) & ~np.asarray(control_items, dtype=bool)


@dataclass(frozen=True)
class BlockEvidence:
    """Why a worker was blocked: ``correct`` of ``answered`` control answers, the posterior
    probability ``p_below`` that their accuracy is below ``level``, and ``at_spent`` (the
    campaign's spend when it happened)."""

    correct: int
    answered: int
    level: float
    p_below: float
    at_spent: float


@dataclass
class ControlLedger:
    """One campaign's control tasks: the rule (``tasks``), the control items and their true
    classes, and what happened (tasks served per worker, control answers, blocks).

    Attributes:
        tasks: the rule.
        items: the control items' indices, ascending.
        truth: the true class of every item, shape (n_items,) (read on control items only).
        n_workers: how many workers exist (None: unknown); when all are blocked the campaign
            has nothing left to hand out.
        served: worker (None: no worker named) -> tasks handed to them.
        offered: worker -> control items offered to them (once each).
        correct, answered: worker -> control answers right, in all.
        blocked: worker -> :class:`BlockEvidence`.
        control_labels: control answers received.
        handed_total: tasks handed out in all.
        item_set: the control items as a set (closed to the policy).
    """

    tasks: ControlTasks
    items: IntArray
    truth: IntArray
    n_workers: int | None = None
    served: dict[int | None, int] = field(default_factory=dict)
    offered: dict[int | None, set[int]] = field(default_factory=dict)
    correct: dict[int, int] = field(default_factory=dict)
    answered: dict[int, int] = field(default_factory=dict)
    blocked: dict[int, BlockEvidence] = field(default_factory=dict)
    control_labels: int = 0
    handed_total: int = 0
    item_set: set[int] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        # the control items as a set: closed to the policy, looked up per label
        self.item_set = {int(i) for i in self.items}

    @classmethod
    def start(
        cls,
        tasks: ControlTasks,
        control_items: BoolArray,
        truth: IntArray,
        n_workers: int | None = None,
    ) -> ControlLedger:
        """A fresh ledger for one campaign."""
        items = np.flatnonzero(np.asarray(control_items, dtype=bool))
        return cls(tasks, items, np.asarray(truth, dtype=np.int64), n_workers)

    def is_blocked(self, worker: int | None) -> bool:
        return worker is not None and worker in self.blocked

    def all_blocked(self) -> bool:
        """Whether every worker of the world is blocked (the world's size known)."""
        return self.n_workers is not None and len(self.blocked) >= self.n_workers

    def due(self, worker: int | None) -> bool:
        """Pull mode: whether the next task of ``worker`` is a control task."""
        return self._is_control_task(self.served.get(worker, 0) + 1)

    def due_in_push(self) -> bool:
        """Push mode: whether the campaign's next task is a control task (the rule on the
        campaign's count of tasks handed out)."""
        return self._is_control_task(self.handed_total + 1)

    def _is_control_task(self, n: int) -> bool:
        """Whether the n-th task (1-based) is a control task: the first k, then every
        ``period``-th (module docstring)."""
        if n <= self.tasks.first_k:
            return True
        period = self.tasks.period
        return period is not None and (n - self.tasks.first_k) % period == 0

    def pick(
        self,
        state: CampaignState,
        worker: int | None,
        closed: set[int],
    ) -> int | None:
        """The control item for ``worker`` (module docstring), or None."""
        # a named worker answers a control item once; unnamed tasks go to whoever the world
        # picks, so the same item may be asked again
        offered = self.offered.get(worker, set()) if worker is not None else set()
        best, best_count = None, None
        for item in self.items:
            k = int(item)
            if k in offered or k in closed or not state.eligible[k]:
                continue
            count = int(state.label_counts[k].sum()) + int(state.pending[k])
            if best_count is None or count < best_count:
                best, best_count = k, count
        return best

    def handed(self, worker: int | None, item: int) -> None:
        """A task (control or not) went to ``worker``."""
        self.served[worker] = self.served.get(worker, 0) + 1
        self.handed_total += 1
        if worker is not None and item in self.item_set:
            self.offered.setdefault(worker, set()).add(item)

    def answer(self, worker: int, item: int, label: int, spent: float) -> None:
        """A label came back: a control answer updates the worker's evidence and may block
        them."""
        if item not in self.item_set:
            return
        self.control_labels += 1
        right = int(label == int(self.truth[item]))
        self.correct[worker] = self.correct.get(worker, 0) + right
        self.answered[worker] = n = self.answered.get(worker, 0) + 1
        level = self.tasks.block_below
        if level is None or worker in self.blocked or n < self.tasks.min_answers:
            return
        c = self.correct[worker]
        alpha, beta = self.tasks.prior
        p_below = float(stats.beta.cdf(level, alpha + c, beta + n - c))
        if p_below >= self.tasks.block_confidence:
            self.blocked[worker] = BlockEvidence(c, n, level, p_below, spent)
