"""The verdict beside the policy (DESIGN §11): ``opt-kg:verdict=ds`` allocates exactly as
``opt-kg`` and labels with Dawid–Skene fitted on the campaign's label log; ``final=`` is the
first build's spelling of it."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
import pytest

from crowdbudget.aggregation import make_aggregator
from crowdbudget.datasets import load_dataset
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign, run_experiment
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.verdict import (
    AggregatorVerdict,
    PosteriorVerdict,
    Verdict,
    log_label_data,
    make_verdict,
)
from crowdbudget.registry import VerdictSpec, make_policy, split_verdict
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import CampaignState, LabelEvent, Problem


def _build(policy_id: str) -> tuple[AllocationPolicy, Verdict]:
    policy_spec, verdict_spec = split_verdict(policy_id)
    return make_policy(policy_spec), verdict_spec.build()


def _assignments(policy_id: str, seed: int = 5) -> list[int]:
    """Items chosen by ``policy_id`` on a small noisy world, answers from a fixed generator."""
    problem = Problem(n_items=12, budget=60)
    policy, verdict = _build(policy_id)
    rng = np.random.default_rng(seed)
    policy.reset(problem, rng)
    verdict.reset(problem, rng)
    state = CampaignState.initial(problem)
    answers = np.random.default_rng(99)
    chosen = []
    while (assignment := policy.select(state)) is not None:
        state.record_assignment(assignment)
        event = LabelEvent(item=assignment.item, worker=0, label=int(answers.integers(2)))
        state.record_label(event, assignment)
        policy.observe(event)
        chosen.append(assignment.item)
    return chosen


@pytest.mark.parametrize("policy_id", ["opt-kg", "kg-random", "uniform"])
def test_a_verdict_leaves_the_allocation_exactly_as_it_was(policy_id: str) -> None:
    plain = _assignments(policy_id)
    assert len(plain) == 60
    assert _assignments(f"{policy_id}:verdict=ds") == plain


def test_split_verdict_gives_the_bare_policy_and_the_verdict() -> None:
    policy_spec, verdict_spec = split_verdict("opt-kg:verdict=mv")
    assert str(policy_spec) == "opt-kg" and verdict_spec == VerdictSpec("mv")
    policy, verdict = make_policy(policy_spec), verdict_spec.build()
    assert type(policy).__name__ == "OptimisticKnowledgeGradient"  # not wrapped
    assert isinstance(verdict, AggregatorVerdict) and verdict.name == "mv"
    # no verdict named: the option's, else the policy's own model
    assert split_verdict("opt-kg", "ds")[1] == VerdictSpec("ds")
    assert split_verdict("opt-kg:verdict=mv", "ds")[1] == VerdictSpec("mv")
    assert isinstance(split_verdict("opt-kg")[1].build(), PosteriorVerdict)


def test_make_policy_refuses_a_verdict_in_one_line() -> None:
    with pytest.raises(InvalidParameterError, match="names the verdict, not a parameter"):
        make_policy("opt-kg:verdict=ds")


def test_final_is_the_old_spelling_and_prints_the_new_one_once() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = split_verdict("kg:final=one-coin-em:final-workers=per-context")
        again = split_verdict("kg:final=one-coin-em:final-workers=per-context")
    assert first == again
    assert first[1] == VerdictSpec("one-coin-em", "per-context")
    notices = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert len(notices) == 1
    assert "'kg:verdict=one-coin-em:verdict-workers=per-context'" in notices[0]


def test_unknown_aggregator_is_a_one_line_error() -> None:
    with pytest.raises(InvalidParameterError, match="unknown aggregator 'nope'"):
        split_verdict("opt-kg:verdict=nope")
    with pytest.raises(InvalidParameterError, match="unknown aggregator 'nope'"):
        run_experiment(["uniform"], SyntheticBernoulliEnvironment(5), [5], 1, verdict="nope")


def test_verdict_ds_on_full_rte_equals_dawid_skene_and_beats_the_bayes_rule() -> None:
    data = load_dataset("rte")
    env = ReplayEnvironment.from_label_data(data)
    rows = {}
    for name in ["posterior", "ds"]:
        [rows[name]] = run_campaign(
            make_policy("opt-kg"),
            env,
            [8000],
            world_seed=0,
            policy_rng=np.random.default_rng(0),
            verdict=make_verdict(name),
        )
    full_ds = data.accuracy(make_aggregator("ds").fit(data).labels_)
    assert rows["ds"]["accuracy"] == pytest.approx(full_ds)
    assert rows["ds"]["accuracy"] > rows["posterior"]["accuracy"] + 0.03


def test_the_option_and_the_id_give_the_same_runs() -> None:
    env = SyntheticBernoulliEnvironment(20)
    by_id = run_experiment(["uniform:verdict=mv"], env, [20, 60], 2, n_jobs=1, progress=False)
    by_option = run_experiment(
        ["uniform"], env, [20, 60], 2, n_jobs=1, progress=False, verdict="mv"
    )
    columns = ["budget", "replication", "accuracy", "labels_used"]
    assert by_id.runs[columns].equals(by_option.runs[columns])
    assert list(by_id.runs["policy"].unique()) == ["uniform:verdict=mv"]


def test_checkpoints_in_a_synthetic_world_use_the_aggregator() -> None:
    env = SyntheticBernoulliEnvironment(30)
    rows = run_campaign(
        make_policy("uniform"),
        env,
        [30, 90],
        world_seed=1,
        policy_rng=np.random.default_rng(1),
        verdict=make_verdict("mv"),
    )
    assert [r["labels_used"] for r in rows] == [30, 90]
    assert all(0.0 <= r["accuracy"] <= 1.0 for r in rows)


def _contextual_run(policy_id: str) -> tuple[CampaignState, AggregatorVerdict, float]:
    """One BBTA-style campaign, 40 tasks in 2 contexts, 4 workers, every pair labeled once:
    worker 3 always wrong on context 0, worker 0 always wrong on context 1, every other
    (context, worker) always right."""
    n, k = 40, 4
    contexts = np.repeat([0, 1], n // 2)
    truth = np.random.default_rng(3).integers(0, 2, size=n)
    inverted = {(0, 3), (1, 0)}  # (context, worker)
    problem = Problem(n_items=n, budget=n * k, n_workers=k, contexts=contexts)
    policy, verdict = _build(policy_id)
    assert isinstance(verdict, AggregatorVerdict)
    rng = np.random.default_rng(0)
    policy.reset(problem, rng)
    verdict.reset(problem, rng)
    state = CampaignState.initial(problem)
    while (assignment := policy.select(state)) is not None:
        state.record_assignment(assignment)
        item, worker = assignment.item, int(assignment.worker)
        wrong = (int(contexts[item]), worker) in inverted
        label = 1 - int(truth[item]) if wrong else int(truth[item])
        event = LabelEvent(item=item, worker=worker, label=label)
        state.record_label(event, assignment)
        policy.observe(event)
    return state, verdict, float(np.mean(verdict.labels(state, policy) == truth))


def test_per_context_workers_give_the_aggregator_one_worker_per_context_and_worker() -> None:
    state, verdict, accuracy = _contextual_run(
        "bbta:n-explore=0:verdict=one-coin-em:verdict-workers=per-context"
    )
    data = log_label_data(state, worker_offset=verdict._worker_offset)
    # 2 contexts x 4 workers = 8 virtual workers s*K + j
    assert sorted(data.worker_ids.astype(int).tolist()) == list(range(8))
    # per (context, worker), one-coin EM learns who is inverted where: every label recovered
    assert accuracy == 1.0
    state, _, _ = _contextual_run("bbta:n-explore=0:verdict=one-coin-em")
    assert sorted(log_label_data(state).worker_ids.astype(int).tolist()) == list(range(4))


def test_per_context_workers_need_an_aggregator_verdict_and_a_known_mode() -> None:
    with pytest.raises(InvalidParameterError, match=r"verdict-workers=\.\.\. needs verdict="):
        split_verdict("bbta:verdict-workers=per-context")
    with pytest.raises(InvalidParameterError, match="verdict-workers must be one of"):
        split_verdict("bbta:verdict=mv:verdict-workers=nope")


def test_the_label_log_is_the_state_s_and_grows_past_its_first_capacity() -> None:
    problem = Problem(n_items=3, budget=500)
    state = CampaignState.initial(problem)
    for k in range(200):
        event = LabelEvent(item=k % 3, worker=k % 7, label=k % 2, cost=1.0)
        state.record_label(event)
    log = state.label_log
    assert len(log) == 200
    assert log.items.tolist() == [k % 3 for k in range(200)]
    assert log.workers.tolist() == [k % 7 for k in range(200)]
    assert log.labels.tolist() == [k % 2 for k in range(200)]
    assert float(log.costs.sum()) == 200.0


def test_cli_verdict_option_and_the_old_spelling_s_one_line_notice(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from crowdbudget.cli import main

    base = ["simulate", "--items", "12", "--budget", "24,48", "--reps", "2", "--jobs", "1"]
    argv = [*base, "--policies", "kg-random:final=wmv,kg-random", "--verdict", "wmv", "--json"]
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as a plain run shows them (pytest -W may not)
        assert main(argv) == 0
    captured = capsys.readouterr()
    rows = json.loads(captured.out)["results"]
    by_policy: dict[str, list[float]] = {}
    for row in rows:
        by_policy.setdefault(row["policy"], []).append(row["accuracy_mean"])
    # the id's verdict and the option's are the same verdict: the same numbers
    assert by_policy["kg-random:final=wmv"] == by_policy["kg-random"]
    notices = [line for line in captured.err.splitlines() if "note:" in line]
    assert notices == [
        "crowdbudget simulate: note: 'kg-random:final=wmv': final= is an old spelling; "
        "write 'kg-random:verdict=wmv'"
    ]
    assert main([*base, "--policies", "uniform", "--verdict", "nope"]) == 2
    assert "unknown aggregator 'nope'" in capsys.readouterr().err


def test_ties_go_to_the_class_the_decided_items_say_is_more_common() -> None:
    from crowdbudget.policies.verdict import break_ties_by_prior

    # items 0-2 decided for class 0, item 3 for class 1; items 4 and 5 tie
    p = np.array([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.2, 0.8], [0.5, 0.5], [0.5, 0.5]])
    labels = np.array([0, 0, 0, 1, 1, 1])  # the papers' rule sent both ties to class 1
    out = break_ties_by_prior(labels, p, np.random.default_rng(0))
    assert out.tolist() == [0, 0, 0, 1, 0, 0]
    # the same under the other coding: the rule follows the classes, not their codes
    swapped = break_ties_by_prior(1 - labels, p[:, ::-1], np.random.default_rng(0))
    assert swapped.tolist() == [1, 1, 1, 0, 1, 1]
    # nothing decided: a seeded fair draw, each class about half the time
    even = np.full((4000, 2), 0.5)
    drawn = break_ties_by_prior(np.ones(4000, dtype=np.int64), even, np.random.default_rng(1))
    assert 0.46 < drawn.mean() < 0.54
    again = break_ties_by_prior(np.ones(4000, dtype=np.int64), even, np.random.default_rng(1))
    assert np.array_equal(drawn, again)
    # only tied classes compete: a three-class tie between classes 1 and 2
    three = np.array([[0.1, 0.45, 0.45], [0.1, 0.1, 0.8], [0.1, 0.1, 0.8]])
    assert break_ties_by_prior(np.array([1, 2, 2]), three, np.random.default_rng(0))[0] == 2


def test_the_paper_verdict_keeps_the_policy_s_labels() -> None:
    problem = Problem(n_items=4, budget=10)
    policy = make_policy("uniform")
    rng = np.random.default_rng(0)
    policy.reset(problem, rng)
    state = CampaignState.initial(problem)
    for item, label in [(0, 0), (1, 0), (2, 0)]:
        state.record_label(LabelEvent(item=item, worker=0, label=label))
    paper = make_verdict("paper").reset(problem, rng)
    prior = PosteriorVerdict("prior").reset(problem, rng)
    assert paper.name == "paper"
    # item 3 has no label: the papers' rule says class 1, the prior rule the decided class 0
    assert paper.labels(state, policy).tolist() == [0, 0, 0, 1]
    assert prior.labels(state, policy).tolist() == [0, 0, 0, 0]
    np.testing.assert_allclose(paper.probabilities(state, policy).sum(axis=1), 1.0)


def test_the_worker_aware_one_coin_policies_default_to_the_default_verdict_and_say_so(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``opt-kg:posterior=one-coin`` (and ``kg:``) are read by the default verdict when
    nobody names one (``bds-hard-blind-recheck-refit-ev-tempered``, chosen on the stress
    bed); the id, ``--verdict`` or a live campaign's ``verdict`` still decide; the report
    names the default; the allocation is the same whatever reads it."""
    import json

    from crowdbudget.aggregation import DEFAULT_VERDICT
    from crowdbudget.campaign import Campaign
    from crowdbudget.cli import main

    assert DEFAULT_VERDICT == "bds-hard-blind-recheck-refit-ev-tempered"
    for pid in ("opt-kg:posterior=one-coin", "kg:posterior=one-coin:refit=0"):
        assert split_verdict(pid)[1] == VerdictSpec(DEFAULT_VERDICT)
        assert split_verdict(pid, "ds")[1] == VerdictSpec("ds")
        assert split_verdict(f"{pid}:verdict=posterior")[1] == VerdictSpec("posterior")
    for pid in ("opt-kg", "uniform", "opt-kg:posterior=two-coin", "bbta"):
        assert split_verdict(pid)[1] == VerdictSpec("posterior")
    # the runner: the id alone equals the id with the default verdict named, row for row (at 2 and 3
    # labels per item, where the readers differ: at 1 they read each item's one label alike)
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    alone, named = (
        run_experiment([pid], env, [800, 2400], 2, seed=5, n_jobs=1, progress=False).runs
        for pid in (
            "opt-kg:posterior=one-coin",
            f"opt-kg:posterior=one-coin:verdict={DEFAULT_VERDICT}",
        )
    )
    columns = ["budget", "replication", "accuracy", "labels_used"]
    assert alone[columns].equals(named[columns])
    own = run_experiment(
        ["opt-kg:posterior=one-coin:verdict=posterior"],
        env,
        [800, 2400],
        2,
        seed=5,
        n_jobs=1,
        progress=False,
    ).runs
    assert not own["accuracy"].equals(alone["accuracy"])  # a different reader, same labels
    # the report says which policy a default verdict reads, and --verdict overrides it
    argv = ["replay", "--dataset", "rte", "--budget", "400", "--reps", "1", "--no-progress"]
    argv += ["--policies", "opt-kg,opt-kg:posterior=one-coin"]
    assert main([*argv, "--json"]) == 0
    settings = json.loads(capsys.readouterr().out)["settings"]
    assert settings["default_verdicts"] == {"opt-kg:posterior=one-coin": DEFAULT_VERDICT}
    assert main(argv) == 0
    assert f"verdict: opt-kg:posterior=one-coin is read by {DEFAULT_VERDICT}" in (
        capsys.readouterr().out
    )
    assert main([*argv, "--json", "--verdict", "posterior"]) == 0
    assert "default_verdicts" not in json.loads(capsys.readouterr().out)["settings"]
    # a live campaign created without a verdict stores the policy's default; one that names
    # posterior keeps it
    items, classes = ["a", "b", "c"], ["no", "yes"]
    live = Campaign.create(
        items=items, budget=6, classes=classes, policy="opt-kg:posterior=one-coin"
    )
    assert live.config is not None and live.config.verdict == DEFAULT_VERDICT
    kept = Campaign.create(
        items=items,
        budget=6,
        classes=classes,
        policy="opt-kg:posterior=one-coin",
        verdict="posterior",
    )
    assert kept.config is not None and kept.config.verdict == "posterior"
    plain = Campaign.create(items=items, budget=6, classes=classes, policy="opt-kg")
    assert plain.config is not None and plain.config.verdict == "posterior"


def test_one_campaign_read_by_several_verdicts_gives_the_rows_of_separate_runs() -> None:
    # --verdicts: each campaign is allocated once and read by every verdict; each reading
    # must be exactly what a run of <id>:verdict=<v> gives (same allocation, same verdict
    # seed), worker-aware default included (its own verdict is the default: not read twice)
    from crowdbudget.aggregation import DEFAULT_VERDICT

    env = ReplayEnvironment.from_label_data(load_dataset("temp"))
    budgets = [231, 462, 924]
    ids = ["opt-kg", "opt-kg:posterior=one-coin", "uniform:verdict=mv"]
    read = run_experiment(
        ids,
        env,
        budgets,
        2,
        n_jobs=1,
        progress=False,
        verdicts=["ds", DEFAULT_VERDICT, "posterior"],
    )
    expected_labels = [
        "opt-kg",
        "opt-kg:verdict=ds",
        f"opt-kg:verdict={DEFAULT_VERDICT}",
        "opt-kg:posterior=one-coin",
        "opt-kg:posterior=one-coin:verdict=ds",
        "opt-kg:posterior=one-coin:verdict=posterior",
        "uniform:verdict=mv",
        "uniform:verdict=ds",
        f"uniform:verdict={DEFAULT_VERDICT}",
        "uniform:verdict=posterior",
    ]
    assert list(read.summary["policy"].unique()) == expected_labels
    # each id alone (one run_experiment per id: ids of one call share allocations, below)
    separate = pd.concat(
        [
            run_experiment([pid], env, budgets, 2, n_jobs=1, progress=False).runs
            for pid in expected_labels
        ]
    )
    columns = ["policy", "budget", "replication", "accuracy", "labels_used", "ece", "nll"]
    assert (
        read.runs[columns]
        .sort_values(["policy", "replication", "budget"])
        .reset_index(drop=True)
        .equals(
            separate[columns]
            .sort_values(["policy", "replication", "budget"])
            .reset_index(drop=True)
        )
    )
    # the readings differ from each other (a test that could fail): ds ≠ posterior on opt-kg
    by = read.summary.set_index(["policy", "budget"])["accuracy_mean"]
    assert by[("opt-kg:verdict=ds", 462)] != by[("opt-kg", 462)]


def test_ids_differing_only_in_verdict_share_one_allocation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # run_experiment runs one campaign per replication for ids that differ only in their
    # verdict (the reproductions' "...:verdict=one-coin-em:verdict-workers=per-context"
    # variants beside their plain ids); the rows must be those of each id run alone, in the
    # order the ids were given, metrics hook and the papers' tie rule included
    from crowdbudget.experiments import runner
    from crowdbudget.experiments.papers.zhang2015 import spent_metric

    env = ReplayEnvironment.from_label_data(load_dataset("temp"))
    budgets = [231, 462]
    ids = [
        "uniform:verdict=ds",
        "opt-kg",
        "uniform",
        "opt-kg:verdict=one-coin-em",
        "uniform:verdict=mv",
    ]
    options: dict[str, Any] = {"n_jobs": 1, "progress": False, "verdict": "paper", "ties": "paper"}
    calls: list[str] = []
    real_task = runner._task

    def counting_task(entry: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(entry[2])
        return real_task(entry, *args, **kwargs)

    monkeypatch.setattr(runner, "_task", counting_task)
    together = run_experiment(ids, env, budgets, 2, metrics=spent_metric, **options)
    assert calls == ["uniform:verdict=ds", "opt-kg"] * 2  # two allocations per replication
    calls.clear()
    alone = [run_experiment([pid], env, budgets, 2, metrics=spent_metric, **options) for pid in ids]
    assert len(calls) == len(ids) * 2
    columns = ["policy", "budget", "replication", "accuracy", "labels_used", "ece", "spent"]
    expected = pd.concat([result.runs[columns] for result in alone]).reset_index(drop=True)
    assert together.runs[columns].reset_index(drop=True).equals(expected)
    assert list(together.summary["policy"].unique()) == ids
    # the verdicts differ (a test that could fail): ds ≠ majority vote on uniform
    by = together.summary.set_index(["policy", "budget"])["accuracy_mean"]
    assert by[("uniform:verdict=ds", 231)] != by[("uniform:verdict=mv", 231)]


def test_a_reading_already_given_as_an_id_is_not_repeated_and_bad_verdicts_fail() -> None:
    env = SyntheticBernoulliEnvironment(10)
    result = run_experiment(
        ["uniform", "uniform:verdict=mv"], env, [10], 1, n_jobs=1, progress=False, verdicts=["mv"]
    )
    assert list(result.summary["policy"]) == ["uniform", "uniform:verdict=mv"]
    with pytest.raises(InvalidParameterError, match="unknown aggregator 'nope'"):
        run_experiment(["uniform"], env, [10], 1, n_jobs=1, progress=False, verdicts=["nope"])


def test_cli_verdicts_option_reads_every_campaign_with_each_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from crowdbudget.cli import main

    base = ["replay", "--dataset", "wsd", "--budget-per-item", "1", "--reps", "2", "--jobs", "1"]
    assert main([*base, "--policies", "opt-kg", "--verdicts", "ds,mv", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["settings"]["verdicts"] == ["ds", "mv"]
    assert [row["policy"] for row in document["results"]] == [
        "opt-kg",
        "opt-kg:verdict=ds",
        "opt-kg:verdict=mv",
    ]
    # a verdict that cannot read the data: one line, exit status 2, nothing run
    assert main([*base, "--policies", "opt-kg", "--verdicts", "kos"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "crowdbudget replay: error: --verdicts 'kos': verdict 'kos' takes two classes only; "
        "this problem has 3 (data set 'wsd' (3 classes: 1, 2, 3))"
    ]


def test_a_verdict_s_seed_depends_on_the_replication_only() -> None:
    # The runner builds every campaign of a replication from one SeedSequence object; a
    # verdict that spawned its seed from it moved the object's spawn counter, so the tie
    # draws of `uniform:verdict=mv` depended on the policies listed before it and on the
    # executor's chunking. verdict_seed derives the seed without side effects.
    env = ReplayEnvironment.from_label_data(load_dataset("temp"))

    def accuracies(ids: list[str], jobs: int) -> list[float]:
        runs = run_experiment(ids, env, [231], 4, n_jobs=jobs, progress=False).runs
        return runs[runs["policy"] == "uniform:verdict=mv"]["accuracy"].tolist()

    alone = accuracies(["uniform:verdict=mv"], 1)
    assert accuracies(["opt-kg:verdict=ds", "kg-random", "uniform:verdict=mv"], 1) == alone
    assert accuracies(["opt-kg:verdict=ds", "uniform:verdict=mv"], 2) == alone
    assert len(set(alone)) > 1  # the replications differ: the check can fail


def test_verdict_seed_neither_advances_nor_spawns_from_the_generator() -> None:
    from crowdbudget.policies.verdict import verdict_seed

    rng = np.random.default_rng(np.random.SeedSequence(3).spawn(2)[1])
    state = rng.bit_generator.state
    first = verdict_seed(rng)
    assert verdict_seed(rng) == first
    assert rng.bit_generator.state == state
    # ... and it is what the first spawn gives (so runs that spawned once are unchanged)
    assert int(rng.spawn(1)[0].integers(2**62)) == first
