"""``lone_labels="skip-predictive"``: a label alone on its item read through its worker's
predictive ``E_q[e]`` (:mod:`crowdbudget.aggregation._lone_predictive`), and its id
``bds-hard-blind-recheck-lone``."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
from scipy.special import digamma, gammaln

from crowdbudget.aggregation import BayesianDawidSkene, make_aggregator
from crowdbudget.datasets import load_dataset
from crowdbudget.datasets.loaders import from_frame
from crowdbudget.labels import LabelData


def _tiny_crowd() -> LabelData:
    """Workers a, b share items 0–3 (partnered); worker c gives one label, alone on item 4."""
    rows = [
        ("0", "a", 0), ("0", "b", 0), ("1", "a", 1), ("1", "b", 1),
        ("2", "a", 0), ("2", "b", 1), ("3", "a", 1), ("3", "b", 1),
        ("4", "c", 1),
    ]  # fmt: skip
    return from_frame(pd.DataFrame(rows, columns=["task", "worker", "label"]))


def _exact_posterior(
    data: LabelData, item: int, prior: np.ndarray, class_prior: float
) -> np.ndarray:
    """p(z_item | every label) under the model with the confusion prior ``prior`` (C, C) and
    ``π ~ Dir(class_prior)``: every assignment of classes to the items enumerated, ``π`` and
    every ``e_jc`` integrated out exactly (Dirichlet–multinomial)."""
    C, N, J = data.n_classes, data.n_items, data.n_workers
    log_mass = np.zeros(C)
    log_terms: list[list[float]] = [[] for _ in range(C)]
    for z in itertools.product(range(C), repeat=N):
        classes = np.asarray(z)
        n_class = np.bincount(classes, minlength=C).astype(float)
        log_joint = float(np.sum(gammaln(class_prior + n_class)) - gammaln(C * class_prior + N))
        counts = np.zeros((J, C, C))
        np.add.at(counts, (data.workers, classes[data.items], data.labels), 1.0)
        alpha = prior[None] + counts
        log_joint += float(np.sum(gammaln(alpha)) - np.sum(gammaln(alpha.sum(axis=2))))
        log_terms[classes[item]].append(log_joint)
    for c in range(C):
        terms = np.asarray(log_terms[c])
        log_mass[c] = terms.max() + np.log(np.sum(np.exp(terms - terms.max())))
    posterior = np.exp(log_mass - log_mass.max())
    return posterior / posterior.sum()


def test_a_lone_item_reads_the_exact_posterior_of_the_model() -> None:
    """With π held (a very strong class prior) and a worker whose only label is the lone
    item's, the exact model's posterior of that item — every assignment enumerated — is its
    worker's predictive; ``"skip-predictive"`` gives it, ``"skip"`` (``exp E[log e]``) not."""
    data = _tiny_crowd()
    prior = np.array([[3.0, 0.5], [0.5, 3.0]])
    strong = 1e7
    exact = _exact_posterior(data, 4, prior, strong)
    fits = {
        lone: BayesianDawidSkene(
            confusion_prior=(3.0, 0.5), class_prior=strong, lone_labels=lone, tol=1e-12
        ).fit(data)
        for lone in ("skip-predictive", "skip")
    }
    np.testing.assert_allclose(fits["skip-predictive"].probas_[4], exact, atol=1e-6)
    np.testing.assert_allclose(exact, [0.5 / 3.5, 3.0 / 3.5] / np.sum([0.5 / 3.5, 3.0 / 3.5]))
    mean_field = np.exp(digamma([0.5, 3.0]) - digamma(3.5))
    np.testing.assert_allclose(fits["skip"].probas_[4], mean_field / mean_field.sum(), atol=1e-6)
    assert abs(fits["skip"].probas_[4, 0] - exact[0]) > 0.05  # the two readings differ


def test_a_lone_item_reads_its_workers_posterior_mean_and_the_class_prior() -> None:
    """At the fixed point a lone item's shares are ``∝ exp E[log π_c] · E_q[e_jcx]`` with the
    fitted workers (here the default's worker kinds, two classes: the NumPy loop) and
    ``q(π)`` counting the lone items as read."""
    data = _tiny_crowd()
    fit = make_aggregator("bds-ev-blind-own:lone-labels=skip-predictive:tol=1e-12").fit(data)
    nu = 1.0 + fit.probas_.sum(axis=0)
    np.testing.assert_allclose(fit.priors_, nu / nu.sum())
    expected = np.exp(digamma(nu) - digamma(nu.sum())) * fit.errors_[2, :, 1]
    np.testing.assert_allclose(fit.probas_[4], expected / expected.sum(), atol=1e-8)


def test_at_one_label_per_item_every_worker_is_the_crowd_prior() -> None:
    """Nothing can be checked: no lone label counts (no fallback to counting), every worker's
    posterior mean is the prior's, and each item's label is weighed against the class
    proportions through it."""
    data = load_dataset("rte")
    _, first = np.unique(data.items, return_index=True)
    one = data.labels_subset(first)
    fit = make_aggregator("bds-hard-blind-recheck-lone").fit(one)
    prior = fit.confusion_prior_
    prior_mean = prior / prior.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(fit.errors_, np.broadcast_to(prior_mean, fit.errors_.shape))
    nu = 1.0 + fit.probas_.sum(axis=0)
    expected = np.exp(digamma(nu) - digamma(nu.sum()))[None] * prior_mean[:, one.labels].T
    np.testing.assert_allclose(fit.probas_, expected / expected.sum(axis=1, keepdims=True))
    default = make_aggregator("bds-hard-blind-recheck").fit(one)
    assert default.probas_.max(axis=1).min() > 0.999  # the reading this replaces
    assert fit.probas_.max(axis=1).max() < 0.999


def test_without_lone_labels_the_fit_is_the_defaults_bit_for_bit() -> None:
    """No item with a single label: the candidate is ``bds-hard-blind-recheck`` (compiled
    iterations, the same choices), bit for bit."""
    for name in ("rte", "temp"):
        data = load_dataset(name)
        assert np.bincount(data.items).min() >= 2
        lone = make_aggregator("bds-hard-blind-recheck-lone").fit(data)
        default = make_aggregator("bds-hard-blind-recheck").fit(data)
        np.testing.assert_array_equal(lone.probas_, default.probas_)
        np.testing.assert_array_equal(lone.errors_, default.errors_)


def test_the_candidate_has_an_id_that_composes_in_a_policy() -> None:
    """``bds-hard-blind-recheck-lone`` is ``bds-hard-blind-recheck:lone-labels=skip-predictive``
    under a name without a colon, so a policy string can compose it."""
    from crowdbudget.registry import split_verdict

    data = _tiny_crowd()
    named = make_aggregator("bds-hard-blind-recheck-lone").fit(data)
    spelled = make_aggregator("bds-hard-blind-recheck:lone-labels=skip-predictive").fit(data)
    np.testing.assert_array_equal(named.probas_, spelled.probas_)
    policy = "opt-kg:posterior=one-coin:verdict=bds-hard-blind-recheck-lone"
    assert split_verdict(policy)[1].name == "bds-hard-blind-recheck-lone"
