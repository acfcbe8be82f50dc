"""The environment registry (issue #16, DESIGN §11): versioned ids with parameter tables,
``make_environment``, ``crowdbudget environments`` and ``simulate --env`` / ``--worker-set``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from crowdbudget.cli import main
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.registry import (
    ENVIRONMENTS,
    describe_entry,
    make_environment,
    parse,
    registered_environments,
)
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.simulation.priced_workers import rangi_worker_sets
from crowdbudget.simulation.synthetic_worlds import PricedWorkerEnvironment
from crowdbudget.testing import check_environment

EXPECTED_IDS = {
    "bernoulli-v0",
    "one-coin-workers-v0",
    "two-coin-workers-v0",
    "contextual-workers-v0",
    "logistic-features-v0",
    "priced-workers-v0",
}


def test_the_ids_are_versioned_and_registered() -> None:
    ids = set(registered_environments())
    assert ids >= EXPECTED_IDS
    assert all(name.rsplit("-", 1)[-1].startswith("v") for name in ids)
    for entry in registered_environments().values():
        assert "n-items" in entry.params, entry.component_id
        row = describe_entry(entry)
        assert row["summary"] and all(p["doc"] for p in row["parameters"])


@pytest.mark.parametrize("env_id", sorted(EXPECTED_IDS))
def test_every_environment_passes_the_conformance_check(env_id: str) -> None:
    env = make_environment(f"{env_id}:n-items=12")
    assert isinstance(env, LabelingEnvironment)
    check_environment(env, seed=3, n_steps=30)
    env.reset(seed=5)
    problem = env.problem(20.0)
    assert problem.n_items == 12 and env.true_labels.shape == (12,)


@pytest.mark.parametrize("env_id", sorted(EXPECTED_IDS))
def test_one_seed_one_world_and_seeds_differ(env_id: str) -> None:
    env = make_environment(f"{env_id}:n-items=40")
    env.reset(seed=1)
    first = env.true_labels.copy()
    env.reset(seed=2)
    env.reset(seed=1)
    assert np.array_equal(env.true_labels, first)


def test_parameters_are_read_through_the_table() -> None:
    env = make_environment("bernoulli-v0:n-items=7:prior=4;1:threshold=0.3")
    assert env.n_items == 7
    # columns of a Problem's prior: class 0 (b), class 1 (a)
    assert np.array_equal(env.problem(10.0).prior[0], [1.0, 4.0])
    pool = make_environment("one-coin-workers-v0:n-items=5:n-workers=3")
    assert pool.problem(5.0).n_workers == 3
    context = make_environment("contextual-workers-v0:n-items=9:n-contexts=4:workers=malicious")
    context.reset(seed=0)
    assert context.problem(5.0).n_contexts == 4
    features = make_environment("logistic-features-v0:n-items=6:n-features=3")
    features.reset(seed=0)
    assert features.problem(5.0).features.shape == (6, 3)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("nope-v0", "registered environments: bernoulli-v0"),
        ("bernoulli-v0:zeta=1", "has no parameter 'zeta'; its parameters: n-items, prior"),
        ("bernoulli-v0:threshold=2", "threshold must be in [0, 1]"),
        ("bernoulli-v0:prior=0;1", "environment 'bernoulli-v0:prior=0;1': prior takes two"),
        ("bernoulli-v0:n-items=x", "cannot read n-items='x'"),
        ("priced-workers-v0:worker-set=C", "worker-set must be one of A, B"),
        ("priced-workers-v0:n-spammers=30", "n_spammers must be between 0 and n_workers=20"),
        ("contextual-workers-v0:n-contexts=1:workers=malicious", "at least 2 contexts"),
    ],
)
def test_make_environment_refuses_in_one_line(text: str, needle: str) -> None:
    with pytest.raises(InvalidParameterError) as info:
        make_environment(text)
    message = str(info.value)
    assert needle in message and "\n" not in message


def test_the_grammar_is_the_policies_one() -> None:
    spec = ENVIRONMENTS.spec("priced-workers-v0:worker-set=B")
    assert spec.id == "priced-workers-v0" and spec.kind == "environment"
    assert parse("priced-workers-v0:worker-set=B").params == (("worker-set", "B"),)
    assert not spec.capabilities.supports_pull


def test_priced_world_is_rangis_worker_sets_redrawn_per_seed() -> None:
    env = PricedWorkerEnvironment(50, "B")
    env.reset(seed=4)
    assert env.pool is not None
    from crowdbudget._random import child_seed

    _, set_b = rangi_worker_sets(
        50, np.random.default_rng(child_seed(np.random.SeedSequence(4), 0))
    )
    assert np.array_equal(env.pool.accuracy, set_b.accuracy)
    assert np.array_equal(env.pool.price, set_b.price)
    assert np.all(env.pool.accuracy[-5:] == 0.5)
    problem = env.problem(100.0)
    assert problem.workers is not None
    assert np.array_equal(problem.workers.capacities, np.full(20, 30))
    # a label costs its worker's price
    from crowdbudget.types import Assignment

    event = env.step(Assignment(item=0, worker=3)).event
    assert event is not None and event.cost == pytest.approx(env.pool.price[3])


def test_environments_command_lists_and_describes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["environments"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in EXPECTED_IDS)
    assert main(["environments", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["command"] == "environments"
    assert {row["id"] for row in doc["results"]} >= EXPECTED_IDS
    assert main(["environments", "priced-workers-v0"]) == 0
    out = capsys.readouterr().out
    assert "worker-set: str one of A, B, default A" in out and "push_only" in out
    assert main(["environments", "nope-v0"]) == 2
    assert "unknown environment 'nope-v0'" in capsys.readouterr().err


def test_simulate_priced_worker_set_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's Done-means command, with fewer replications."""
    argv = [
        "simulate", "--policies", "b-kube,bounded-eps-first", "--worker-set", "A",
        "--items", "100", "--budget", "500", "--reps", "2", "--seed", "0", "--json",
        "--jobs", "1", "--no-progress",
    ]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["settings"]["environment"] == "priced-workers-v0:worker-set=A:n-items=100"
    rows = {row["policy"]: row for row in doc["results"]}
    assert set(rows) == {"b-kube", "bounded-eps-first"}
    for row in rows.values():
        assert 0.5 < row["accuracy_mean"] <= 1.0
        assert row["labels_used_mean"] <= 500.0 + 1e-9
    # --worker-set is --env priced-workers-v0:worker-set=A
    env_argv = [*argv[:3], "--env", "priced-workers-v0:worker-set=A", *argv[5:]]
    assert main(env_argv) == 0
    assert json.loads(capsys.readouterr().out)["results"] == doc["results"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--policies", "opt-kg", "--worker-set", "B"], "'opt-kg' picks items only"),
        (["--policies", "b-kube"], "'b-kube' chooses among named workers"),
        (["--policies", "b-kube", "--worker-set", "A", "--mode", "pull"], "push mode only"),
        (["--policies", "b-kube", "--worker-set", "A", "--prior", "2,1"], "--prior does not"),
        (["--policies", "uniform", "--env", "bernoulli-v0:n-items=9"], "disagree"),
        (["--policies", "uniform", "--env", "nope-v0"], "unknown environment 'nope-v0'"),
        (
            ["--policies", "b-kube", "--worker-set", "A", "--env", "priced-workers-v0"],
            "give one of them",
        ),
    ],
)
def test_simulate_refuses_in_one_line(
    capsys: pytest.CaptureFixture[str], extra: list[str], needle: str
) -> None:
    argv = ["simulate", "--items", "10", "--budget", "20", "--reps", "1", "--no-progress"]
    assert main([*argv, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1, err
    if "named workers" in needle:
        assert "ids that work here:" in err


def test_simulate_env_default_is_the_bernoulli_world(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--policies", "uniform", "--items", "8", "--budget", "16", "--reps", "2"]
    argv += ["--json", "--jobs", "1", "--no-progress", "--prior", "2,1", "--threshold", "0.4"]
    assert main(argv) == 0
    default = json.loads(capsys.readouterr().out)
    assert "environment" not in default["settings"]
    assert default["settings"]["prior"] == [2.0, 1.0] and default["settings"]["threshold"] == 0.4
    assert main([*argv, "--env", "bernoulli-v0"]) == 0
    named = json.loads(capsys.readouterr().out)
    assert named["results"] == default["results"]
    assert named["settings"]["environment"].startswith("bernoulli-v0:")
