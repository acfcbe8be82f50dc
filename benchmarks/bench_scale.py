"""Decision cost against n_items, and replications per second in the papers' settings.

Run from the repository root::

    python benchmarks/bench_scale.py                      # 10^3 … 10^7 items
    python benchmarks/bench_scale.py --sizes 1000,100000 --reps 5 --json out.json

Part 1 — decisions per second in **one** campaign of ``n_items`` binary items (Beta(1, 1)
prior, threshold 0.5, budget 1.2 labels per item) for

- ``opt-kg`` — the reference engine (``select`` / ``observe`` in Python; ``ScoreBuckets``),
  and the compiled engine (``run_campaign_fast``, the whole campaign, set-up excluded);
- ``requallo`` (``fisher=0.2:max-labels=14``) — reference engine;
- ``lagrangian-index`` (Hu & Frazier Algorithm 1, r = 0.1, μ = 0.4) — reference engine, pull
  mode, index tables cut at 512 arrivals to go above 10^4 items (``max_lookahead``); and the
  compiled index loop (``engine.index_loop.run_instant``, the whole campaign, set-up
  excluded: the per-campaign set-up — reset, the world's answer tiles, the verdict — is the
  ``reset s`` column).

A reference-engine case times the first ``min(budget, --decisions)`` decisions after
``reset`` (labels are noiseless draws Bernoulli(θ_i) with θ_i ~ U(0, 1), fixed by the seed);
``reset`` (O(n_items): the prior, scores of every item, the index tables) is timed
separately. The claim to check: µs per decision is flat (or logarithmic) in n_items.

Part 2 — replications per second of whole campaigns in the papers' settings:

- K = 50, T = 10K = 500 labels (Chen et al. Fig. 2(a)): ``opt-kg`` (compiled engine, as the
  runner chooses it), ``opt-kg`` on the reference engine, ``requallo``;
- K = 1000, U = 1200 workers, r = 0.1, μ = 0.4 (Hu & Frazier Fig. 1, continuous time):
  ``lagrangian-index`` (compiled, as the runner chooses it, and the reference loop),
  ``opt-kg``, ``requallo``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from typing import Any

import numpy as np

from crowdbudget.engine.fast import run_campaign_fast
from crowdbudget.experiments.continuous import run_continuous_campaign
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.registry import make_policy
from crowdbudget.simulation.continuous_time import ContinuousTimeEnvironment
from crowdbudget.simulation.environment import SyntheticBernoulliEnvironment
from crowdbudget.types import CampaignState, LabelEvent, Problem

R, MU = 0.1, 0.4
REQUALLO = "requallo:fisher=0.2:max-labels=14"


def _policy(policy_id: str, n_items: int) -> Any:
    if policy_id == "lagrangian-index":
        lookahead = None if n_items <= 10_000 else 512
        return make_policy(
            f"lagrangian-index:arrival-rate={R}:completion-rate={MU}:label-cap=8"
            + (f":max-lookahead={lookahead}" if lookahead else "")
        )
    return make_policy(policy_id)


def reference_decisions(policy_id: str, n_items: int, max_decisions: int) -> dict[str, Any]:
    """Decisions per second of the reference loop (``select``/``observe``) in one campaign."""
    budget = round(1.2 * n_items)
    problem = Problem(n_items=n_items, budget=budget)
    rng = np.random.default_rng(0)
    theta = rng.random(n_items)
    policy = _policy(policy_id, n_items)
    start = time.perf_counter()
    policy.reset(problem, np.random.default_rng(1))
    reset_s = time.perf_counter() - start
    state = CampaignState.initial(problem)
    if policy_id == "lagrangian-index":
        state.extra["arrival_rate"] = R
        state.extra["completion_rate"] = MU
    worker = 0 if policy_id == "lagrangian-index" else None
    uniforms = rng.random(min(budget, max_decisions))
    n = 0
    start = time.perf_counter()
    while n < uniforms.shape[0]:
        assignment = policy.select(state, worker=worker)
        if assignment is None:
            break
        state.record_assignment(assignment)
        event = LabelEvent(assignment.item, 0, int(uniforms[n] < theta[assignment.item]))
        state.record_label(event, assignment)
        policy.observe(event)
        n += 1
    loop_s = time.perf_counter() - start
    return {
        "policy": policy_id,
        "engine": "reference",
        "n_items": n_items,
        "decisions": n,
        "reset_s": reset_s,
        "loop_s": loop_s,
        "decisions_per_s": n / loop_s,
        "us_per_decision": 1e6 * loop_s / n,
    }


def fast_decisions(n_items: int) -> dict[str, Any]:
    """The compiled engine's whole Opt-KG campaign (1.2 labels per item), set-up excluded."""
    env = SyntheticBernoulliEnvironment(n_items)
    budget = round(1.2 * n_items)
    run_campaign_fast(
        make_policy("opt-kg"), env, [12.0], world_seed=0, policy_rng=np.random.default_rng(0)
    )
    start = time.perf_counter()
    run_campaign_fast(
        make_policy("opt-kg"), env, [1.0], world_seed=0, policy_rng=np.random.default_rng(0)
    )
    setup_s = time.perf_counter() - start
    start = time.perf_counter()
    run_campaign_fast(
        make_policy("opt-kg"),
        env,
        [float(budget)],
        world_seed=0,
        policy_rng=np.random.default_rng(0),
    )
    total_s = time.perf_counter() - start
    loop_s = max(total_s - setup_s, 1e-9)
    return {
        "policy": "opt-kg",
        "engine": "compiled",
        "n_items": n_items,
        "decisions": budget,
        "reset_s": setup_s,
        "loop_s": loop_s,
        "decisions_per_s": budget / loop_s,
        "us_per_decision": 1e6 * loop_s / budget,
    }


def fast_index_decisions(n_items: int) -> dict[str, Any]:
    """The compiled index loop (``engine.index_loop``), one campaign of 1.2 labels per item
    with the reference case's policy (labels at once, worker 0), set-up excluded: the same
    campaign with one label measures the set-up (tables cached by the first); best of 5 each."""
    from crowdbudget.engine.index_loop import run_instant

    env = SyntheticBernoulliEnvironment(n_items)
    budget = round(1.2 * n_items)

    def run(labels: int) -> float:
        start = time.perf_counter()
        run_instant(
            _policy("lagrangian-index", n_items),
            env,
            [float(labels)],
            world_seed=0,
            policy_rng=np.random.default_rng(1),
        )
        return time.perf_counter() - start

    run(budget)  # tables, compilation
    setup_s = min(run(1) for _ in range(5))
    loop_s = max(min(run(budget) for _ in range(5)) - setup_s, 1e-9)
    return {
        "policy": "lagrangian-index",
        "engine": "compiled",
        "n_items": n_items,
        "decisions": budget,
        "reset_s": setup_s,
        "loop_s": loop_s,
        "decisions_per_s": budget / loop_s,
        "us_per_decision": 1e6 * loop_s / budget,
    }


def discrete_replications(reps: int) -> list[dict[str, Any]]:
    """K = 50, T = 500 (Chen et al. Fig. 2(a)): whole campaigns per second."""
    env = SyntheticBernoulliEnvironment(50)
    rows = []
    cases = [("opt-kg", "compiled"), ("opt-kg", "reference"), (REQUALLO, "reference")]
    for policy_id, engine in cases:
        run = run_campaign_fast if engine == "compiled" else run_campaign
        run(
            make_policy(policy_id),
            env,
            [500.0],
            world_seed=10_000,
            policy_rng=np.random.default_rng(0),
        )  # warm-up (compilation, score memo)
        start = time.perf_counter()
        for rep in range(reps):
            run(
                make_policy(policy_id),
                env,
                [100.0, 200.0, 300.0, 400.0, 500.0],
                world_seed=rep,
                policy_rng=np.random.default_rng(rep),
            )
        seconds = time.perf_counter() - start
        rows.append(
            {
                "setting": "K=50, T=500",
                "policy": policy_id,
                "engine": engine,
                "reps": reps,
                "replications_per_s": reps / seconds,
            }
        )
    return rows


def continuous_replications(reps: int) -> list[dict[str, Any]]:
    """K = 1000, U = 1200, r = 0.1, μ = 0.4 (Hu & Frazier Fig. 1)."""
    env = ContinuousTimeEnvironment(
        SyntheticBernoulliEnvironment(1000), arrival_rate=R, completion_rate=MU
    )
    rows = []
    cases = [
        ("lagrangian-index", "compiled"),
        ("lagrangian-index", "reference"),
        ("opt-kg", "reference"),
        (REQUALLO, "reference"),
    ]
    for policy_id, engine in cases:
        engine_arg = "fast" if engine == "compiled" else "reference"
        run_continuous_campaign(
            make_policy(policy_id),
            env,
            1200,
            world_seed=10_000,
            policy_rng=np.random.default_rng(0),
            engine=engine_arg,
        )  # warm-up: index tables, compilation
        start = time.perf_counter()
        for rep in range(reps):
            run_continuous_campaign(
                make_policy(policy_id),
                env,
                1200,
                world_seed=rep,
                policy_rng=np.random.default_rng(rep),
                engine=engine_arg,
            )
        seconds = time.perf_counter() - start
        rows.append(
            {
                "setting": "K=1000, U=1200, continuous time",
                "policy": policy_id,
                "engine": engine,
                "reps": reps,
                "replications_per_s": reps / seconds,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000,1000000,10000000")
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    decisions: list[dict[str, Any]] = []
    print(
        f"{'policy':<36}{'engine':<10}{'n_items':>12}{'decisions':>11}{'reset s':>9}"
        f"{'decisions/s':>13}{'µs/decision':>13}"
    )
    for n_items in sizes:
        cases: list[dict[str, Any]] = [fast_decisions(n_items)]
        for policy_id in ("opt-kg", REQUALLO, "lagrangian-index"):
            cases.append(reference_decisions(policy_id, n_items, args.decisions))
        cases.append(fast_index_decisions(n_items))
        for row in cases:
            decisions.append(row)
            print(
                f"{row['policy']:<36}{row['engine']:<10}{row['n_items']:>12,}"
                f"{row['decisions']:>11,}{row['reset_s']:>9.2f}{row['decisions_per_s']:>13,.0f}"
                f"{row['us_per_decision']:>13.2f}",
                flush=True,
            )
    replications = discrete_replications(args.reps) + continuous_replications(args.reps)
    print(f"\n{'setting':<34}{'policy':<36}{'engine':<10}{'replications/s':>15}")
    for row in replications:
        print(
            f"{row['setting']:<34}{row['policy']:<36}{row['engine']:<10}"
            f"{row['replications_per_s']:>15.1f}"
        )
    if args.json:
        machine = {"python": platform.python_version(), "numpy": np.__version__}
        with open(args.json, "w") as fh:
            json.dump(
                {"machine": machine, "decisions": decisions, "replications": replications},
                fh,
                indent=2,
            )


if __name__ == "__main__":
    main()
