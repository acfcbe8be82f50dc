"""The allocation-policy contract (DESIGN §5).

A policy is built from its parameters only (the constructor stores, scikit-learn style), then

- ``reset(problem, rng)`` prepares it for one campaign (fitted attributes end in ``_``);
- ``select(state, worker=None)`` returns the next :class:`Assignment`, or None to stop.
  **Push mode**: ``worker`` is None and the policy may choose the worker too. **Pull mode**: a
  worker has arrived and the policy picks the item for that worker. Several assignments may be
  pending at once; ``state.pending`` counts them per item.
- ``observe(event)`` learns from a label that came back (posterior and score updates happen
  here, in O(1) or O(log n_items) — never O(n_items)).

A policy whose ``select`` changes state that ``observe`` does not rebuild (a cursor, a plan
position, a queue or bucket order, the probability of a pending draw) declares it
(``keeps_select_state``): a live campaign then logs the questions the policy was asked in its
events, and a reload asks them again (:mod:`crowdbudget.campaign.problem_build`, "Select-side
state"), so a restarted campaign makes the never-restarted one's decisions.

The same object drives a simulation and a live campaign. ``testing.check_policy`` is the
conformance suite every registered policy passes.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.types import (
    Assignment,
    CampaignState,
    FloatArray,
    IntArray,
    LabelEvent,
    Problem,
)


def vote_posterior_labels(state: CampaignState) -> IntArray:
    """The Bayes rule on the prior and the vote counts alone, shape (n_items,): the Beta
    posterior's ``P(θ ≥ d) ≥ 1/2`` (Chen et al. Prop. 2.1 / Cor. 2.2 — majority vote when the
    prior is symmetric, ties to class 1), or with more than two classes the Dirichlet
    posterior's most probable largest class (§5)."""
    from crowdbudget.posteriors.beta_bernoulli import BetaBernoulliPosterior

    alpha = state.problem.prior_array + state.label_counts
    if state.problem.n_classes > 2:
        from crowdbudget.posteriors.dirichlet import DirichletPosterior

        return DirichletPosterior(alpha, state.n_items).predict()
    return BetaBernoulliPosterior(alpha, state.n_items, state.problem.threshold_array).predict()


def vote_posterior_probabilities(state: CampaignState) -> FloatArray:
    """The class probabilities of :func:`vote_posterior_labels`' model, shape (n_items,
    n_classes): ``P(θ ≥ d)`` and its complement (binary) or each class's probability of being
    the largest under the Dirichlet posterior."""
    alpha = state.problem.prior_array + state.label_counts
    if state.problem.n_classes > 2:
        from crowdbudget.posteriors.dirichlet import DirichletPosterior

        return DirichletPosterior(alpha, state.n_items).class_probabilities()
    from crowdbudget.posteriors.beta_bernoulli import BetaBernoulliPosterior

    beta = BetaBernoulliPosterior(alpha, state.n_items, state.problem.threshold_array)
    return beta.class_probabilities()


def check_push_capable(chooses_workers: bool, policy: str, instead: str) -> None:
    """Refuse push mode (the policy picks (item, worker) pairs) for a policy that picks items
    only (``chooses_workers`` False): one line naming ``policy`` and what to do ``instead``.
    The one check of a push campaign (:meth:`crowdbudget.campaign.Campaign.create`) and of a
    simulated one under the live rules (:func:`crowdbudget.engine.loop.drive`)."""
    if not chooses_workers:
        raise InvalidParameterError(
            f"policy {policy} picks items only, so it cannot push (item, worker) pairs; {instead}"
        )


class AllocationPolicy(ABC):
    """Base class of every allocation policy.

    Class attributes:
        budget_aware: decisions depend on the total budget (exact DP, finite-horizon Gittins);
            the experiment runner then runs one campaign per budget instead of recording
            checkpoints along one run.
        chooses_workers: in push mode, the policy picks the worker as well as the item.
        binary_only: the policy only handles two classes.
        needs_workers: the problem must name its workers (``Problem.n_workers``).
        needs_features: the problem must carry instance features (``Problem.features``).
        needs_contexts: the problem must give every task a context (``Problem.contexts``).
        unit_prices_only: every label costs one budget unit (no ``worker_prices``).
        supports_pull: it can answer an arriving worker (pull mode).

        These flags are the policy's capabilities, declared once: the registry reads them from
        the class (:class:`crowdbudget.registry.DeclaredByClass`).
        replay_pull: in pull mode on a replay (``state.pairs`` set) the policy only offers
            the arriving worker items they have an unused recorded label for (item–worker
            policies do by construction; item-only ones read
            ``state.availability.items_for_worker``).
        keeps_select_state: ``select`` changes state that ``observe`` does not rebuild, so
            replaying the labels alone does not give the policy back (module docstring); a
            live campaign logs the questions asked of such a policy and a reload asks them
            again. Not a capability: it changes no decision, only what a live campaign's
            events carry.
        default_verdict: the verdict a campaign of this policy uses when neither the id
            (``…:verdict=ID``) nor the caller (``--verdict``, ``verdict=``) names one:
            ``"posterior"`` (the policy's own model) for most; an aggregator id where the
            policy's model allocates well but reads its labels worse than that aggregator
            (the worker-aware one-coin policies; docs/decisions.md). The registry applies it
            (:func:`crowdbudget.registry.split_verdict`); naming ``verdict=posterior`` keeps
            the policy's own model.
    """

    budget_aware: ClassVar[bool] = False
    chooses_workers: ClassVar[bool] = False
    binary_only: ClassVar[bool] = True
    needs_workers: ClassVar[bool] = False
    needs_features: ClassVar[bool] = False
    needs_contexts: ClassVar[bool] = False
    unit_prices_only: ClassVar[bool] = False
    supports_pull: ClassVar[bool] = True
    replay_pull: ClassVar[bool] = False
    keeps_select_state: ClassVar[bool] = False
    default_verdict: ClassVar[str] = "posterior"

    # ---- scikit-learn style parameter access -------------------------------------------------
    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [
            p.name
            for p in sig.parameters.values()
            if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]

    def get_params(self) -> dict[str, Any]:
        """The constructor parameters and their values."""
        return {name: getattr(self, name) for name in self._param_names()}

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"

    # ---- the contract --------------------------------------------------------------------------
    def reset(self, problem: Problem, rng: np.random.Generator) -> None:
        """Prepare for a new campaign on ``problem``; ``rng`` is the only source of randomness."""
        if self.binary_only and problem.n_classes != 2:
            raise InvalidParameterError(
                f"{type(self).__name__} handles binary problems only, got n_classes="
                f"{problem.n_classes}"
            )
        self.validate_params()
        self.problem_ = problem
        self.rng_ = rng
        self._reset(problem, rng)

    def validate_params(self) -> None:  # noqa: B027 - optional hook
        """Raise :class:`InvalidParameterError` if a constructor parameter is out of range.

        Called by ``reset`` and by :func:`crowdbudget.registry.make_policy`, so that a bad id
        fails before any work starts (the constructor itself only stores, scikit-learn style).
        """

    def _reset(self, problem: Problem, rng: np.random.Generator) -> None:  # noqa: B027
        """Subclass hook of :meth:`reset` (default: nothing to prepare)."""

    @abstractmethod
    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        """The next assignment, or None when the policy stops (or nothing is affordable).

        Candidates come from ``state.availability`` (:class:`~crowdbudget.types.Availability`):
        a policy that searches runs its search through ``availability.search`` and reads the
        open items there; one that names an item from a plan is asked once, and a live step
        treats an item that is not open as "no work for this worker now"."""

    def observe(self, event: LabelEvent) -> None:  # noqa: B027 - optional hook
        """Learn from a label that came back (default: nothing to learn)."""

    def observe_known(self, event: LabelEvent, truth: int) -> None:
        """Learn from a label on an item whose class ``truth`` is known (a control answer):
        a worker-aware policy reads it as a definite right or wrong answer of its worker
        (:mod:`crowdbudget.policies.worker_aware`); default: an ordinary label."""
        self.observe(event)

    def final_labels(self, state: CampaignState) -> IntArray:
        """Final labels after the campaign, shape (n_items,).

        Default: the Bayes rule on the Beta posterior built from the problem's prior and the
        state's vote counts (Chen et al. Prop. 2.1 / Cor. 2.2 — majority vote when the prior is
        symmetric); with more than two classes the Dirichlet posterior's most probable
        largest class (§5). Policies with a richer model override this.
        """
        return vote_posterior_labels(state)

    def final_probabilities(self, state: CampaignState) -> FloatArray:
        """P(item's class = c) under the model that gives :meth:`final_labels`, shape
        (n_items, n_classes), so that a label and its confidence come from one model.

        Default: the policy's posterior (``posterior_.class_probabilities()``) when it has
        one, else the Beta posterior P(θ >= d) (binary) or the Dirichlet posterior's
        probability of each class being the largest, from the prior and the votes — the
        model of the default :meth:`final_labels`.
        """
        n_items, n_classes = state.n_items, state.problem.n_classes
        posterior = getattr(self, "posterior_", None)
        probabilities = getattr(posterior, "class_probabilities", None)
        if callable(probabilities):
            p = np.asarray(probabilities(), dtype=float)
            if p.shape == (n_items, n_classes):
                return p
        return vote_posterior_probabilities(state)

    # ---- helpers shared by policies -----------------------------------------------------------
    def _price(self, state: CampaignState, worker: int | None) -> float:
        return state.problem.price_of(worker)


class ScoringPolicy(AllocationPolicy):
    """A policy that only scores items: the base asks ``state.availability`` for the open
    candidates, checks the asking worker's price against the budget, puts busy items last
    (a live campaign) and names the best-scored candidate.

    A subclass implements :meth:`scores` and, if it learns, ``observe``; it has no
    availability, price or capacity code of its own. Ties go to the first candidate, or to
    a uniformly random one (``rng_``) when the instance has ``tie_break == "random"``. Item
    selection only (push mode: the world picks the worker); on a replay in pull mode the
    candidates are the asking worker's recorded items (``replay_pull``).
    """

    replay_pull: ClassVar[bool] = True

    @abstractmethod
    def scores(self, state: CampaignState, items: IntArray) -> FloatArray:
        """The score of each candidate in ``items`` (ascending item indices, shape (n,)),
        shape (n,); the largest is named."""

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        return state.availability.offer(
            worker, lambda price: self._best_scored(state, worker, price)
        )

    def _best_scored(
        self, state: CampaignState, worker: int | None, price: float
    ) -> Assignment | None:
        availability = state.availability
        items = availability.items_for_worker(worker)
        if items is None:
            items = availability.open_items()
        if items.shape[0] == 0:
            return None
        scores = np.asarray(self.scores(state, items), dtype=float)
        best = np.flatnonzero(scores == scores.max())
        pick = 0
        if best.shape[0] > 1 and getattr(self, "tie_break", "first") == "random":
            pick = int(self.rng_.integers(best.shape[0]))
        return Assignment(item=int(items[best[pick]]), worker=worker, price=price)
