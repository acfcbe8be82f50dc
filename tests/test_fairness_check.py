"""The fairness check of issue 15: ``--permute-classes`` / ``--permute-workers`` rerun a replay
under another coding and report the change; ``LabelData.permuted`` keeps every answer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crowdbudget.cli import main
from crowdbudget.datasets import load_dataset


@pytest.mark.parametrize("name", ["rte", "wsd"])
def test_permuted_data_keeps_every_answer_and_its_truth(name: str) -> None:
    data = load_dataset(name)
    shifted = data.permuted(classes=True, workers=True, seed=3)
    assert not np.array_equal(shifted.labels, data.labels)  # the codes changed
    names = np.asarray(data.classes, dtype=object)
    new_names = np.asarray(shifted.classes, dtype=object)
    np.testing.assert_array_equal(new_names[shifted.labels], names[data.labels])
    assert data.gold is not None and shifted.gold is not None
    known = data.gold >= 0
    np.testing.assert_array_equal(shifted.gold >= 0, known)
    np.testing.assert_array_equal(new_names[shifted.gold[known]], names[data.gold[known]])
    np.testing.assert_array_equal(
        shifted.worker_ids[shifted.workers], data.worker_ids[data.workers]
    )
    assert not np.array_equal(shifted.workers, data.workers)


def test_the_cli_reports_the_change_and_a_symmetric_policy_does_not_move(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["replay", "--dataset", "rte", "--policies", "uniform,opt-kg:posterior=one-coin"]
    argv += ["--budget-per-item", "2", "--reps", "3", "--permute-classes", "--permute-workers"]
    argv += ["--no-progress", "--jobs", "1", "--json"]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    rows = document["fairness"]
    assert {(r["permuted"], r["policy"]) for r in rows} == {
        (p, q) for p in ("classes", "workers") for q in ("uniform", "opt-kg:posterior=one-coin")
    }
    by = {(r["permuted"], r["policy"]): r for r in rows}
    # one-coin Opt-KG with random ties is symmetric in the class coding: the same replays
    assert by[("classes", "opt-kg:posterior=one-coin")]["difference"] == 0.0
    # an item-only policy's replay never looks at worker ids
    assert by[("workers", "uniform")]["difference"] == 0.0
    for row in rows:
        assert row["standard_error"] >= 0
        flagged = abs(row["difference"]) > 2 * row["standard_error"] + 1e-12
        assert row["beyond_two_standard_errors"] == flagged


@pytest.mark.parametrize(("dataset", "per_item"), [("temp", "1,2"), ("wsd", "1,2")])
def test_every_default_policy_and_verdict_is_invariant_to_the_coding(
    dataset: str, per_item: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 15's target: with the default verdict (ties by the estimated class prior), no
    default policy of ``compare`` moves beyond two standard errors when the class codes or the
    worker ids are permuted (the papers' rule moved uniform and round-robin by up to 0.11)."""
    from crowdbudget.cli.compare import COMPARE_POLICIES
    from crowdbudget.registry import parse_policy
    from crowdbudget.types import Problem

    data = load_dataset(dataset)
    problem = Problem(n_items=2, budget=1, n_classes=data.n_classes, n_workers=data.n_workers)
    policies = [p for p in COMPARE_POLICIES if parse_policy(p).refusal(problem) is None]
    argv = ["replay", "--dataset", dataset, "--policies", ",".join(policies)]
    argv += ["--budget-per-item", per_item, "--reps", "8", "--permute-classes"]
    argv += ["--permute-workers", "--no-progress", "--jobs", "1", "--json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["fairness"]
    assert {r["policy"] for r in rows} == set(policies)
    # a permuted class coding gives the same replays up to the verdict's seeded draws: two
    # standard errors. Permuted worker ids give a worker-aware policy other (equally likely)
    # random tie-breaks, i.e. an independent replay: over these rows two standard errors would
    # flag about one row in twenty by chance, so that check allows three.
    limit = {"classes": 2.0, "workers": 3.0}
    moved = [
        r for r in rows if abs(r["difference"]) > limit[r["permuted"]] * r["standard_error"] + 1e-12
    ]
    assert moved == []


def test_the_papers_tie_rule_fails_the_same_check(capsys: pytest.CaptureFixture[str]) -> None:
    """The check can fail: the papers' rule (ties to class 1) moves uniform and round-robin."""
    argv = ["replay", "--dataset", "temp", "--policies", "uniform,round-robin"]
    argv += ["--budget-per-item", "1,2", "--reps", "8", "--permute-classes", "--verdict"]
    argv += ["paper", "--no-progress", "--jobs", "1", "--json"]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["fairness"]
    moved = {(r["policy"], r["budget"]) for r in rows if r["beyond_two_standard_errors"]}
    assert ("round-robin", 924.0) in moved and ("uniform", 462.0) in moved
