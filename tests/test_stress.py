"""The stress bed (crowdbudget.experiments.stress), its rule and its command."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from crowdbudget.cli import main
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.stress import (
    DEFAULT_BED,
    StressCell,
    choose_verdict,
    draw_crowd,
    full_bed,
    make_crowd,
    run_bed,
    subsample_per_item,
)


def test_same_seed_same_crowd_and_another_seed_another() -> None:
    cell = DEFAULT_BED[0]
    a, b, c = make_crowd(cell, 3), make_crowd(cell, 3), make_crowd(cell, 4)
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a.workers, b.workers)
    assert not np.array_equal(a.labels, c.labels)


def test_a_cell_has_its_class_balance_and_labels_per_item() -> None:
    cell = StressCell("t", (0.88, 0.12), 3, 50, n_items=4000)
    crowd = make_crowd(cell, 0)
    assert crowd.gold is not None
    assert abs(crowd.gold.mean() - 0.12) < 0.02
    assert np.all(np.bincount(crowd.items) == 3)
    # each item's three labels come from three different workers
    pairs = crowd.items * crowd.n_workers + crowd.workers
    assert np.unique(pairs).size == pairs.size


def test_long_tailed_activity_gives_many_one_off_workers() -> None:
    cell = StressCell("t", (0.5, 0.5), 3, 2000, activity_tail=0.8, n_items=1000)
    per_worker = np.bincount(make_crowd(cell, 0).workers)
    assert np.mean(per_worker <= 3) > 0.5  # most workers give 1-3 labels
    assert per_worker.max() > 50  # a few heavy workers


def test_draw_crowd_is_the_crowd_behind_make_crowd() -> None:
    cell = StressCell("k", (0.6, 0.3, 0.1), 4, 30, spammer_share=0.3, biased_share=0.3)
    crowd = make_crowd(cell, 5)
    drawn = draw_crowd(cell, np.random.default_rng(5))
    assert crowd.gold is not None and np.array_equal(drawn.truth, crowd.gold)
    assert not np.any(drawn.spammer & drawn.biased)
    assert drawn.spammer.any() and drawn.biased.any() and (~drawn.spammer & ~drawn.biased).any()
    confusion = drawn.pool.confusion
    assert np.allclose(confusion[drawn.spammer], 1.0 / 3)
    assert np.all(confusion[drawn.biased].max(axis=2) == 1.0)
    # every label of a biased worker is the one class its matrix gives
    number = np.array([int(str(w)[1:]) for w in crowd.worker_ids])[crowd.workers]
    biased = drawn.biased[number]
    favourite = confusion[number[biased], 0].argmax(axis=1)
    assert biased.any() and np.array_equal(crowd.labels[biased], favourite)


def test_spammers_biased_workers_and_ordinal_grades() -> None:
    spam = make_crowd(StressCell("s", (0.5, 0.5), 5, 40, spammer_share=1.0, n_items=2000), 0)
    assert spam.gold is not None
    assert abs(np.mean(spam.labels == spam.gold[spam.items]) - 0.5) < 0.03
    biased = make_crowd(StressCell("b", (0.5, 0.5), 5, 40, biased_share=1.0, n_items=500), 0)
    for worker in np.unique(biased.workers):  # each worker answers one class only
        assert np.unique(biased.labels[biased.workers == worker]).size == 1
    grades = make_crowd(StressCell("o", (0.2,) * 5, 5, 60, worker_model="ordinal", n_items=2000), 0)
    assert grades.gold is not None
    errors = np.abs(grades.labels - grades.gold[grades.items])
    wrong = errors[errors > 0]
    assert np.mean(wrong == 1) > 0.6  # errors fall mostly on neighbouring grades


def test_two_coin_cells_have_asymmetric_errors() -> None:
    crowd = make_crowd(
        StressCell("tc", (0.5, 0.5), 3, 200, worker_model="two-coin", n_items=4000), 0
    )
    assert crowd.gold is not None
    truth = crowd.gold[crowd.items]
    sensitivity = np.mean(crowd.labels[truth == 1] == 1)
    specificity = np.mean(crowd.labels[truth == 0] == 0)
    assert specificity - sensitivity > 0.05


def test_bad_cells_are_refused_in_one_line() -> None:
    with pytest.raises(InvalidParameterError, match="class_prior"):
        StressCell("x", (0.5, 0.6), 3, 10)
    with pytest.raises(InvalidParameterError, match="labels_per_item"):
        StressCell("x", (0.5, 0.5), 30, 10)
    with pytest.raises(InvalidParameterError, match="two-coin needs 2 classes"):
        StressCell("x", (0.3, 0.3, 0.4), 3, 10, worker_model="two-coin")


def test_beds_have_unique_names_and_span_the_axes() -> None:
    for bed in (DEFAULT_BED, full_bed()):
        names = [c.name for c in bed]
        assert len(names) == len(set(names))
    cells = full_bed()
    assert {c.n_classes for c in cells} >= {2, 3, 5, 10}
    assert {c.labels_per_item for c in cells} >= {1, 40}
    assert {c.n_workers for c in cells} >= {5, 2000}
    assert max(c.spammer_share for c in cells) == 0.5
    assert min(c.class_prior[-1] for c in cells if c.n_classes == 2) == 0.05


def test_subsample_keeps_at_most_k_labels_per_item() -> None:
    crowd = make_crowd(DEFAULT_BED[0], 0)
    sub = subsample_per_item(crowd, 2, np.random.default_rng(0))
    assert np.all(np.bincount(sub.items, minlength=crowd.n_items) == 2)


def _table(rows: list[tuple[str, str, float, float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [{"set": s, "per_item": "all", "method": m, "accuracy": a, "nll": n} for s, m, a, n in rows]
    )


def test_choose_verdict_minimises_the_worst_shortfall_not_the_mean() -> None:
    # "steady" is never best but never far; "spiky" is best twice and far behind once
    table = _table(
        [
            ("a", "steady", 0.89, 0.3),
            ("a", "spiky", 0.90, 0.2),
            ("b", "steady", 0.89, 0.3),
            ("b", "spiky", 0.90, 0.2),
            ("c", "steady", 0.90, 0.3),
            ("c", "spiky", 0.80, 0.2),
        ]
    )
    chosen, ranking = choose_verdict(table)
    assert chosen == "steady"
    assert ranking.loc["spiky", "worst_shortfall"] == pytest.approx(0.10)
    assert ranking.loc["spiky", "worst_row"] == "c@all"


def test_choose_verdict_breaks_a_near_tie_by_nll_and_needs_every_row() -> None:
    table = _table(
        [
            ("a", "sharp", 0.900, 0.5),
            ("a", "calibrated", 0.898, 0.2),
            ("a", "binary-only", 0.950, 0.1),
            ("b", "sharp", 0.900, 0.5),
            ("b", "calibrated", 0.900, 0.2),
        ]
    )
    chosen, ranking = choose_verdict(table, margin=0.005)
    assert chosen == "calibrated"  # within 0.005 on every row, then the lower NLL
    assert not ranking.loc["binary-only", "eligible"]  # no row on set b
    assert choose_verdict(table, margin=0.0)[0] == "sharp"
    with pytest.raises(InvalidParameterError, match="no candidate"):
        choose_verdict(table, candidates=["binary-only"])


def test_choose_verdict_compares_the_next_worst_row_when_the_worst_is_shared() -> None:
    # on row "a" every method fails alike; row "b" separates them
    table = _table(
        [
            ("a", "oracle", 0.95, 0.3),
            ("a", "robust", 0.80, 0.5),
            ("a", "fragile", 0.80, 0.1),
            ("b", "oracle", 0.60, 0.3),
            ("b", "robust", 0.90, 0.5),
            ("b", "fragile", 0.83, 0.1),
            ("c", "oracle", 0.60, 0.3),
            ("c", "robust", 0.90, 0.5),
            ("c", "fragile", 0.90, 0.1),
        ]
    )
    chosen, ranking = choose_verdict(table)
    assert chosen == "robust"
    assert ranking.loc["fragile", "worst_shortfall"] == pytest.approx(0.15)
    assert ranking.loc["fragile", "second_shortfall"] == pytest.approx(0.07)


def test_run_bed_gives_one_row_per_set_budget_and_method() -> None:
    cells = [StressCell("small", (0.7, 0.3), 3, 20, n_items=60)]
    table = run_bed(cells, [], ["mv", "ds"], per_item=[1, 2], reps=2, seed=0)
    assert len(table) == 3 * 2
    assert set(table["per_item"]) == {"all", "1", "2"}
    assert (table["reps"] == 2).all()
    assert table["accuracy"].between(0, 1).all()
    again = run_bed(cells, [], ["mv", "ds"], per_item=[1, 2], reps=2, seed=0)
    pd.testing.assert_frame_equal(table.drop(columns="seconds"), again.drop(columns="seconds"))


def test_stress_command_json(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(
        ["stress", "--cells", "binary-50-50-k3", "--sets", "", "--methods", "mv,ds", "--json"]
    )
    assert status == 0
    document = json.loads(capsys.readouterr().out)
    assert document["chosen"] in ("mv", "ds")
    assert {row["method"] for row in document["rows"]} == {"mv", "ds"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["stress", "--cells", "nope"], "unknown stress cell 'nope'"),
        (["stress", "--sets", "nope", "--cells", "binary-50-50-k3"], "unknown bundled set"),
        (["stress", "--methods", "nope", "--sets", ""], "unknown aggregator 'nope'"),
        (["stress", "--per-item", "0"], "integers >= 1"),
    ],
)
def test_stress_command_refuses_bad_input_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        status = main(argv)
    except SystemExit as stop:  # argparse's own refusal
        status = int(stop.code or 0)
    assert status == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
