"""The push replay's compiled runs (policies/_push_replay.py, engine/replay_push.py): whole
campaigns of the worker-aware Opt-KG default with and without them — the same labels in the
same order, the same rows, beliefs, generator, campaign state and world."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crowdbudget.datasets import load_dataset
from crowdbudget.engine import replay_push
from crowdbudget.engine.loop import CheckpointRecorder
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from decision_log import PUSH_POLICIES, adversarial_world


def _campaign(
    policy_id: str, env: ReplayEnvironment, budgets: list[float], seed: int, compiled: bool
) -> dict[str, Any]:
    """One campaign; what it leaves behind: rows, label log, state, beliefs, draws, world."""
    policy = make_policy(policy_id)
    policy.compiled_replay = compiled  # type: ignore[attr-defined]
    states = []
    finish = CheckpointRecorder.finish
    taken = []
    take = replay_push.take_labels

    def keep(recorder: CheckpointRecorder, state: Any) -> None:
        states.append(state)
        finish(recorder, state)

    def counted(*args: Any) -> Any:
        n, ended = take(*args)
        taken.append(n)
        return n, ended

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CheckpointRecorder, "finish", keep)
        patch.setattr(replay_push, "take_labels", counted)
        rows = run_campaign(
            policy, env, budgets, world_seed=seed, policy_rng=np.random.default_rng(seed)
        )
    (state,) = states
    log = state.label_log
    post = policy.posterior_
    return {
        "rows": [{k: v for k, v in row.items() if k != "seconds"} for row in rows],
        "log": [x.tolist() for x in (log.items, log.workers, log.labels, log.costs)],
        "state": (
            state.spent,
            state.committed,
            state.n_events,
            state.time,
            state.label_counts.tolist(),
            state.pending.tolist(),
            state.eligible.tolist(),
        ),
        "beliefs": [getattr(post, name).tolist() for name in ("a", "b", "c", "d")],
        "rng": policy._rng.bit_generator.state,
        "world": [
            getattr(env, name).tolist()
            for name in ("_perm", "_slot_of", "_used", "_pair_unused", "_unused", "_eligible")
        ]
        + [env._n_used],
        "policy": (policy._n_log, policy._n_labeled, policy._n_states, policy._stale_list),
        "taken": sum(taken),
    }


def _same(policy_id: str, env: ReplayEnvironment, budgets: list[float], seed: int) -> int:
    fast = _campaign(policy_id, env, budgets, seed, True)
    reference = _campaign(policy_id, env, budgets, seed, False)
    assert reference["taken"] == 0
    taken = fast.pop("taken")
    reference.pop("taken")
    for key, value in reference.items():
        assert fast[key] == value, key
    return int(taken)


@pytest.mark.parametrize(
    "policy_id",
    [*PUSH_POLICIES, "opt-kg:posterior=one-coin:refit-tol=0.01:refit-exact-until=600"],
)
def test_rte_campaign_is_the_python_loops(policy_id: str) -> None:
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    taken = _same(policy_id, env, [400.0, 1000.0, 1500.0], 5)
    assert taken > 1400  # the compiled runs took nearly every label


def test_whole_world_and_adversaries_are_the_python_loops() -> None:
    # every record used (the world's end, the bounds' fallback to the scan at the last
    # pairs), workers below 1/2, pairs recorded twice
    env = adversarial_world(60, 12, 3, repeated=40)  # 40 pairs with a second record
    for policy_id in ("opt-kg:posterior=one-coin", "opt-kg:posterior=one-coin:refit=0"):
        for seed in (0, 1):
            assert _same(policy_id, env, [150.0, float(env.n_records)], seed) > 300


def test_not_taken_where_the_python_loop_must_decide() -> None:
    # a budget whose last label the policy cannot pay (price 1, budget 10.5), KG (no bounds)
    env = ReplayEnvironment.from_label_data(load_dataset("rte"))
    assert _same("opt-kg:posterior=one-coin", env, [10.5, 200.5], 2) > 150
    assert _same("kg:posterior=one-coin", env, [300.0], 2) == 0
