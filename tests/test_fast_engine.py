"""The compiled engine (engine.fast) reproduces the reference run_campaign exactly."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from crowdbudget.engine import fast as fast_module
from crowdbudget.engine.fast import COMPILED_ENGINE, run_campaign_fast, supports_fast_path
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.runner import run_campaign, run_experiment
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.index_policy import BetaIndexPolicy
from crowdbudget.posteriors.beta_bernoulli import BetaBernoulliPosterior
from crowdbudget.registry import make_policy
from crowdbudget.simulation import SyntheticBernoulliEnvironment
from crowdbudget.simulation.workers import WorkerPrior
from crowdbudget.types import Assignment, CampaignState, LabelEvent, Problem, StepResult

#: random ties (the default of opt-kg, cvar-kg and label-uncertainty since issue 15; kg-random)
#: and the smallest index (kg, the papers' ``tie-break=first``)
POLICIES = [
    "kg",
    "opt-kg",
    "opt-kg:tie-break=first",
    "cvar-kg:alpha=0.3",
    "cvar-kg:alpha=0.3:tie-break=first",
    "kg-random",
    "label-uncertainty",
    "uniform",
]
INDEX_POLICIES = [p for p in POLICIES if p != "uniform"]


def _reference(
    policy: AllocationPolicy,
    env: SyntheticBernoulliEnvironment,
    budgets: list[float],
    world_seed: int,
    policy_seed: int,
) -> tuple[list[dict[str, Any]], np.ndarray]:
    """run_campaign, also returning the items labeled, in order."""
    items: list[int] = []
    observe = policy.observe

    def spy(event: LabelEvent) -> None:
        items.append(event.item)
        observe(event)

    policy.observe = spy  # type: ignore[method-assign]
    rows = run_campaign(
        policy, env, budgets, world_seed=world_seed, policy_rng=np.random.default_rng(policy_seed)
    )
    del policy.observe  # back to the class method
    return rows, np.array(items, dtype=np.int64)


def _comparable(rows: list[dict[str, Any]]) -> list[tuple[float, float, float]]:
    return [(r["budget"], r["accuracy"], r["labels_used"]) for r in rows]


def _check_same(
    policy_id: str,
    env: SyntheticBernoulliEnvironment,
    budgets: list[float],
    seed: int,
    **fast_kwargs: Any,
) -> tuple[AllocationPolicy, AllocationPolicy]:
    ref_policy = make_policy(policy_id)
    ref_rows, ref_items = _reference(ref_policy, env, budgets, seed, seed + 100)
    fast_policy = make_policy(policy_id)
    rows, items = run_campaign_fast(
        fast_policy,
        env,
        budgets,
        world_seed=seed,
        policy_rng=np.random.default_rng(seed + 100),
        record_items=True,
        **fast_kwargs,
    )
    assert np.array_equal(items, ref_items), (policy_id, seed, items[:20], ref_items[:20])
    assert _comparable(rows) == _comparable(ref_rows)
    return ref_policy, fast_policy


@pytest.mark.parametrize("policy_id", POLICIES)
@pytest.mark.parametrize("n_items", [1, 2, 7, 60, 200])
def test_same_items_and_accuracies(policy_id: str, n_items: int) -> None:
    env = SyntheticBernoulliEnvironment(n_items)
    budgets = [0.5 * n_items + 0.25, 2.0 * n_items, 6.0 * n_items + 0.7]
    for seed in range(3):
        _check_same(policy_id, env, budgets, seed)


@pytest.mark.parametrize("policy_id", POLICIES)
def test_non_integer_prior_threshold_and_fixed_theta(policy_id: str) -> None:
    # prior + 1.0 + 1.0 ... and a threshold != 0.5 (betaincc decision), shared by all items
    env = SyntheticBernoulliEnvironment(40, prior=(0.7, 2.3), thresholds=0.4)
    _check_same(policy_id, env, [13.5, 80, 200], seed=4)
    env = SyntheticBernoulliEnvironment(30, theta=np.linspace(0.02, 0.98, 30))
    _check_same(policy_id, env, [1, 45, 150], seed=5)


@pytest.mark.parametrize("policy_id", POLICIES)
def test_budget_below_one_label(policy_id: str) -> None:
    env = SyntheticBernoulliEnvironment(5)
    _check_same(policy_id, env, [0.5], seed=0)
    _check_same(policy_id, env, [0.5, 1.0, 3.999999, 4.5], seed=1)


@pytest.mark.parametrize("policy_id", INDEX_POLICIES)
def test_growth_paths_deep_states(policy_id: str) -> None:
    # few items, many labels each: deep states (score-table growth, long lookahead), many
    # label tiles per item (tile-directory growth); capacity 1 forces every growth step
    env = SyntheticBernoulliEnvironment(3)
    _check_same(policy_id, env, [50, 700, 3000], seed=2, initial_capacity=1)


def test_several_item_tiles() -> None:
    # more than 65,536 items: answers come from two item blocks of tiles
    n_items = 65_536 + 300
    env = SyntheticBernoulliEnvironment(n_items)
    _check_same("uniform", env, [1000, 6000], seed=3, initial_capacity=1)
    _check_same("opt-kg", env, [n_items - 200, n_items + 700], seed=3, initial_capacity=1)
    _check_same("opt-kg:tie-break=first", env, [n_items + 700], seed=3, initial_capacity=1)


@pytest.mark.parametrize("policy_id", ["opt-kg", "kg-random", "cvar-kg:alpha=0.3"])
def test_random_ties_many_groups(policy_id: str) -> None:
    # random ties with many score groups at once (theta spread, a non-symmetric prior) and
    # groups moving to larger slices (capacity 1); several seeds of the tie draws
    env = SyntheticBernoulliEnvironment(300, prior=(1.3, 0.8))
    for seed in range(3):
        _check_same(policy_id, env, [150, 900, 2400], seed=seed, initial_capacity=1)


@pytest.mark.parametrize("policy_id", POLICIES)
def test_policy_and_world_end_consistent(policy_id: str) -> None:
    ref_env, fast_env = SyntheticBernoulliEnvironment(25), SyntheticBernoulliEnvironment(25)
    ref_policy = make_policy(policy_id)
    ref_rng = np.random.default_rng(9)
    run_campaign(ref_policy, ref_env, [90], world_seed=8, policy_rng=ref_rng)
    fast_policy = make_policy(policy_id)
    fast_rng = np.random.default_rng(9)
    run_campaign_fast(fast_policy, fast_env, [90], world_seed=8, policy_rng=fast_rng)
    assert ref_rng.bit_generator.state == fast_rng.bit_generator.state
    assert np.array_equal(ref_env.answers_given, fast_env.answers_given)
    if isinstance(ref_policy, BetaIndexPolicy):
        assert isinstance(fast_policy, BetaIndexPolicy)
        assert np.array_equal(ref_policy.posterior_.a, fast_policy.posterior_.a)
        assert np.array_equal(ref_policy.posterior_.b, fast_policy.posterior_.b)
    # both go on identically with the reference loop
    state = CampaignState.initial(Problem(n_items=25, budget=1000))
    for _ in range(40):
        a1 = ref_policy.select(state)
        a2 = fast_policy.select(state)
        assert a1 is not None and a2 is not None and a1.item == a2.item
        e1, e2 = ref_env.step(a1).event, fast_env.step(a2).event
        assert e1 == e2 and e1 is not None
        ref_policy.observe(e1)
        fast_policy.observe(e1)


def test_supports_fast_path() -> None:
    env = SyntheticBernoulliEnvironment(5)
    for policy_id in POLICIES:
        assert supports_fast_path(make_policy(policy_id), env)
    for policy_id in ["kg-random", "opt-kg:tie-break=random", "kg:tie-break=random"]:
        assert supports_fast_path(make_policy(policy_id), env)  # random ties (issue 15)
    for policy_id in ["round-robin", "dp", "thompson", "opt-kg:posterior=one-coin"]:
        assert not supports_fast_path(make_policy(policy_id), env)
    opt_kg = make_policy("opt-kg")
    assert not supports_fast_path(opt_kg, SyntheticBernoulliEnvironment(5, workers=WorkerPrior(3)))
    assert not supports_fast_path(
        opt_kg, SyntheticBernoulliEnvironment(2, prior=[[1.0, 1.0], [1.0, 2.0]])
    )
    assert not supports_fast_path(opt_kg, SyntheticBernoulliEnvironment(2, thresholds=[0.5, 0.4]))
    with pytest.raises(InvalidParameterError):
        run_campaign_fast(
            make_policy("round-robin"), env, [5], world_seed=0, policy_rng=np.random.default_rng(0)
        )


def _without_seconds(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[[c for c in frame.columns if not c.startswith("seconds")]]


def test_run_experiment_engines_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    env = SyntheticBernoulliEnvironment(30)
    policies = ["opt-kg", "kg", "cvar-kg:alpha=0.3", "uniform", "kg-random", "round-robin"]
    kwargs: dict[str, Any] = {"n_reps": 3, "seed": 7, "n_jobs": 1, "progress": False}
    calls: list[str] = []

    def spy(policy: AllocationPolicy, *args: Any, **kw: Any) -> Any:
        calls.append(repr(policy))
        return run_campaign_fast(policy, *args, **kw)

    monkeypatch.setattr(fast_module, "run_campaign_fast", spy)
    ref = run_experiment(policies, env, [15, 60, 150], engine="reference", **kwargs)
    assert calls == []
    auto = run_experiment(policies, env, [15, 60, 150], engine="auto", **kwargs)
    assert len(calls) == 5 * 3  # every supported policy, every replication; not round-robin
    fast = run_experiment(policies[:5], env, [15, 60, 150], engine="fast", **kwargs)
    pd.testing.assert_frame_equal(_without_seconds(ref.summary), _without_seconds(auto.summary))
    pd.testing.assert_frame_equal(
        _without_seconds(ref.summary[ref.summary["policy"] != "round-robin"]).reset_index(
            drop=True
        ),
        _without_seconds(fast.summary),
    )
    with pytest.raises(InvalidParameterError):
        run_experiment(["round-robin"], env, [15], engine="fast", **kwargs)
    with pytest.raises(InvalidParameterError):
        run_experiment(["opt-kg"], env, [15], engine="fast", mode="pull", **kwargs)
    with pytest.raises(InvalidParameterError):
        run_experiment(["opt-kg"], env, [15], engine="numba", **kwargs)


def test_engine_chooses_where_it_applies() -> None:
    env = SyntheticBernoulliEnvironment(5)
    assert COMPILED_ENGINE.supports(make_policy("opt-kg"), env, "push")
    assert not COMPILED_ENGINE.supports(make_policy("opt-kg"), env, "pull")
    assert COMPILED_ENGINE.supports(make_policy("kg-random"), env, "push")
    assert not COMPILED_ENGINE.supports(make_policy("round-robin"), env, "push")
    rows = COMPILED_ENGINE.run(
        make_policy("opt-kg"), env, [4, 9], world_seed=1, policy_rng=np.random.default_rng(2)
    )
    ref = run_campaign(
        make_policy("opt-kg"), env, [4, 9], world_seed=1, policy_rng=np.random.default_rng(2)
    )
    assert _comparable(rows) == _comparable(ref)


def test_engine_uses_public_hooks_only() -> None:
    """The fast engine (engine/fast.py and its _fast_* modules) reads no private attribute of
    another object (DESIGN §11: public hooks of policy and environment); its own names
    (``self._...``, module ``_...``) are fine."""
    import ast
    from pathlib import Path

    here = Path(fast_module.__file__).parent
    paths = [here / "fast.py", here / "_fast_tables.py", here / "_fast_kernel.py"]
    private = [
        f"{path.name}: {ast.unparse(node.value)}.{node.attr}"
        for path in paths
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self")
    ]
    assert private == []


def test_environment_hooks() -> None:
    env = SyntheticBernoulliEnvironment(70_000, theta=np.linspace(0.0, 1.0, 70_000))
    assert env.answers_follow_tiles
    tile_items, tile_labels = env.answer_tile_shape
    env.reset(seed=3)
    tile = env.noiseless_answer_tile(1, 2)  # the last, partial item block
    assert tile.dtype == np.int8 and tile.shape == (70_000 - tile_items, tile_labels)
    item = tile_items + 17
    stream = env.label_stream(item, 3 * tile_labels)
    assert np.array_equal(tile[17], stream[2 * tile_labels :])
    assert np.array_equal(env.answers_given, np.zeros(70_000, dtype=np.int64))
    counts = np.zeros(70_000, dtype=np.int64)
    counts[item] = 2 * tile_labels + 5
    env.set_answers_given(counts)
    event = env.step(Assignment(item=item)).event
    assert event is not None and event.label == tile[17, 5]
    assert env.answers_given[item] == 2 * tile_labels + 6
    with pytest.raises(InvalidParameterError):
        env.set_answers_given(np.zeros(3))
    assert not SyntheticBernoulliEnvironment(5, workers=WorkerPrior(3)).answers_follow_tiles

    class Shifted(SyntheticBernoulliEnvironment):
        def step(self, assignment: Assignment) -> StepResult:
            return super().step(assignment)

    assert not Shifted(5).answers_follow_tiles
    assert not supports_fast_path(make_policy("opt-kg"), Shifted(5))


def test_policy_hooks() -> None:
    policy = make_policy("opt-kg:tie-break=first")
    assert isinstance(policy, BetaIndexPolicy) and policy.pure_index
    policy.reset(Problem(n_items=4, budget=10), np.random.default_rng(0))
    policy.observe(LabelEvent(item=2, worker=0, label=1))
    post = policy.posterior_
    assert isinstance(post, BetaBernoulliPosterior)
    scores_now = policy.index_scores(post.a, post.b, post.thresholds)
    assert np.array_equal(scores_now, policy.scores())
    assert scores_now[2] == policy.item_score(2)
    scores = np.array([0.1, 0.3, 0.3, 0.2])
    policy.restore_scores(scores)
    state = CampaignState.initial(Problem(n_items=4, budget=10))
    chosen = policy.select(state)
    assert chosen is not None and chosen.item == 1  # largest score, first index among ties

    class Greedy(type(policy)):  # type: ignore[misc]
        def observe(self, event: LabelEvent) -> None:
            super().observe(event)

    assert not Greedy().pure_index
    assert not supports_fast_path(Greedy(), SyntheticBernoulliEnvironment(5))
