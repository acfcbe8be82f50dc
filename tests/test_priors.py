"""Method-of-moments Beta prior from held-back tasks (Hu & Frazier §7.2)."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.priors import fit_beta_prior


def test_frequencies_by_hand() -> None:
    # frequencies .2 .8 .5 .9 .1: mean 0.5, variance (ddof=1) 0.125, s = 0.25/0.125 − 1 = 1
    fit = fit_beta_prior([2, 8, 5, 9, 1], [10] * 5)
    assert (fit.a, fit.b) == pytest.approx((0.5, 0.5))
    assert fit.mean == pytest.approx(0.5) and fit.variance == pytest.approx(0.125)
    # beta-binomial: s = 10 (0.25 − 0.125) / (10 · 0.125 − 0.25) = 1.25
    fit = fit_beta_prior([2, 8, 5, 9, 1], [10] * 5, method="beta-binomial")
    assert fit.strength == pytest.approx(1.25)


def test_beta_binomial_recovers_the_prior_and_frequencies_are_too_wide() -> None:
    rng = np.random.default_rng(0)
    theta = rng.beta(3.0, 2.0, size=40_000)
    positives = rng.binomial(10, theta)
    totals = np.full(theta.shape, 10)
    fit = fit_beta_prior(positives, totals, method="beta-binomial")
    assert fit.a == pytest.approx(3.0, rel=0.06) and fit.b == pytest.approx(2.0, rel=0.06)
    naive = fit_beta_prior(positives, totals)
    assert naive.strength < 0.8 * fit.strength  # binomial noise inflates the variance


def test_degenerate_moments_are_refused_or_clipped() -> None:
    with pytest.raises(InvalidParameterError, match="no usable Beta"):
        fit_beta_prior([5, 5, 5], [10, 10, 10])  # zero variance: infinite strength
    clipped = fit_beta_prior([5, 5, 5], [10, 10, 10], on_degenerate="clip")
    assert clipped.strength == pytest.approx(1e4) and "clipped" in clipped.note
    with pytest.raises(InvalidParameterError, match="mean"):
        fit_beta_prior([0, 0], [3, 4])
    with pytest.raises(InvalidParameterError, match="no usable Beta"):
        # variance below the binomial noise: the beta-binomial strength is negative
        fit_beta_prior([4, 6, 5, 5], [10] * 4, method="beta-binomial")
    with pytest.raises(InvalidParameterError, match="one shape"):
        fit_beta_prior([1, 2], [3])
