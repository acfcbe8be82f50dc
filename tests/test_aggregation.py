"""Majority vote and Bayes-rule aggregation against the data README's published figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crowdbudget.aggregation import BayesRuleAggregator, MajorityVote, argmax_random_ties
from crowdbudget.datasets import load_dataset


@pytest.mark.parametrize(("name", "expected"), [("rte", 0.8969), ("temp", 0.9361), ("wsd", 0.9944)])
def test_majority_vote_expected_accuracy_matches_data_readme(name: str, expected: float) -> None:
    data = load_dataset(name)
    mv = MajorityVote().fit(data)
    assert mv.expected_accuracy(data.gold) == pytest.approx(expected, abs=5e-5)


def test_tie_break_uses_the_generator() -> None:
    rng = np.random.default_rng(1)
    scores = np.tile([0.5, 0.5, 0.0], (20000, 1))
    picks = argmax_random_ties(scores, rng)
    assert set(np.unique(picks)) == {0, 1}
    assert abs(np.mean(picks) - 0.5) < 0.02  # uniform between the tied classes
    data = load_dataset("rte")
    a = MajorityVote(rng=3).fit(data).labels_
    b = MajorityVote(rng=3).fit(data).labels_
    c = MajorityVote(rng=4).fit(data).labels_
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_crowd_kit_frame_in_and_out() -> None:
    df = pd.DataFrame(
        {
            "task": ["t1", "t1", "t1", "t2", "t2"],
            "worker": list("abcab"),
            "label": ["x", "x", "y", "y", "y"],
        }
    )
    labels = MajorityVote().fit_predict(df)
    assert labels.index.name == "task" and labels.to_dict() == {"t1": "x", "t2": "y"}
    proba = MajorityVote().fit_predict_proba(df)
    assert list(proba.columns) == ["x", "y"]
    np.testing.assert_allclose(proba.loc["t1"].to_numpy(), [2 / 3, 1 / 3])


def test_bayes_rule_is_majority_with_uniform_prior_in_binary() -> None:
    """Cor. 2.2: with Beta(1,1) and d = 0.5, label 1 iff a >= b (ties go to class 1)."""
    data = load_dataset("rte")
    bayes = BayesRuleAggregator().fit(data)
    counts = data.label_counts()
    clear = counts[:, 1] != counts[:, 0]
    np.testing.assert_array_equal(bayes.labels_[clear], np.argmax(counts[clear], axis=1))
    assert np.all(bayes.probas_[~clear, 1] == pytest.approx(0.5))


def test_bayes_rule_multiclass_probabilities_sum_to_one() -> None:
    data = load_dataset("wsd")
    bayes = BayesRuleAggregator(prior=0.5).fit(data)
    np.testing.assert_allclose(bayes.probas_.sum(axis=1), 1.0, atol=1e-8)
    assert data.accuracy(bayes.labels_) > 0.98
