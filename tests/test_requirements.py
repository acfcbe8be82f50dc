"""Requirements of Requallo (Li et al. 2016): Table 2 exactly, Examples 1-3, composition,
the text syntax, and properties against brute-force definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.requirements import (
    AllOf,
    FisherTest,
    MaxLabels,
    MinimumRatio,
    MinLabels,
    parse_requirement,
)

# Table 2 of the paper, transcribed from its text: r(x) for x = 1..5.
TABLE_2 = {
    "ratio=4": [5, 10, 15, 20, 25],
    "ratio=5": [6, 12, 18, 24, 30],
    "fisher=0.2": [5, 8, 10, 12, 15],
    "fisher=0.1": [7, 9, 12, 14, 17],
    "fisher=0.05": [8, 11, 13, 16, 18],
}


@pytest.mark.parametrize("text", sorted(TABLE_2))
@pytest.mark.parametrize("x", [1, 2, 3, 4, 5])
def test_table_2_cell(text: str, x: int) -> None:
    req = parse_requirement(text)
    assert float(req.min_total(x)) == TABLE_2[text][x - 1]


def _p_value(n: int, x: int) -> float:
    """One-sided p-value of Example 2 by the definition: sum of binomial probabilities."""
    return sum(math.comb(n, k) for k in range(x + 1)) / 2**n


def test_example_2_and_4_p_values() -> None:
    fisher = FisherTest(0.1)
    assert fisher.p_value(1, 4) == pytest.approx(0.1875)  # Example 2: not complete at 0.1
    assert not fisher.is_complete(1, 4)
    assert fisher.p_value(0, 4) == pytest.approx(0.0625)  # Example 4: complete
    assert fisher.is_complete(0, 4)


@pytest.mark.parametrize("alpha", [0.2, 0.1, 0.05, 0.01, 0.3])
def test_fisher_r_is_the_smallest_significant_total(alpha: float) -> None:
    fisher = FisherTest(alpha)
    for x in range(0, 25):
        r = int(fisher.min_total(x))
        assert _p_value(r, x) < alpha
        assert all(_p_value(n, x) >= alpha for n in range(x, r))


def test_example_1_and_3_ratio() -> None:
    ratio = MinimumRatio(4)
    assert not ratio.is_complete(1, 2) and ratio.is_complete(1, 4)  # Example 1
    # Example 3: (3, 1): Z=+1 needs 4:1 -> r = 5, completeness 4/5; Z=-1 needs b = 12 -> 15
    assert float(ratio.completeness(3, 1, z_positive=True)) == pytest.approx(4 / 5)
    assert float(ratio.completeness(3, 1, z_positive=False)) == pytest.approx(4 / 15)


def test_composition_and_caps() -> None:
    req = parse_requirement("fisher=0.2:max-labels=14")
    assert isinstance(req, AllOf)
    assert req == FisherTest(0.2) & MaxLabels(14)
    # the cap stops an item whatever its quality: 14 votes for one class
    assert req.is_complete(14, 13) and not req.quality_met(14, 13)
    assert not req.is_complete(13, 13)
    # min-labels counts real labels: with one pseudo-vote per class, 3 real labels
    m3 = MinLabels(3)
    assert not m3.is_complete(2, 2, pseudo=1) and m3.is_complete(3, 2, pseudo=1)
    both = parse_requirement("ratio=4,min-labels=8")
    assert float(both.min_total(1)) == 8 and float(both.min_total(2)) == 10
    assert str(parse_requirement("ratio=4:max-labels=14")) == "ratio=4:max-labels=14"


@pytest.mark.parametrize(
    "text",
    ["", "ratio=1", "ratio=x", "fisher=1.5", "min-labels=2.5", "foo=3", "ratio", "ratio=4:ratio=5"],
)
def test_bad_requirements_raise_one_line_errors(text: str) -> None:
    with pytest.raises(InvalidParameterError) as err:
        parse_requirement(text)
    assert "\n" not in str(err.value)


@settings(max_examples=60, deadline=None)
@given(
    a=st.integers(0, 40),
    b=st.integers(0, 40),
    text=st.sampled_from(["ratio=4", "fisher=0.1", "fisher=0.2:max-labels=14", "min-labels=3"]),
)
def test_is_complete_matches_direct_rules(a: int, b: int, text: str) -> None:
    req = parse_requirement(text)
    hi, lo = max(a, b), min(a, b)
    if text == "ratio=4":
        direct = hi >= 4 * lo and hi > lo
    elif text == "fisher=0.1":
        direct = _p_value(a + b, lo) < 0.1
    elif text == "min-labels=3":
        direct = a + b >= 3
    else:
        direct = _p_value(a + b, lo) < 0.2 or hi >= 14
    assert bool(req.is_complete(a, b)) == direct
    # vectorised over items: the same answers as one by one
    arr = req.is_complete(np.array([a, b]), np.array([b, a]))
    assert arr.tolist() == [direct, direct]
