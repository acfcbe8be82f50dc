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

**The value rule** (``rule="value"``: how much control to buy is a budget decision). After a
worker's ``first_k`` control tasks, their next task is a control task when one more control
answer is worth more than the ordinary label it displaces — a small Bayesian decision
(Raiffa & Schlaifer's expected value of sample information; Frazier & Powell's KG(*) for
the look-ahead):

- *What a label is worth.* A label of a one-coin worker of accuracy ``a`` adds
  ``w(a) = max(0, 2a − 1)²`` to the exponent of the crowd's error (Karger, Oh & Shah,
  *Budget-optimal task allocation for reliable crowdsourcing systems*, 2014: the error of
  the best aggregation of ``ℓ`` labels an item decays as ``exp(−c ℓ q)`` in the crowd
  quality ``q = E[(2a − 1)²]``; a worker at or below chance adds nothing to a decision
  that blocks them). Under the posterior Beta(α', β') of ``a``,
  ``E[w(a)] = 4 E[a² 1{a>½}] − 4 E[a 1{a>½}] + P(a > ½)`` with
  ``E[a^r 1{a>½}] = E[a^r] · I_½(β', α' + r)`` (:func:`positive_information`).
- *The decision the answers feed.* The worker has about ``m`` labels left: the labels the
  budget left buys (budget − spend, at the mean price so far, less the tasks pending) times
  the worker's share of the labels so far, ``(labels_j + 1) / (labels + n_workers)``
  (Laplace: a new worker gets an equal share). Kept, they are worth ``m·E[w(a)]``; blocked,
  their ``m`` slots go to the rest of the crowd, worth ``v̄`` each (the mean of ``E[w(a)]``
  over the other unblocked workers, the unseen ones at the prior).
- *The value of k more answers.* Their number of correct ones ``s`` is Beta-binomial
  (k, α', β'); after them the block rule above decides on Beta(α' + s, β' + k − s). Keeping
  the worker is the decision today, and ``E_s E[w | s] = E[w]`` (a martingale), so the net
  value of buying ``k`` answers is

      V_k = (m − k) · Σ_s P(s) · 1{block(s)} · (v̄ − E[w(a) | s])  −  k · E[w(a)]

  (the first term: the loss avoided by blocking where the answers say so; the second: the
  ``k`` ordinary labels of this worker the answers displace — in pull mode each arrival
  takes one slot of the budget either way, so the price cancels). A control task is served
  when ``max_{1 ≤ k ≤ K} V_k > 0`` (``K``: ``horizon``, the control items the worker has not
  seen, and ``m``): the look-ahead over ``k`` because one answer alone rarely flips a
  decision that needs ``min_answers`` (the myopic value is 0 where ``k`` answers are worth
  a lot). A worker confirmed good (no ``s`` blocks) or nearly used up (``m`` small) gets no
  more control; a doubtful one with many labels ahead gets them until the block decides.
  Cost: O(K²) special-function evaluations per task, O(n_workers) for ``v̄`` (no item
  loop); deterministic. In push mode the control task goes to whoever the world picks: it
  is due when the share-weighted mean of the workers' ``max_k V_k / k`` is positive (with an
  item-only policy the world may still hand a blocked worker unnamed tasks, which ``V_k``
  does not model: blocking, and so control, is worth less there).
  The rule needs a block level (the decision it values) and the campaign's budget
  (:meth:`ControlLedger.start`).

**Reading a worker against the crowd, and by their agreement** (settings; by default a
worker is read against the fixed prior, with agreement):

- ``prior_fit="crowd"``: the prior of ``a_j`` is the crowd's accuracy distribution, fitted
  to every other worker's evidence (a nonparametric empirical-Bayes mixing distribution on a
  grid of 100 accuracies, pulled toward ``prior`` with the weight of ``prior_strength``
  workers; :mod:`crowdbudget.engine.crowd_prior`), in the block test and the value rule
  alike (both then run on the grid posterior: :func:`~crowdbudget.engine.crowd_prior.
  grid_net_values`). Why: Beta(1, 1) puts 70 % of its mass below a level of 0.7, so it
  blocks a good worker after a few unlucky answers, and reads a spammer's lucky start
  (2 of 2) as a good worker's; the crowd says how rare each is. Why a grid and not a Beta
  mixture: a crowd of good workers and spammers, or of always-one-class workers, has modes
  a single Beta cannot hold, and the grid's EM needs no starting guess of the components.
- ``agreement=True`` (the default): the verdict's expected right answers among a worker's
  labels of the non-control items (:func:`expected_right`: ``k_j = Σ P(class_i = label)``,
  ``m_j`` labels) join the control answers as soft counts: the likelihood
  ``a^{c+k} (1 − a)^{n−c+m−k}``, the test ``P(a_j < level) >= confidence`` once
  ``n + m >= min_answers``, read every
  ``max(20, 5 % of the labels)`` labels (a verdict fit costs O(labels)). This is the test the
  Label Studio connector runs on annotators (the same :meth:`ControlLedger.p_below` and
  :func:`expected_right`). Why: a worker gives ~45 labels at 3 labels per item and 20
  workers, control answers only a few; the labels say as much, for free. Its limits: the
  verdict's errors make the soft counts less than independent draws, and a worker's own
  label moves the verdict toward it (both read a bad worker as better: a conservative test);
  a verdict that has not yet found the good workers reads everyone as average. A campaign
  gives the ledger its source (``agreement_source``: the simulation runner does; a live
  campaign does not, so it reads control answers only), and it is read only with a block
  level (nothing else reads it). The default since it was better or level in every cell
  measured (benchmarks/README.md, 2026-12-06 and 2026-12-07: the value rule +3.8 / +3.9
  points with spammers against +3.2 / +1.5 without).
- ``prior_fit="share"``: the value rule predicts a worker's answers from the crowd seen as
  two kinds of worker, bad (accuracy below ``block_below``) with probability π and good
  otherwise (the requester's Beta restricted to each side of the level), π with the prior
  ``no_bad_prior`` at 0 (no bad worker at all) and uniform elsewhere, and its posterior
  updated by every worker's control answers and **peer agreement** (their labels against
  the other workers' labels on the same items: two one-coin workers agree with probability
  ``½ + (2a − 1)(2b − 1)/2``, so the rate reads ``a`` against the crowd's mean signal;
  never against the worker's own label, which the verdict's soft counts would credit them
  with); :class:`~crowdbudget.engine.crowd_prior.SharePrior`. A worker is read against
  the crowd without them; their prior is ``q·bad + (1 − q)·good``, ``q = E[π | others]``.
  The block the answers feed stays the requester's test on the Beta posterior (the
  rule above, with ``agreement`` as set), so the rule a requester reads does not change:
  only how much control is bought. Why: under Beta(1, 1) every new worker is below a level
  of 0.7 with probability 0.7, so the rule tests every worker of any crowd; when the
  evidence says the crowd has no bad worker, ``q → 0`` and so does the value of testing.
  Its limit: the evidence that tells the crowds apart comes late (peer pairs exist once
  items have a second label; a few control answers per worker cannot separate a spammer at
  0.5 from a good worker at 0.8), and a test bought late blocks a bad worker after most of
  their labels (benchmarks/README.md).
- ``label_worth="vote"``: a label is worth ``2(2a − 1) − μ`` (μ: the unblocked crowd's mean
  ``E[2a − 1]``) instead of ``max(0, 2a − 1)²``. The Chernoff exponent of a plain vote of
  ``n`` labels with signals ``s_i = 2a_i − 1`` is ``(Σ s_i)² / 2n``; one more label of
  signal ``s`` in a crowd of mean signal μ changes ``n μ²`` by ``μ (2s − μ)`` (to first
  order), which up to the factor μ (the same for the gain and the cost of ``V_k``, so the
  decision does not change) is the worth above: **negative** for ``s < μ/2`` — a spammer's
  label costs the crowd until the verdict has learned to weigh it at zero, which the
  weighted vote's ``max(0, s)²`` (the exponent when the weights are known) cannot say.
  Computed on the grid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from crowdbudget._random import child_seed
from crowdbudget.engine.crowd_prior import (
    POINTS,
    WORTH,
    CrowdPrior,
    SharePrior,
    _net_values,
    expected_right,
    grid_net_values,
    log_likelihood,
    peer_log_likelihood,
    positive_information,
)
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import BoolArray, CampaignState, FloatArray, IntArray

__all__ = [
    "BLOCKED_LABELS",
    "CONTROL_RULES",
    "LABEL_WORTHS",
    "PRIOR_FITS",
    "BlockEvidence",
    "ControlLedger",
    "ControlTasks",
    "control_seed",
    "expected_right",
    "positive_information",
]

#: how control tasks are scheduled after the first k: a fixed rate, or by their value
CONTROL_RULES = ("fixed", "value")

#: the prior a worker's answers are read against: the requester's Beta, or the crowd's
#: accuracy distribution fitted to every worker's answers (:mod:`crowdbudget.engine.crowd_prior`)
PRIOR_FITS = ("fixed", "crowd", "share")

#: what the value rule counts a label worth: its worker's term in the error exponent of the
#: weighted vote, or its signal's share in the plain vote's (module docstring)
LABEL_WORTHS = ("exponent", "vote")

#: labels between two reads of the verdict's agreement (at least; 5 % more on a large campaign)
AGREEMENT_EVERY = 20

#: what the verdict does with a blocked worker's labels (:mod:`crowdbudget.engine.blocked`)
BLOCKED_LABELS = ("drop", "keep")

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
        prior_fit: ``"fixed"`` (``prior`` itself) or ``"crowd"`` (the crowd's accuracy
            distribution, fitted to every other worker's control answers and pulled toward
            ``prior``: :mod:`crowdbudget.engine.crowd_prior`), for the block test and the
            value rule alike.
        prior_strength: ``"crowd"``: the workers' worth of ``prior`` in the fit.
        no_bad_prior: ``"share"``: the prior probability that the crowd has no worker
            below ``block_below`` (:class:`~crowdbudget.engine.crowd_prior.SharePrior`).
        agreement: the block test (and the crowd fit, and the value rule's posterior) also
            reads the verdict's expected right answers among a worker's other labels (soft
            counts, :func:`expected_right`), when the campaign gives the ledger a source
            (``ControlLedger.agreement_source``; module docstring).
        label_worth: the value rule's worth of a label: ``"exponent"`` (``max(0, 2a − 1)²``)
            or ``"vote"`` (``2(2a − 1) − μ``, negative for a worker at chance; module
            docstring).
        min_answers: control answers a worker gives before a block can happen.
        rule: ``"fixed"`` (``first_k``, then ``rate``) or ``"value"`` (``first_k``, then a
            control task whenever it is worth its label: module docstring; ``rate`` unused).
        horizon: the value rule's look-ahead: at most this many more control answers.
        blocked_labels: what the verdict does with the labels of a worker blocked by the
            time it reads: ``"drop"`` (the default, as in a live campaign: it is fitted
            without them; :mod:`crowdbudget.engine.blocked`) or ``"keep"`` (its worker model
            weighs them).
        calibrate: None, or how an aggregator verdict's probabilities are calibrated on the
            control answers (a method of
            :data:`crowdbudget.aggregation.control_calibration.CALIBRATION_METHODS`).
    """

    fraction: float | None = None
    n_items: int | None = None
    first_k: int = 3
    rate: float = 0.05
    block_below: float | None = None
    block_confidence: float = 0.95
    prior: tuple[float, float] = (1.0, 1.0)
    min_answers: int = 5
    prior_fit: str = "fixed"
    prior_strength: float = 10.0
    no_bad_prior: float = 0.5
    label_worth: str = "exponent"
    agreement: bool = True
    rule: str = "fixed"
    horizon: int = 20
    blocked_labels: str = "drop"
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
        self._check_choices()

    def _check_choices(self) -> None:
        """The rule, its look-ahead and the blocked labels' treatment are known ones."""
        if self.rule not in CONTROL_RULES:
            raise InvalidParameterError(
                f"control rule must be one of {', '.join(CONTROL_RULES)}, got {self.rule!r}"
            )
        if self.rule == "value" and self.block_below is None:
            raise InvalidParameterError(
                "the value control rule weighs the block decision: give a block level"
            )
        if self.prior_fit not in PRIOR_FITS:
            raise InvalidParameterError(
                f"prior fit must be one of {', '.join(PRIOR_FITS)}, got {self.prior_fit!r}"
            )
        if not 0.0 <= self.no_bad_prior < 1.0:
            raise InvalidParameterError(f"no-bad prior must be in [0, 1), got {self.no_bad_prior}")
        if self.prior_fit == "share" and self.block_below is None:
            raise InvalidParameterError(
                "the share prior splits the crowd at the block level: give a block level"
            )
        if self.label_worth not in LABEL_WORTHS:
            raise InvalidParameterError(
                f"label worth must be one of {', '.join(LABEL_WORTHS)}, got {self.label_worth!r}"
            )
        if not self.prior_strength > 0:
            raise InvalidParameterError(f"prior strength must be > 0, got {self.prior_strength}")
        if self.horizon < 1:
            raise InvalidParameterError(f"control horizon must be >= 1, got {self.horizon}")
        if self.blocked_labels not in BLOCKED_LABELS:
            raise InvalidParameterError(
                f"blocked labels must be one of {', '.join(BLOCKED_LABELS)}, "
                f"got {self.blocked_labels!r}"
            )

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
        budget: the campaign's budget (the value rule's estimate of the labels left; None:
            unknown, refused by that rule).
        price: the price of a label before any came back (the value rule's estimate).
        labels_of: worker -> labels received from them (control or not).
        labels_total, spent: labels received in all, and the spend when the last came back.
        item_set: the control items as a set (closed to the policy).
    """

    tasks: ControlTasks
    items: IntArray
    truth: IntArray
    n_workers: int | None = None
    budget: float | None = None
    price: float = 1.0
    labels_of: dict[int, int] = field(default_factory=dict)
    labels_total: int = 0
    spent: float = 0.0
    served: dict[int | None, int] = field(default_factory=dict)
    offered: dict[int | None, set[int]] = field(default_factory=dict)
    correct: dict[int, int] = field(default_factory=dict)
    answered: dict[int, int] = field(default_factory=dict)
    blocked: dict[int, BlockEvidence] = field(default_factory=dict)
    control_labels: int = 0
    handed_total: int = 0
    item_set: set[int] = field(init=False, default_factory=set)
    _crowd: CrowdPrior | SharePrior | None = field(
        init=False, default=None, repr=False, compare=False
    )
    _crowd_at: object = field(init=False, default=-1, repr=False, compare=False)
    _fixed_grid: CrowdPrior | None = field(init=False, default=None, repr=False, compare=False)
    agreement_source: Callable[[], tuple[FloatArray, FloatArray]] | None = field(
        default=None, repr=False, compare=False
    )
    agreement_right: dict[int, float] = field(default_factory=dict)
    agreement_labels: dict[int, float] = field(default_factory=dict)
    _agreement_at: int = field(init=False, default=0, repr=False, compare=False)
    peer_agree: dict[int, int] = field(default_factory=dict)
    peer_pairs: dict[int, int] = field(default_factory=dict)
    _item_labels: dict[int, list[tuple[int, int]]] = field(
        init=False, default_factory=dict, repr=False, compare=False
    )

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
        *,
        budget: float | None = None,
        price: float = 1.0,
    ) -> ControlLedger:
        """A fresh ledger for one campaign (``budget``, ``price``: the campaign's budget and
        label price, which the value rule needs)."""
        if tasks.rule == "value" and budget is None:
            raise InvalidParameterError("the value control rule needs the campaign's budget")
        items = np.flatnonzero(np.asarray(control_items, dtype=bool))
        truth = np.asarray(truth, dtype=np.int64)
        return cls(tasks, items, truth, n_workers, budget=budget, price=float(price))

    def is_blocked(self, worker: int | None) -> bool:
        return worker is not None and worker in self.blocked

    def all_blocked(self) -> bool:
        """Whether every worker of the world is blocked (the world's size known)."""
        return self.n_workers is not None and len(self.blocked) >= self.n_workers

    def due(self, worker: int | None) -> bool:
        """Pull mode: whether the next task of ``worker`` is a control task."""
        n = self.served.get(worker, 0) + 1
        if self.tasks.rule == "value":
            return n <= self.tasks.first_k or self.control_value(worker) > 0.0
        return self._is_control_task(n)

    def due_in_push(self) -> bool:
        """Push mode: whether the campaign's next task is a control task (the rule on the
        campaign's count of tasks handed out; the value rule: module docstring)."""
        n = self.handed_total + 1
        if self.tasks.rule == "value":
            return n <= self.tasks.first_k or self._push_value() > 0.0
        return self._is_control_task(n)

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
        self.labels_of[worker] = self.labels_of.get(worker, 0) + 1
        self.labels_total += 1
        self.spent = spent
        if self.tasks.prior_fit == "share" and item not in self.item_set:
            self._compare_with_peers(worker, item, label)
        if item in self.item_set:
            self.control_labels += 1
            right = int(label == int(self.truth[item]))
            self.correct[worker] = self.correct.get(worker, 0) + right
            self.answered[worker] = self.answered.get(worker, 0) + 1
            self._check_block(worker, spent)
        if self._agreement_due():
            self._read_agreement(spent)

    def _compare_with_peers(self, worker: int, item: int, label: int) -> None:
        """Peer agreement (``prior_fit="share"``): the new label against every other
        worker's earlier label on the item, counted for both workers."""
        earlier = self._item_labels.setdefault(item, [])
        for other, theirs in earlier:
            if other == worker:
                continue
            same = int(theirs == label)
            for w in (worker, other):
                self.peer_agree[w] = self.peer_agree.get(w, 0) + same
                self.peer_pairs[w] = self.peer_pairs.get(w, 0) + 1
        earlier.append((worker, label))

    def _peer_signal(self) -> float:
        """``s̄``, the crowd's mean signal ``E[2a − 1]`` from its pairs' agreement rate
        ``ρ = ½ + s̄² / 2`` (two independent workers; 0 when ρ <= ½ or no pairs yet)."""
        pairs = sum(self.peer_pairs.values())
        if not pairs:
            return 0.0
        rate = sum(self.peer_agree.values()) / pairs
        return float(np.sqrt(max(0.0, 2.0 * rate - 1.0)))

    def _share_log_likelihood(self, worker: int, signal: float) -> FloatArray:
        """Worker's evidence on the accuracy grid for the share prior: control answers and
        peer agreement (:func:`~crowdbudget.engine.crowd_prior.peer_log_likelihood`),
        shape (GRID,)."""
        right, answered = self.correct.get(worker, 0), self.answered.get(worker, 0)
        control = log_likelihood(np.array([right]), np.array([answered]))[0]
        agree, pairs = self.peer_agree.get(worker, 0), self.peer_pairs.get(worker, 0)
        return np.asarray(control + peer_log_likelihood(agree, pairs, signal), dtype=float)

    def _grid_posterior(self, worker: int | None) -> FloatArray:
        """``worker``'s accuracy posterior on the grid (shape (GRID,)): the share prior
        reads control answers and peer agreement, the others the block evidence."""
        grid = self._grid()
        if isinstance(grid, SharePrior):
            if worker is None:
                return grid.weights
            return grid.read(worker, self._share_log_likelihood(worker, self._peer_signal()))
        return grid.posterior(worker, *self._evidence(worker))

    def _evidence(self, worker: int | None) -> tuple[float, float]:
        """(right, answered) of ``worker``: their control answers, plus the verdict's soft
        counts of their other labels when the rule reads agreement."""
        if worker is None:
            return 0.0, 0.0
        right = float(self.correct.get(worker, 0))
        answered = float(self.answered.get(worker, 0))
        if self.tasks.agreement:
            right += self.agreement_right.get(worker, 0.0)
            answered += self.agreement_labels.get(worker, 0.0)
        return right, answered

    def _check_block(self, worker: int, spent: float) -> None:
        """Block ``worker`` when the test says so (module docstring), after ``min_answers``
        (control answers, or with agreement control answers and soft-counted labels)."""
        right, answered = self._evidence(worker)
        level = self.tasks.block_below
        if level is None or worker in self.blocked or answered < self.tasks.min_answers:
            return
        p_below = self.p_below(right, answered, worker)
        if p_below >= self.tasks.block_confidence:
            c, n = self.correct.get(worker, 0), self.answered.get(worker, 0)
            self.blocked[worker] = BlockEvidence(c, n, level, p_below, spent)

    def _agreement_due(self) -> bool:
        """Whether to read the verdict's agreement again: every :data:`AGREEMENT_EVERY`
        labels, or every 5 % more labels when that is more (a verdict fit costs O(labels):
        the fits then cost O(labels) in all, amortised)."""
        if (
            not self.tasks.agreement
            or self.agreement_source is None
            or self.tasks.block_below is None  # no block test, no value rule: unread
        ):
            return False
        fresh = self.labels_total - self._agreement_at
        return fresh >= max(AGREEMENT_EVERY, 0.05 * self.labels_total)

    def _read_agreement(self, spent: float) -> None:
        """Read the source's soft counts (per worker index: expected right, labels; shape
        (n_workers,) each) and test every worker again (their evidence, and the crowd's,
        moved)."""
        assert self.agreement_source is not None  # _agreement_due checked it
        self._agreement_at = self.labels_total
        right, labels = self.agreement_source()
        given = np.flatnonzero(np.asarray(labels) > 0)
        self.agreement_right = {int(w): float(right[w]) for w in given}
        self.agreement_labels = {int(w): float(labels[w]) for w in given}
        self._crowd_at = -1  # the crowd's evidence moved: refit
        for worker in self.agreement_labels:
            self._check_block(worker, spent)

    def crowd(self) -> CrowdPrior | SharePrior:
        """The crowd's accuracy distribution fitted to the control answers so far (refitted
        when answers came since the last fit; :mod:`crowdbudget.engine.crowd_prior`):
        ``prior_fit="share"``, the two-kind mixture (:class:`SharePrior`), else the grid's."""
        share = self.tasks.prior_fit == "share"
        # the share prior's peer evidence grows with every label: refit every
        # AGREEMENT_EVERY labels (and on every control answer)
        key = (self.control_labels, self.labels_total // AGREEMENT_EVERY if share else 0)
        if self._crowd is None or self._crowd_at != key:
            # the tasks may change in a live campaign: the prior and its strength with them
            if share:
                # control answers and peer agreement, not the verdict's soft counts: those
                # read a worker's own label as agreement (a spammer whose items have one
                # label reads ~0.9 mid-campaign), which would argue "no bad worker"
                level = float(self.tasks.block_below or 0.5)  # set: ControlTasks checks it
                signal = self._peer_signal()
                workers = set(self.answered) | set(self.peer_pairs)
                evidence = {w: self._share_log_likelihood(w, signal) for w in workers}
                share_prior = SharePrior(self.tasks.prior, level, self.tasks.no_bad_prior)
                self._crowd = share_prior.fit(evidence)
            else:
                fresh = CrowdPrior(self.tasks.prior, self.tasks.prior_strength)
                workers = set(self.answered) | set(self.agreement_labels)
                self._crowd = fresh.fit({w: self._evidence(w) for w in workers})
            self._crowd_at = key
        return self._crowd

    def p_below(self, correct: float, answered: float, worker: int | None = None) -> float:
        """``P(accuracy < block_below)`` of a worker with ``correct`` right of ``answered``
        answers (soft counts allowed: the expected right answers of labels read by a
        verdict), under the rule's prior (``prior_fit``: the fixed Beta, or the crowd without
        ``worker``); NaN without a level."""
        level = self.tasks.block_below
        if level is None:
            return float("nan")
        if self.tasks.prior_fit == "crowd":
            crowd = self.crowd()
            return crowd.below(crowd.posterior(worker, correct, answered), level)
        from scipy import stats  # here, not at import: scipy.stats costs 0.6 s to import

        alpha, beta = self.tasks.prior
        return float(stats.beta.cdf(level, alpha + correct, beta + answered - correct))

    # ------------------------------------------------------------------ the value rule
    def _posterior(self, worker: int | None) -> tuple[float, float, int]:
        """(α', β') of ``worker``'s accuracy posterior and their control answers."""
        alpha, beta = self.tasks.prior
        if worker is None:
            return alpha, beta, 0
        right, answered = self._evidence(worker)
        return alpha + right, beta + answered - right, self.answered.get(worker, 0)

    def _labels_left(self) -> float:
        """Labels the budget left buys: (budget − spend) at the mean price so far, less the
        tasks handed out and not answered."""
        price = self.spent / self.labels_total if self.labels_total else self.price
        pending = max(0, self.handed_total - self.labels_total)
        budget = float(self.budget or 0.0)
        return max(0.0, (budget - self.spent) / max(price, 1e-12) - pending)

    def _shares(self) -> tuple[int, int]:
        """(labels of the unblocked workers, how many unblocked workers): the denominators
        of a worker's share of the labels left."""
        blocked_labels = sum(self.labels_of.get(w, 0) for w in self.blocked)
        known = self.n_workers if self.n_workers is not None else len(self.labels_of) + 1
        return self.labels_total - blocked_labels, max(1, known - len(self.blocked))

    def _replacement(self, worker: int | None) -> float:
        """v̄: the mean E[w(a)] of the unblocked workers other than ``worker`` (the unseen
        ones at the prior; none: the prior's)."""
        prior_value = float(positive_information(*self.tasks.prior))
        values = [
            float(positive_information(*self._posterior(w)[:2]))
            for w in self.answered
            if w != worker and w not in self.blocked
        ]
        if self.n_workers is not None:
            seen = set(self.answered) | set(self.blocked) | ({worker} - {None})
            values += [prior_value] * max(0, self.n_workers - len(seen))
        return float(np.mean(values)) if values else prior_value

    def _grid(self) -> CrowdPrior | SharePrior:
        """The prior on the accuracy grid: the crowd's (``prior_fit="crowd"`` or
        ``"share"``) or the fixed Beta's (never fitted)."""
        if self.tasks.prior_fit in ("crowd", "share"):
            return self.crowd()
        if self._fixed_grid is None:
            self._fixed_grid = CrowdPrior(self.tasks.prior, self.tasks.prior_strength)
        return self._fixed_grid

    def _grid_values(self, worker: int | None) -> tuple[FloatArray, float]:
        """The grid path of the value rule: a label's worth ``w(a_i)`` (shape (GRID,)) and
        v̄, the mean E[w(a)] of the unblocked workers other than ``worker`` (those with
        answers at their posterior, the unseen ones at the prior)."""
        grid = self._grid()
        known = set(self.answered) | set(self.agreement_labels) | set(self.peer_pairs)
        posts = [
            self._grid_posterior(w) for w in sorted(known) if w != worker and w not in self.blocked
        ]
        unseen = 0
        if self.n_workers is not None:
            seen = known | set(self.blocked) | ({worker} - {None})
            unseen = max(0, self.n_workers - len(seen))
        weights = np.array([1.0] * len(posts) + [float(unseen)])
        stacked = np.vstack([*posts, grid.weights]) if posts or unseen else grid.weights[None]
        if not weights.sum():
            weights = np.ones(stacked.shape[0])
        if self.tasks.label_worth == "vote":
            # μ: the crowd's mean signal E[2a − 1] (at least 0: a crowd at chance has none)
            signal = 2.0 * POINTS - 1.0
            mu = max(0.0, float(weights @ (stacked @ signal) / weights.sum()))
            # μ (2s − μ) up to the factor μ > 0, which scales the gain and the cost of V_k
            # alike (so the decision is the same, and defined at μ = 0 too)
            worth = 2.0 * signal - mu
        else:
            worth = WORTH
        return worth, float(weights @ (stacked @ worth) / weights.sum())

    def control_value(self, worker: int | None, *, per_answer: bool = False) -> float:
        """``max_k V_k`` for ``worker``'s next task (module docstring; ``per_answer``:
        ``max_k V_k / k``, negative when no answer pays): positive when a control answer is
        worth more than the ordinary label it displaces; 0 when there is nothing to decide
        (no block level, no control item left for the worker, no label left)."""
        level = self.tasks.block_below
        if level is None or worker in self.blocked:
            return 0.0
        labels, workers = self._shares()
        own = self.labels_of.get(worker, 0) if worker is not None else 0
        remaining = self._labels_left() * (own + 1) / (labels + workers)
        seen = len(self.offered.get(worker, ())) if worker is not None else 0
        horizon = min(self.tasks.horizon, self.items.size - seen, int(remaining))
        if horizon < 1:
            return 0.0
        alpha, beta, answered = self._posterior(worker)
        if self.tasks.prior_fit != "fixed" or self.tasks.label_worth == "vote":
            worth, replacement = self._grid_values(worker)
            # "share": the answers are predicted by the two-kind mixture, but the block they
            # feed is the requester's test on the Beta posterior (p_below)
            block_beta = (alpha, beta) if self.tasks.prior_fit == "share" else None
            net = grid_net_values(
                self._grid_posterior(worker),
                remaining,
                replacement,
                horizon,
                level,
                self.tasks.block_confidence,
                self.tasks.min_answers - answered,
                worth,
                block_beta,
            )
        else:
            net = _net_values(
                alpha,
                beta,
                remaining,
                self._replacement(worker),
                horizon,
                level,
                self.tasks.block_confidence,
                self.tasks.min_answers - answered,
            )
        if per_answer:
            return float((net / np.arange(1, horizon + 1)).max())
        return max(0.0, float(net.max()))

    def _push_value(self) -> float:
        """Push mode: the share-weighted mean of the workers' ``max_k V_k / k`` (the world
        picks who answers; the unseen workers at the prior)."""
        labels, workers = self._shares()
        total, weight = 0.0, 0.0
        for w, given in self.labels_of.items():
            if w not in self.blocked:
                share = (given + 1) / (labels + workers)
                total += share * self.control_value(w, per_answer=True)
                weight += share
        unseen = max(0, workers - sum(w not in self.blocked for w in self.labels_of))
        if unseen:
            share = unseen / (labels + workers)
            total += share * self.control_value(None, per_answer=True)
            weight += share
        return total / weight if weight > 0 else 0.0
