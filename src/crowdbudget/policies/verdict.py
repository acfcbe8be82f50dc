"""The verdict: final labels and their confidence, a component of its own (DESIGN §11).

The papers pair each allocation rule with one inference rule: Chen, Lin, Zhou (2013) label by
the Bayes rule on the homogeneous Beta posterior (Prop. 2.1 / Cor. 2.2), which ignores who gave
each label and, with the symmetric Beta(1, 1) prior, sends every tie to the positive class (on
RTE at the full 8,000 labels: 0.875, below majority vote's 0.897 and Dawid–Skene's 0.9275).
Allocation and inference are separable (BoTorch's split of posterior, decision and verdict):
the decision uses the policy's posterior, the verdict may use a richer model. So the runner,
the live campaign and the CLI (``--verdict``) hold a policy *and* a verdict, never a policy
wrapped around an aggregator:

- ``posterior`` (:class:`PosteriorVerdict`): the policy's own model
  (:meth:`~crowdbudget.policies.base.AllocationPolicy.final_labels` and
  ``final_probabilities``) — what the papers report;
- an aggregator id (``ds``, ``one-coin-em``, ``mace``, ``bds``, …;
  :class:`AggregatorVerdict`): that aggregator fitted on the campaign's label log
  (``state.label_log``, worker identities included), at the end and at every checkpoint.

Label and confidence always come from the same verdict. A verdict never draws from the
policy's generator: an aggregator's tie-breaking seed comes from a child of it
(``Generator.spawn`` advances no stream), so ``opt-kg`` allocates exactly the same with any
verdict — same items, same order, same random draws.

In an id the verdict sits beside the policy's own parameters: ``opt-kg:verdict=ds`` (and
``verdict-workers=per-context``) is the policy ``opt-kg`` with the verdict ``ds``; the runner
splits the two at the edge (:func:`crowdbudget.registry.split_verdict`). The first build's
spelling ``final=`` / ``final-workers=`` still works and prints the new one once.

``verdict-workers=per-context`` hands the aggregator the virtual worker ``s·K + j`` for worker
j's label on a task of context s (Zhang, Ma, Sugiyama 2015 §2.1: a worker's reliability
depends on the task's context), so a Dawid–Skene or one-coin EM verdict estimates one
reliability per (context, worker) — what a worker who is a hammer on one context and a
spammer or malicious on the others needs; a context-blind model averages them into one
mediocre worker (measured on breast_cancer malicious, docs/reproductions.md). On a problem
without contexts it is the same as ``as-given``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any

import numpy as np

from crowdbudget._random import child_seed
from crowdbudget.aggregation.registry import make_aggregator
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError
from crowdbudget.policies.base import vote_posterior_labels, vote_posterior_probabilities
from crowdbudget.types import CampaignState, FloatArray, IntArray, Problem, task_contexts

#: the verdict that is the policy's own model
POSTERIOR = "posterior"

#: the policy's own model with the papers' tie rule
PAPER = "paper"

#: how the ``posterior`` verdict breaks ties (:class:`PosteriorVerdict`): by the estimated
#: class prior; ``paper`` keeps the papers' rule
POSTERIOR_TIES = "prior"

#: two class probabilities closer than this (relative to the largest) are a tie: the Beta
#: posterior's P(θ ≥ 1/2) at a = b is 1/2 up to rounding (betainc's last bits), not exactly
TIE_TOLERANCE = 1e-9

#: which worker ids an aggregator verdict sees
VERDICT_WORKERS = ("as-given", "per-context")


def verdict_seed(rng: np.random.Generator) -> int:
    """The seed of a verdict's own draws (ties, an aggregator's restarts), from the policy's
    generator without touching it: neither its stream nor its seed sequence moves.

    It is the first child of the generator's seed sequence — what ``rng.spawn(1)`` gives
    the first time — derived by :func:`~crowdbudget._random.child_seed`. ``spawn`` itself
    counts the children it hands out, and the runner builds every campaign of one
    replication from the same ``SeedSequence`` object, so a spawning verdict made a
    campaign's verdict seed depend on how many campaigns ran before it in the same process
    (the policies listed before it, the executor's chunking); now the seed depends on the
    replication only. A generator without a seed sequence (built from a bit generator's
    state) falls back to ``spawn``."""
    bit_generator = rng.bit_generator
    sequence = getattr(bit_generator, "seed_seq", None)
    if isinstance(sequence, np.random.SeedSequence):
        child = np.random.Generator(type(bit_generator)(child_seed(sequence, 0)))
    else:
        child = rng.spawn(1)[0]
    return int(child.integers(2**62))


def log_label_data(state: CampaignState, *, worker_offset: IntArray | None = None) -> LabelData:
    """The labels of ``state.label_log`` as integer-coded :class:`LabelData` (workers
    renumbered 0.. in id order; ``worker_offset[item]`` added to each known worker first, for
    ``verdict-workers=per-context``)."""
    log = state.label_log
    workers = log.workers
    if worker_offset is not None:
        workers = np.where(workers >= 0, workers + worker_offset[log.items], workers)
    worker_ids, coded = np.unique(workers, return_inverse=True)
    return LabelData(
        items=log.items.copy(),
        workers=np.asarray(coded, dtype=np.int64).reshape(-1),
        labels=log.labels.copy(),
        item_ids=np.arange(state.n_items).astype(str).astype(object),
        worker_ids=worker_ids.astype(str).astype(object),
        classes=tuple(str(c) for c in range(state.problem.n_classes)),
    )


class Verdict(ABC):
    """Final labels and class probabilities of a campaign (module doc).

    ``reset(problem, rng)`` once per campaign, after the policy's reset with the same
    generator; then ``labels(state, policy)`` (shape (n_items,)) and
    ``probabilities(state, policy)`` (shape (n_items, n_classes)) whenever asked.
    """

    @property
    @abstractmethod
    def name(self) -> str:
        """The verdict's id (``posterior``, ``ds``, ...)."""

    def reset(self, problem: Problem, rng: np.random.Generator) -> Verdict:
        return self

    @abstractmethod
    def labels(self, state: CampaignState, policy: Any) -> IntArray: ...

    @abstractmethod
    def probabilities(self, state: CampaignState, policy: Any) -> FloatArray: ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def break_ties_by_prior(
    labels: IntArray, probabilities: FloatArray, rng: np.random.Generator
) -> IntArray:
    """``labels`` with every tie of ``probabilities`` (two or more classes within
    :data:`TIE_TOLERANCE` of the largest) sent to the tied class of largest estimated prior,
    and ties of that estimate to a uniformly random tied class.

    The class prior is estimated from the decided items — those without a tie — as
    ``π̂_c ∝ 1 + #{decided items labelled c}`` (Laplace smoothing: with nothing decided every
    class is equally likely and the draw decides). So an unlabeled item, or one whose votes
    are even, goes to the class the campaign's answers say is more common, never to a fixed
    class index: the verdict does not depend on how the classes are coded. The random draw
    only orders classes of equal count (``counts + U[0, 1/2)``: a difference of one count
    always wins), so it never overrides the estimate.

    Args:
        labels: the model's labels, shape (n_items,).
        probabilities: its class probabilities, shape (n_items, n_classes).
        rng: draws the order among classes of equal estimated prior.
    """
    p = np.asarray(probabilities, dtype=float)
    top = p.max(axis=1, keepdims=True)
    near = (top - p) <= TIE_TOLERANCE * np.maximum(top, 1.0)  # (n_items, n_classes)
    tied = near.sum(axis=1) > 1
    if not tied.any():
        return labels
    out = np.array(labels, dtype=np.int64, copy=True)
    n_classes = p.shape[1]
    counts = np.bincount(out[~tied], minlength=n_classes).astype(float) + 1.0
    score = counts[None, :] + 0.5 * rng.random((int(tied.sum()), n_classes))
    out[tied] = np.argmax(np.where(near[tied], score, -np.inf), axis=1)
    return out


class PosteriorVerdict(Verdict):
    """The policy's own model: its ``final_labels`` and ``final_probabilities``.

    Args:
        ties: ``"prior"`` (default): an item whose class probabilities tie — even votes, no
            vote under a symmetric prior — takes the tied class of largest estimated prior
            (:func:`break_ties_by_prior`), so no class is favoured by its code;
            ``"paper"``: the policy's labels as they are, the papers' rule (Chen, Lin, Zhou
            2013 Prop. 2.1: positive iff ``P(θ ≥ d) ≥ 1/2``, so every binary tie goes to
            class 1) — what the faithful reproductions use (``verdict=paper``).
    """

    def __init__(self, ties: str = POSTERIOR_TIES) -> None:
        if ties not in ("prior", "paper"):
            raise InvalidParameterError(f"ties must be 'prior' or 'paper', got {ties!r}")
        self.ties = ties
        self._seed = 0
        self._cache: tuple[int, float, FloatArray] | None = None

    @property
    def name(self) -> str:
        return PAPER if self.ties == "paper" else POSTERIOR

    def reset(self, problem: Problem, rng: np.random.Generator) -> PosteriorVerdict:
        # a child seed: the parent's stream is not advanced, so allocation is unchanged
        self._seed = verdict_seed(rng) if self.ties == "prior" else 0
        self._cache = None
        return self

    def labels(self, state: CampaignState, policy: Any) -> IntArray:
        labels = np.asarray(policy.final_labels(state), dtype=np.int64)
        if self.ties == "paper":
            return labels
        probabilities = self.probabilities(state, policy)
        if probabilities.shape != (labels.shape[0], state.problem.n_classes):
            return labels
        # one stream per number of labels: the same answer however often it is asked
        rng = np.random.default_rng([self._seed, state.n_events])
        return break_ties_by_prior(labels, probabilities, rng)

    def probabilities(self, state: CampaignState, policy: Any) -> FloatArray:
        key = (state.n_events, state.spent)
        if self._cache is None or self._cache[:2] != key:
            p = np.asarray(policy.final_probabilities(state), dtype=float)
            self._cache = (*key, p)
        return self._cache[2]


class AggregatorVerdict(Verdict):
    """An aggregator fitted on the campaign's label log (module doc).

    Args:
        aggregator: an aggregator id without a seed (``"ds"``, ``"one-coin-em"``, ...).
        workers: ``"as-given"`` or ``"per-context"`` (one virtual worker per (context,
            worker); module doc).

    Before any label, the labels and probabilities are the prior's: the Bayes rule on the
    problem's prior (:func:`~crowdbudget.policies.base.vote_posterior_labels`). The fit is
    cached for the number of labels seen, so asking for labels and probabilities at one
    checkpoint fits once.
    """

    def __init__(self, aggregator: str = "ds", workers: str = "as-given") -> None:
        self.aggregator = aggregator
        self.workers = workers
        make_aggregator(aggregator)  # an unknown id fails here, with the allowed ones
        if workers not in VERDICT_WORKERS:
            raise InvalidParameterError(
                f"verdict-workers must be one of {', '.join(VERDICT_WORKERS)}, got {workers!r}"
            )
        self._seed = 0
        self._worker_offset: IntArray | None = None
        self._fit: tuple[int, IntArray, FloatArray] | None = None
        self.known_truth: dict[int, int] | None = None
        self.calibrate: str | None = None
        self.calibration_: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.aggregator

    def read_control(self, known_truth: Mapping[int, int], *, calibrate: str | None = None) -> None:
        """Read the control items ``known_truth`` (item index → class) as labels of known
        truth (``Aggregator.fit(..., known_truth=...)``) and, with ``calibrate`` (a method:
        one of ``control_calibration.CALIBRATION_METHODS``), map the probabilities
        by the calibration fitted on them
        (:func:`~crowdbudget.aggregation.control_calibration.calibrate_on_control`; its
        report in ``calibration_``). Set after :meth:`reset`; kept by later resets."""
        self.known_truth = {int(i): int(c) for i, c in known_truth.items()} or None
        self.calibrate = calibrate
        self._fit = None

    def reset(self, problem: Problem, rng: np.random.Generator) -> AggregatorVerdict:
        # a child seed: the parent's stream is not advanced (module doc)
        self._seed = verdict_seed(rng)
        self._worker_offset = None
        self._fit = None
        if self.workers == "per-context" and problem.n_workers is not None:
            contexts, _ = task_contexts(problem)
            self._worker_offset = contexts * problem.n_workers
        return self

    def _fitted(self, state: CampaignState) -> tuple[IntArray, FloatArray]:
        n = len(state.label_log)
        if self._fit is None or self._fit[0] != n:
            data = log_label_data(state, worker_offset=self._worker_offset)
            aggregator = make_aggregator(f"{self.aggregator}:seed={self._seed}")
            if self.calibrate and self.known_truth:
                from crowdbudget.aggregation.control_calibration import calibrate_on_control

                # the aggregator is left fitted with every control truth known, and the floor
                # keeps every row's order: its labels are those of the mapped probabilities
                probas, self.calibration_ = calibrate_on_control(
                    aggregator, data, self.known_truth, rng=self._seed, method=self.calibrate
                )
                self._fit = (n, np.asarray(aggregator.labels_, dtype=np.int64), probas)
            else:
                fitted = aggregator.fit(data, known_truth=self.known_truth)
                self._fit = (
                    n,
                    np.asarray(fitted.labels_, dtype=np.int64),
                    np.asarray(fitted.probas_, dtype=float),
                )
        return self._fit[1], self._fit[2]

    def labels(self, state: CampaignState, policy: Any) -> IntArray:
        if len(state.label_log) == 0:
            return vote_posterior_labels(state)
        return self._fitted(state)[0]

    def probabilities(self, state: CampaignState, policy: Any) -> FloatArray:
        if len(state.label_log) == 0:
            return vote_posterior_probabilities(state)
        return self._fitted(state)[1]


def verdict_refusal(verdict: str, n_classes: int) -> str | None:
    """Why the verdict ``verdict`` cannot label ``n_classes`` classes (one line), or None."""
    if verdict in (POSTERIOR, PAPER):
        return None
    from crowdbudget.aggregation.registry import registered_aggregators

    name = verdict.split(":")[0]
    spec = registered_aggregators().get(name)
    if spec is not None and spec.binary_only and n_classes != 2:
        return f"verdict {name!r} takes two classes only; this problem has {n_classes}"
    return None


def check_verdict(verdict: Any, n_classes: int) -> str:
    """``verdict`` (stripped) if it is ``"posterior"`` or an aggregator id that takes
    ``n_classes`` classes; else :class:`InvalidParameterError` naming what is allowed."""
    if not isinstance(verdict, str) or not verdict.strip():
        raise InvalidParameterError(
            f"verdict must be 'posterior' or an aggregator id, got {verdict!r}"
        )
    verdict = verdict.strip()
    if verdict in (POSTERIOR, PAPER):
        return verdict
    try:
        make_aggregator(verdict)
    except CrowdBudgetError as error:
        raise InvalidParameterError(
            f"verdict must be 'posterior' or an aggregator id ({error})"
        ) from None
    reason = verdict_refusal(verdict, n_classes)
    if reason is not None:
        raise InvalidParameterError(reason)
    return verdict


def make_verdict(text: str | None = None, workers: str = "as-given") -> Verdict:
    """The verdict named by ``text``: ``None`` or ``"posterior"`` — the policy's own model;
    otherwise an aggregator id (:func:`~crowdbudget.aggregation.registry.make_aggregator`)."""
    if text is None or text in (POSTERIOR, PAPER):
        if workers != "as-given":
            raise InvalidParameterError(
                "verdict-workers=... needs an aggregator verdict (e.g. verdict=one-coin-em)"
            )
        return PosteriorVerdict("paper" if text == PAPER else POSTERIOR_TIES)
    return AggregatorVerdict(text, workers)


__all__ = [
    "PAPER",
    "POSTERIOR",
    "TIE_TOLERANCE",
    "VERDICT_WORKERS",
    "AggregatorVerdict",
    "PosteriorVerdict",
    "Verdict",
    "break_ties_by_prior",
    "check_verdict",
    "log_label_data",
    "make_verdict",
    "verdict_refusal",
]
