"""What a live campaign reports (DESIGN §5): final labels with their confidence, the status,
the verdict's calibration on gold, the labels received, worker agreement and the dashboard's
data — read models of the campaign's event-sourced state.

:class:`CampaignReadModel` reads a :class:`~crowdbudget.campaign.Campaign` — its
configuration, id maps, core state (``state.label_counts``, ``state.label_log``), policy,
ledger, gold and spend timeline — and writes no event. Final labels and their confidence come
from one model, the campaign's verdict (:meth:`CampaignReadModel.verdict_probabilities`):
:meth:`~CampaignReadModel.results`, :meth:`~CampaignReadModel.calibration`,
:meth:`~CampaignReadModel.worker_reliability`, the dashboard and the status'
``estimated_accuracy`` and ``items_confident`` all read it (one fit per event count and
verdict, kept by the read model).

With control tasks (:mod:`crowdbudget.campaign.control`) an aggregator verdict is fitted with
the control items' answers as known truth (:func:`fit_verdict`) and, when the requester
chose ``drop``, without the blocked workers' labels; gold is scored on the items that are
not control items.

An aggregator verdict may be fitted in another process: :meth:`~CampaignReadModel.
verdict_fit_input` gives the picklable arguments of :func:`fit_verdict`, and its answer is
passed back as ``fitted`` (the service's child processes do this).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from crowdbudget.aggregation.base import Aggregator
from crowdbudget.aggregation.calibration import (
    DEFAULT_BINS,
    apply_probability_floor,
    calibration_metrics,
    fit_probability_floor,
    floor_calibration,
    reliability_bins,
)
from crowdbudget.aggregation.registry import make_aggregator
from crowdbudget.campaign.problem_build import cheapest_price
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.policies.verdict import POSTERIOR, check_verdict, make_verdict
from crowdbudget.posteriors.beta_bernoulli import positive_probability
from crowdbudget.posteriors.dirichlet import largest_class_probabilities
from crowdbudget.registry import split_verdict
from crowdbudget.types import FloatArray, IntArray

if TYPE_CHECKING:
    from crowdbudget.campaign.campaign import Campaign

#: :func:`fit_verdict`'s answer: final labels (n_items,), class probabilities
#: (n_items, n_classes) and a model-choosing verdict's choice (None for the others)
VerdictFit = tuple[IntArray, FloatArray, dict[str, Any] | None]


#: what an aggregator verdict is fitted on: ``(aggregator id, labels, seed, known truth)``,
#: the arguments of :func:`fit_verdict` (picklable: the service fits in a child process)
FitInput = tuple[str, LabelData, int, dict[int, int] | None]


def fitted_with_truth(
    aggregator: Aggregator, data: LabelData, known_truth: Mapping[int, int] | None
) -> Aggregator:
    """``aggregator`` fitted on ``data`` with ``known_truth`` (item index -> class index)
    when its ``fit`` takes it (``Aggregator.fit(labels, *, known_truth=None)``; one that
    does not is fitted without); no known truth: the plain fit."""
    fit: Callable[..., Aggregator] = aggregator.fit  # the keyword is newer than some fits
    if known_truth and "known_truth" in inspect.signature(fit).parameters:
        return fit(data, known_truth=known_truth)
    return fit(data)


def fit_verdict(
    verdict: str, data: LabelData, seed: int, known_truth: Mapping[int, int] | None = None
) -> VerdictFit:
    """An aggregator verdict fitted on ``data`` (:meth:`CampaignReadModel.verdict_fit_input`)
    with the control items' ``known_truth`` (item index -> class index; None: none):
    final labels, shape (n_items,), class probabilities, shape (n_items, n_classes), and, for a
    verdict that chooses among models (``auto``: ``choice()`` of the fitted aggregator), what
    it chose and why as a JSON-ready dict (None for any other verdict)."""
    fitted = fitted_with_truth(make_aggregator(f"{verdict}:seed={seed}"), data, known_truth)
    report = getattr(fitted, "choice", None)
    return (
        np.asarray(fitted.labels_, dtype=np.int64),
        np.asarray(fitted.probas_, dtype=float),
        report() if callable(report) else None,
    )


def _none_for_nan(metrics: dict[str, float]) -> dict[str, float | None]:
    """``metrics`` with NaN (a metric with nothing to score) as None, JSON's null."""
    return {k: (None if np.isnan(v) else v) for k, v in metrics.items()}


#: the reasons :func:`stop_reason_of` gives, per cause; a final one means no assignment is
#: possible for anyone any more (until items, workers or budget change)
STOP_REASONS: Mapping[str, tuple[str, bool]] = {
    "budget": ("the budget left pays for no further label", True),
    "items": ("every item is finished (at its label cap, or closed by the policy)", True),
    "pairs": ("no (item, worker) pair of the team is left to ask", True),
    "policy": (
        "the policy has no further assignment to give (its plan is complete, or no pair is "
        "worth asking by its own rule)",
        True,
    ),
    "done": (
        "every worker so far has already labeled (or holds, or is at their capacity for) "
        "the items the policy offers; a new worker can still take work",
        False,
    ),
    "declined": (
        "the policy offers no further work to any worker so far (it chooses per worker); "
        "a new worker may get work",
        False,
    ),
    "blocked": (
        "every worker so far is blocked or has no work left (control tasks); a new worker "
        "may get work",
        False,
    ),
}


def stop_reason_of(
    campaign: Campaign, policy_status: Mapping[str, Any], pending: int
) -> tuple[str | None, bool]:
    """``(reason, final)``: why no further assignment is possible now, or ``(None,
    False)`` while one is (or work is pending: its labels may open more).

    Final reasons (``stopped``): the budget left pays for no label at the cheapest
    price; the policy stopped by its own rule (``stopped_early``, Requallo); no item is
    open; in push mode the last request found no pair (every pair used, or the policy's
    plan is complete); in pull mode every known worker's last request got none from the
    policy itself (one that does not model workers). Not final: the policy, which
    models workers, declined each of them; or every known worker has every open item
    already (or is at their capacity, or the policy offers only items they have) — a new
    worker would get work. The pull and push reasons are learned from requests for work
    since the last change (``Campaign._no_work``, written by ``next_assignment`` and
    ``push_assignments``; a freshly loaded copy knows them once the workers ask again)."""
    if pending:
        return None, False
    if not campaign.ledger.can_afford(cheapest_price(campaign.config)):
        return STOP_REASONS["budget"]
    if policy_status.get("stopped_early", False):
        return "the policy stopped by its own rule (every item meets its requirement)", True
    open_items = campaign.state.eligible
    control = campaign.control_ledger
    if control is not None and control.items.size:
        open_items = open_items.copy()
        open_items[control.items] = False  # control items are served, not finished
    if not np.any(open_items):
        return STOP_REASONS["items"]
    if campaign._push:
        cause = campaign._no_work.get(None)
        return (None, False) if cause is None else STOP_REASONS[cause]
    known = range(len(campaign.worker_ids))
    if not known or any(w not in campaign._no_work for w in known):
        return None, False
    causes = {campaign._no_work[w] for w in known}
    if causes <= {"policy", "budget"}:
        return STOP_REASONS["policy"]
    if "blocked" in causes:
        return STOP_REASONS["blocked"]
    return STOP_REASONS["declined" if "declined" in causes else "done"]


def push_cause(campaign: Campaign) -> str:
    """Why the policy of a push-mode campaign chose no (item, worker) pair: ``budget``,
    ``pairs`` (none left) or ``policy`` (its own rule); a key of :data:`STOP_REASONS`."""
    if not campaign.ledger.can_afford(cheapest_price(campaign.config)):
        return "budget"
    if not campaign.state.availability.any_pair_left():
        return "pairs"
    return "policy"


class CampaignReadModel:
    """The reports of one campaign (see the module docstring); ``campaign.read_model``.

    Holds no state of its own but the last model choice of a model-choosing verdict
    (``auto``), which :meth:`status` reports as ``verdict_choice``: a read model only, no
    event, so no accepted label changes it."""

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.verdict_choice: dict[str, Any] | None = None
        # the last aggregator fit: ((event count, fit input's verdict id), fit); a fit is a
        # function of the events, so it serves every read at that count
        self._last_fit: tuple[tuple[int, str], VerdictFit] | None = None

    def _fit(self, fit_input: FitInput) -> VerdictFit:
        """:func:`fit_verdict` on ``fit_input``, once per event count and verdict (copies
        of the arrays: a caller may change its own)."""
        key = (self.campaign.event_count, fit_input[0])
        if self._last_fit is None or self._last_fit[0] != key:
            self._last_fit = (key, fit_verdict(*fit_input))
        labels, probabilities, choice = self._last_fit[1]
        return labels.copy(), probabilities.copy(), choice

    # ------------------------------------------------------------------ the verdict
    def class_probabilities(self) -> FloatArray:
        """Posterior class probabilities per item from the prior and the votes,
        shape (n_items, n_classes): ``[1 − I, I]`` (binary) or P(class is the largest)."""
        campaign = self.campaign
        alpha = campaign.problem.prior_array + campaign.state.label_counts
        if alpha.shape[1] == 2:
            p = positive_probability(alpha[:, 1], alpha[:, 0])
            return np.column_stack([1.0 - p, p])
        return largest_class_probabilities(alpha)

    def verdict_probabilities(self, verdict: str | None = None) -> tuple[IntArray, FloatArray]:
        """Final labels, shape (n_items,), and class probabilities, shape (n_items,
        n_classes), from one model: the campaign's verdict, or ``verdict`` if given.

        ``"posterior"`` / ``"paper"``: the policy's
        :meth:`~crowdbudget.policies.base.AllocationPolicy.final_labels` and
        :meth:`~crowdbudget.policies.base.AllocationPolicy.final_probabilities` (its
        posterior, or the aggregator of an aggregating policy), ties broken as
        :class:`~crowdbudget.policies.verdict.PosteriorVerdict` says. An aggregator id: that
        aggregator fitted on every label received (answered and imported;
        :meth:`verdict_fit_input`, :func:`fit_verdict`); an item without labels gets uniform
        probabilities.
        """
        fit_input = self.verdict_fit_input(verdict)
        if fit_input is not None:
            return self._kept_choice(self._fit(fit_input), verdict)
        campaign = self.campaign
        config = campaign.config
        # the policy's own model, ties broken as the verdict says (policies/verdict.py),
        # its random draws seeded by the campaign's seed
        model = make_verdict(check_verdict(verdict or config.verdict, len(config.classes)))
        model.reset(campaign.state.problem, np.random.default_rng(config.seed))
        return (
            model.labels(campaign.state, campaign.policy),
            model.probabilities(campaign.state, campaign.policy),
        )

    def verdict_fit_input(self, verdict: str | None = None) -> FitInput | None:
        """What an aggregator verdict is fitted on — ``(aggregator id, labels, seed, known
        truth)``, the arguments of :func:`fit_verdict`, picklable so the fit may run in
        another process — or None for the policy's own model (``posterior`` / ``paper``:
        computed in place). ``verdict`` overrides the campaign's, as in
        :meth:`verdict_probabilities`. The labels are every label received but, when the
        requester chose ``drop``, the blocked workers'; the known truth is the control
        items' (None without control items)."""
        campaign = self.campaign
        config = campaign.config
        # ``verdict-workers=per-context`` named with the policy applies to the campaign's verdict
        per_context = (
            verdict is None and split_verdict(config.policy, POSTERIOR)[1].workers == "per-context"
        )
        verdict = check_verdict(verdict or config.verdict, len(config.classes))
        if verdict in ("posterior", "paper"):
            return None
        log = campaign.state.label_log
        # copies: the log's columns are views that later labels may outgrow
        items, workers, labels = log.items.copy(), log.workers.copy(), log.labels.copy()
        control = campaign.control_ledger
        if control is not None and control.blocked and campaign.blocked_labels == "drop":
            kept = ~np.isin(workers, np.fromiter(control.blocked, dtype=np.int64))
            items, workers, labels = items[kept], workers[kept], labels[kept]
        worker_ids = np.asarray(campaign.worker_ids, dtype=object)
        contexts = campaign.problem.contexts
        if per_context and contexts is not None:
            # one virtual worker per (context, worker): s·K + j (policies/verdict.py)
            n_workers = len(campaign.worker_ids)
            workers = contexts[items] * n_workers + workers
            n_contexts = int(contexts.max(initial=0)) + 1
            worker_ids = np.array(
                [f"{w}@{s}" for s in range(n_contexts) for w in campaign.worker_ids], dtype=object
            )
        data = LabelData(
            items=items,
            workers=workers,
            labels=labels,
            item_ids=np.asarray(campaign.item_ids, dtype=object),
            worker_ids=worker_ids,
            classes=tuple(config.classes),
        )
        return verdict, data, config.seed, dict(campaign.control_truth) or None

    def _kept_choice(self, fit: VerdictFit, verdict: str | None) -> tuple[IntArray, FloatArray]:
        """The labels and probabilities of ``fit``; a model choice of the campaign's own
        verdict (``verdict`` None or the same id) is kept for :meth:`status` with the label
        count it was made at."""
        labels, probabilities, choice = fit
        if choice is not None and verdict in (None, self.campaign.config.verdict):
            self.verdict_choice = {**choice, "at_labels": len(self.campaign.state.label_log)}
        return labels, probabilities

    def _checked_fitted(
        self, fitted: VerdictFit | None, verdict: str | None
    ) -> tuple[IntArray, FloatArray]:
        """``fitted`` (:func:`fit_verdict`'s answer computed elsewhere) if it covers this
        campaign's items and classes, else the verdict computed here; ValueError on a
        mismatch."""
        if fitted is None:
            return self.verdict_probabilities(verdict)
        labels, probabilities = self._kept_choice(fitted, verdict)
        shape = (len(self.campaign.item_ids), len(self.campaign.config.classes))
        if labels.shape != shape[:1] or probabilities.shape != shape:
            raise ValueError(
                f"a verdict fitted on {probabilities.shape} for a campaign of shape {shape}"
            )
        return labels, probabilities

    # ------------------------------------------------------------------ results and labels
    def results(
        self,
        verdict: str | None = None,
        *,
        floor: bool = False,
        fitted: VerdictFit | None = None,
    ) -> pd.DataFrame:
        """Final label, confidence (the verdict's probability of that label) and number of
        labels per item (``task``-indexed); ``verdict`` overrides the campaign's.

        ``floor=True``: the confidences under the probability floor fitted on the campaign's
        gold sample (:func:`~crowdbudget.aggregation.calibration.fit_probability_floor` on the
        gold items with labels — the ``floor.epsilon`` that :meth:`calibration` reports), the
        labels unchanged: what a requester who checked a sample by hand may quote.
        InvalidParameterError while no gold item has a label.

        ``fitted``: the verdict's labels and probabilities already computed on this
        campaign's current items (:meth:`verdict_fit_input` and :func:`fit_verdict` in another
        process); ValueError if their shapes do not match it."""
        campaign = self.campaign
        labels, probabilities = self._checked_fitted(fitted, verdict)
        if floor:
            probabilities = apply_probability_floor(
                probabilities, fit_probability_floor(probabilities, self.scored_gold())
            )
        classes = np.asarray(campaign.config.classes, dtype=object)
        return pd.DataFrame(
            {
                "label": classes[labels],
                "confidence": probabilities[np.arange(labels.shape[0]), labels],
                "n_labels": campaign.state.label_counts.sum(axis=1),
            },
            index=pd.Index(campaign.item_ids, name="task"),
        )

    def export_labels(self) -> pd.DataFrame:
        """Every label received (answered and imported), crowd-kit's ``task, worker, label``."""
        campaign = self.campaign
        log = campaign.state.label_log
        items = np.asarray(campaign.item_ids, dtype=object)
        workers = np.asarray(campaign.worker_ids, dtype=object)
        classes = np.asarray(campaign.config.classes, dtype=object)
        return pd.DataFrame(
            {"task": items[log.items], "worker": workers[log.workers], "label": classes[log.labels]}
        )

    # ------------------------------------------------------------------ gold (evaluation)
    def scored_gold(self, *, required: bool = True) -> IntArray:
        """Gold class per item, shape (n_items,), −1 where there is none or the item has no
        label (an unlabelled item shows only the prior: it says nothing about the verdict).
        ``required``: InvalidParameterError when no item is left."""
        campaign = self.campaign
        gold_classes = campaign.gold_classes
        gold = np.full(len(campaign.item_ids), -1, dtype=np.int64)
        items = np.fromiter(gold_classes, dtype=np.int64, count=len(gold_classes))
        gold[items] = np.fromiter(gold_classes.values(), dtype=np.int64, count=len(gold_classes))
        gold[campaign.state.label_counts.sum(axis=1) == 0] = -1
        # a control item's answer is known to the verdict: scoring it would flatter it
        gold[list(campaign.control_truth)] = -1
        if required and not np.any(gold >= 0):
            raise InvalidParameterError(
                "floor needs gold labels (PUT …/gold) on items that have labels; "
                f"this campaign has {len(gold_classes)} gold items, none labelled yet"
            )
        return gold

    def calibration(
        self,
        verdict: str | None = None,
        *,
        n_bins: int = DEFAULT_BINS,
        fitted: VerdictFit | None = None,
    ) -> dict[str, Any] | None:
        """Accuracy and calibration of the verdict on the gold sample, None without gold.

        The probabilities are those :meth:`results` reports (the campaign's verdict, or
        ``verdict``); the metrics are :func:`~crowdbudget.aggregation.calibration.
        calibration_metrics` on the gold items with at least one label (``n_scored`` of
        ``n_gold``: an item without labels shows only the prior, which says nothing about
        the verdict). Metrics are None while no gold item has a label. ``fitted``: as in
        :meth:`results`."""
        if not self.campaign.gold_classes:
            return None
        labels, probabilities = self._checked_fitted(fitted, verdict)
        return self.calibration_of(labels, probabilities, verdict, n_bins)

    def calibration_of(
        self,
        labels: IntArray,
        probabilities: FloatArray,
        verdict: str | None = None,
        n_bins: int = DEFAULT_BINS,
    ) -> dict[str, Any]:
        """:meth:`calibration` of a verdict already computed: final ``labels``, shape
        (n_items,), and class ``probabilities``, shape (n_items, n_classes)."""
        config = self.campaign.config
        gold = self.scored_gold(required=False)
        metrics = calibration_metrics(probabilities, gold, labels=labels, n_bins=n_bins)
        # the probability floor the gold sample supports, scored on gold it was not fitted on
        # (folds drawn from the campaign's seed, outside the policy's stream)
        floor = floor_calibration(
            probabilities,
            gold,
            labels=labels,
            n_bins=n_bins,
            rng=np.random.default_rng(config.seed),
        )
        fitted = floor["cross_fitted"]
        return {
            "verdict": check_verdict(verdict or config.verdict, len(config.classes)),
            "n_gold": len(self.campaign.gold_classes),
            "n_scored": int(np.count_nonzero(gold >= 0)),
            **_none_for_nan(metrics),
            "bins": reliability_bins(probabilities, gold, labels=labels, n_bins=n_bins),
            "floor": {
                "epsilon": floor["floor"],
                "n_folds": floor["n_folds"],
                "cross_fitted": None if fitted is None else _none_for_nan(fitted),
            },
        }

    # ------------------------------------------------------------------ progress
    def status(self, *, fitted: VerdictFit | None = None) -> dict[str, Any]:
        """Spending and progress: spent, pending, remaining, labels, estimated accuracy (the
        mean probability the campaign's verdict gives each item's final label — the prior's
        while no label has come; ``fitted``: the verdict computed elsewhere, as in
        :meth:`results`).

        ``items_confident``: the items whose final label the verdict gives probability
        >= 0.95 (the same fit as ``estimated_accuracy``). A policy that reports its own
        progress (``policy.status()``, e.g. Requallo's items meeting the requirement) adds it
        under ``policy_status``; ``items_complete`` is its count of complete items when it
        has one (else ``items_confident``).

        ``stopped`` is true as soon as no further assignment is possible, with nothing
        pending, and ``stop_reason`` says why (the budget is spent; the policy stopped by
        itself — no item gains from another label, Li et al. Algorithm 1; every item is
        finished; no (item, worker) pair is left; the policy's plan is complete — the
        ε-first family and ``kos`` plan once); ``saved`` is then the budget left unspent.
        ``stop_reason`` without ``stopped``: every worker so far has every open item (a new
        worker can take work). Both None/false while work can be handed out (see
        :func:`stop_reason_of`). Releases the overdue assignments first.

        Control tasks (:mod:`crowdbudget.campaign.control`): ``control`` (None without) holds
        the rule, ``blocked_labels``, the control items, answers and spend on them, and
        ``blocked_workers`` lists each blocked worker with the evidence.
        """
        self.campaign.expire_overdue()
        has_labels = len(self.campaign.state.label_log) > 0
        return self._status(self._checked_fitted(fitted, None) if has_labels else None)

    def _status(self, verdict: tuple[IntArray, FloatArray] | None) -> dict[str, Any]:
        """:meth:`status` with the campaign's ``verdict`` (final labels, probabilities;
        None while no label has come: the prior's probabilities)."""
        campaign = self.campaign
        config = campaign.config
        campaign.expire_overdue()
        if verdict is None:
            accuracy = self.class_probabilities().max(axis=1)
        else:
            labels, probabilities = verdict
            accuracy = probabilities[np.arange(labels.shape[0]), labels]
        counts = campaign.state.label_counts.sum(axis=1)
        report = getattr(campaign.policy, "status", None)
        policy_status: dict[str, Any] = report() if callable(report) else {}
        pending = int(campaign.state.pending.sum())
        stop_reason, stopped = stop_reason_of(campaign, policy_status, pending)
        # the items whose final label the verdict gives probability >= 0.95 (the prior's
        # confidence while no label has come)
        confident = int(np.count_nonzero(accuracy >= 0.95))
        ledger = campaign.ledger
        return {
            "campaign_id": config.campaign_id,
            "name": config.name,
            "policy": config.policy,
            "budget": config.budget,
            "spent": float(ledger.spent),
            "committed": float(ledger.committed),
            "remaining": float(ledger.remaining),
            "pending": pending,
            "n_items": len(campaign.item_ids),
            "n_workers": len(campaign.worker_ids),
            "n_labels": len(campaign.state.label_log),
            "items_labeled": int(np.count_nonzero(counts)),
            "items_confident": confident,
            "items_complete": int(policy_status.get("complete", confident)),
            "estimated_accuracy": float(accuracy.mean()) if accuracy.size else None,
            "stopped": stopped,
            "stop_reason": stop_reason,
            "saved": float(ledger.remaining) if stopped else 0.0,
            "policy_status": policy_status,
            "verdict_choice": self.verdict_choice,
            "control": campaign.control_status(),
            "blocked_workers": campaign.blocked_workers(),
            "events": campaign.event_count,
        }

    # ------------------------------------------------------------------ workers
    def worker_reliability(self) -> pd.DataFrame:
        """Per worker: labels given and agreement with the current final labels (a quick
        reliability estimate, the one majority-vote aggregators report as ``skills_``)."""
        if len(self.campaign.state.label_log) == 0:
            return self.worker_agreement(None)
        return self.worker_agreement(self.verdict_probabilities()[0])

    def worker_agreement(self, labels: IntArray | None) -> pd.DataFrame:
        """:meth:`worker_reliability` against the verdict's final ``labels``, shape
        (n_items,) (None: no labels yet)."""
        campaign = self.campaign
        log = campaign.state.label_log
        if labels is None or len(log) == 0:
            return pd.DataFrame({"worker": [], "n_labels": [], "agreement": []})
        n_workers = len(campaign.worker_ids)
        agree = (labels[log.items] == log.labels).astype(float)
        n = np.bincount(log.workers, minlength=n_workers)
        hits = np.bincount(log.workers, weights=agree, minlength=n_workers)
        return pd.DataFrame(
            {"worker": campaign.worker_ids, "n_labels": n, "agreement": hits / np.maximum(n, 1)}
        )

    # ------------------------------------------------------------------ the dashboard
    def dashboard_data(
        self,
        max_points: int = 400,
        max_workers: int = 30,
        *,
        fitted: VerdictFit | None = None,
    ) -> dict[str, Any]:
        """What the dashboard draws: status, spend over time (at most ``max_points``),
        the histogram of labels per item, the most active workers' reliability, and with
        gold the verdict's ``calibration`` on it (:meth:`calibration`; one verdict fit
        serves both). ``fitted``: as in :meth:`results`."""
        campaign = self.campaign
        campaign.expire_overdue()  # before the verdict: the status releases them too
        has_gold = bool(campaign.gold_classes)
        has_labels = len(campaign.state.label_log) > 0
        verdict = self._checked_fitted(fitted, None) if has_labels or has_gold else None
        status = self.status(fitted=fitted)
        timeline = campaign.spend_timeline
        if len(timeline) > max_points:
            keep = np.linspace(0, len(timeline) - 1, max_points).round().astype(int)
            timeline = [timeline[k] for k in keep]
        counts = campaign.state.label_counts.sum(axis=1)
        histogram = np.bincount(counts) if counts.size else np.zeros(1, dtype=np.int64)
        workers = self.worker_agreement(None if verdict is None else verdict[0])
        workers = workers.sort_values("n_labels", ascending=False).head(max_workers)
        blocked = {b["worker"] for b in status["blocked_workers"]}
        extra = {}
        if verdict is not None and has_gold:
            extra["calibration"] = self.calibration_of(*verdict)
        return {
            "status": status,
            "spend": [{"time": t, "spent": s, "labels": n} for t, s, n in timeline],
            "labels_per_item": [int(v) for v in histogram],
            "workers": [
                {"worker": str(w), "n_labels": int(n), "agreement": float(a)}
                | ({"blocked": True} if str(w) in blocked else {})
                for w, n, a in workers.itertuples(index=False)
            ],
            **extra,
        }


class CampaignReports:
    """The reports of a :class:`~crowdbudget.campaign.Campaign` as its own methods
    (``campaign.results()``, ``campaign.status()``, …): each hands over to the campaign's
    read model, ``self.read_model`` (a :class:`CampaignReadModel`), and writes no event."""

    read_model: CampaignReadModel

    def class_probabilities(self) -> FloatArray:
        """Posterior class probabilities per item from the prior and the votes, shape
        (n_items, n_classes) (:meth:`CampaignReadModel.class_probabilities`)."""
        return self.read_model.class_probabilities()

    def verdict_probabilities(self, verdict: str | None = None) -> tuple[IntArray, FloatArray]:
        """Final labels, shape (n_items,), and class probabilities, shape (n_items,
        n_classes), from the campaign's verdict or ``verdict``
        (:meth:`CampaignReadModel.verdict_probabilities`)."""
        return self.read_model.verdict_probabilities(verdict)

    def verdict_fit_input(self, verdict: str | None = None) -> FitInput | None:
        """The picklable arguments of :func:`~crowdbudget.campaign.read_models.fit_verdict`
        for an aggregator verdict, None for the policy's own model
        (:meth:`CampaignReadModel.verdict_fit_input`)."""
        return self.read_model.verdict_fit_input(verdict)

    def results(
        self,
        verdict: str | None = None,
        *,
        floor: bool = False,
        fitted: VerdictFit | None = None,
    ) -> pd.DataFrame:
        """Final label, confidence and number of labels per item, ``task``-indexed
        (:meth:`CampaignReadModel.results`)."""
        return self.read_model.results(verdict, floor=floor, fitted=fitted)

    def calibration(
        self,
        verdict: str | None = None,
        *,
        n_bins: int = DEFAULT_BINS,
        fitted: VerdictFit | None = None,
    ) -> dict[str, Any] | None:
        """Accuracy and calibration of the verdict on the gold sample, None without gold
        (:meth:`CampaignReadModel.calibration`)."""
        return self.read_model.calibration(verdict, n_bins=n_bins, fitted=fitted)

    def export_labels(self) -> pd.DataFrame:
        """Every label received, crowd-kit's ``task, worker, label``
        (:meth:`CampaignReadModel.export_labels`)."""
        return self.read_model.export_labels()

    def status(self, *, fitted: VerdictFit | None = None) -> dict[str, Any]:
        """Spending, progress and whether (and why) the campaign stopped
        (:meth:`CampaignReadModel.status`)."""
        return self.read_model.status(fitted=fitted)

    def worker_reliability(self) -> pd.DataFrame:
        """Per worker: labels given and agreement with the final labels
        (:meth:`CampaignReadModel.worker_reliability`)."""
        return self.read_model.worker_reliability()

    def dashboard_data(
        self,
        max_points: int = 400,
        max_workers: int = 30,
        *,
        fitted: VerdictFit | None = None,
    ) -> dict[str, Any]:
        """What the dashboard draws (:meth:`CampaignReadModel.dashboard_data`)."""
        return self.read_model.dashboard_data(max_points, max_workers, fitted=fitted)
