"""One live campaign per policy family, over HTTP, beside the offline run on the same crowd.

Each family runs against a real ``crowdbudget serve`` (a uvicorn process on loopback, SQLite
store) and, offline, through the engine (:func:`crowdbudget.engine.loop.drive`) on the same
crowd; the script prints both accuracies (and whether the two made the same decisions):

- ``worker-aware``: ``opt-kg:posterior=one-coin`` in **pull mode** — workers arrive at random and
  ask for work; the policy picks the item for the worker who asks (Chen, Lin, Zhou 2013 §4).
- ``requallo``: ``requallo:ratio=4:max-labels=9`` in pull mode — a quality requirement (a 4:1
  majority per item) and a budget of 12 labels per item, which it leaves partly unspent: the
  campaign stops once no item gains (Li et al. 2016).
- ``bbta``: ``bbta`` with **contexts** in **push mode** — the policy picks (item, worker) pairs,
  the requester dispatches them (Zhang, Ma, Sugiyama 2015).
- ``b-kube``: ``b-kube`` with **worker prices and capacities** in push mode — one task at a
  time, the worker by a UCB knapsack on price and capacity (Rangi, Franceschetti 2018); prices
  as in their §6 (``c ~ U[v, 1 + v]`` with ``v = 2p − 1``), each worker at most n_items / 5
  labels.
- ``rte``: ``opt-kg:posterior=one-coin`` in push mode replaying RTE's recorded labels: the 164
  RTE workers are the team, each (item, worker) pair with a recorded label may be asked once
  and is answered with that label; compared with ``crowdbudget replay`` (10 replications).

The simulated crowd (``worker-aware``, ``requallo``, ``bbta``): items of a true class drawn
uniformly; 40% of the workers are spammers (accuracy 0.5) and the rest have an accuracy per
context, 0.9 on their strong contexts and 0.65 elsewhere; every (item, worker) answer is drawn
once up front (an answer table, each pair asked at most once), and workers arrive in a fixed
random order, so the live run and the offline run face the same crowd.

Run:  python examples/live_families.py [--family all|worker-aware|requallo|bbta|rte]
          [--items 400] [--budget 1200] [--seed 0] [--quick]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crowdbudget.aggregation.registry import make_aggregator
from crowdbudget.client import Client
from crowdbudget.datasets import load_dataset
from crowdbudget.engine.loop import Clock, StopAtSpend, drive
from crowdbudget.experiments.runner import run_experiment
from crowdbudget.labels import LabelData
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.verdict import make_verdict
from crowdbudget.registry import make_policy, split_verdict
from crowdbudget.service.local import LocalServer
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import (
    Assignment,
    CampaignState,
    FloatArray,
    IntArray,
    LabelEvent,
    PairAvailability,
    Problem,
    StepResult,
    WorkerSpec,
)

FAMILIES = {
    "worker-aware": ("opt-kg:posterior=one-coin", "pull"),
    "requallo": ("requallo:ratio=4:max-labels=9", "pull"),
    "bbta": ("bbta", "push"),
    "b-kube": ("b-kube", "push"),
}


# ------------------------------------------------------------------------------ the crowd
@dataclass
class Crowd:
    """A simulated crowd: truth (n_items,), answers (n_items, n_workers), contexts
    (n_items,), and the order in which workers arrive (pull mode)."""

    truth: IntArray
    answers: IntArray
    contexts: IntArray
    arrivals: IntArray
    prices: FloatArray
    capacities: IntArray

    @classmethod
    def simulate(cls, n_items: int, n_workers: int, n_contexts: int, seed: int) -> Crowd:
        rng = np.random.default_rng(seed)
        truth = rng.integers(0, 2, n_items)
        contexts = rng.integers(0, n_contexts, n_items)
        accuracy = np.full((n_workers, n_contexts), 0.65)
        strong = rng.random((n_workers, n_contexts)) < 0.4
        accuracy[strong] = 0.9
        accuracy[rng.random(n_workers) < 0.4] = 0.5  # spammers
        right = rng.random((n_items, n_workers)) < accuracy[:, contexts].T
        answers = np.where(right, truth[:, None], 1 - truth[:, None]).astype(np.int64)
        arrivals = rng.integers(0, n_workers, 100 * n_items)
        value = 2.0 * accuracy.mean(axis=1) - 1.0  # Rangi & Franceschetti §6: c ~ U[v, 1 + v]
        prices = np.round(np.maximum(rng.uniform(value, 1.0 + value), 0.05), 2)
        capacities = np.full(n_workers, max(5, n_items // 5), dtype=np.int64)
        return cls(
            truth,
            answers,
            contexts.astype(np.int64),
            arrivals.astype(np.int64),
            prices,
            capacities,
        )

    @property
    def n_items(self) -> int:
        return int(self.truth.shape[0])

    @property
    def n_workers(self) -> int:
        return int(self.answers.shape[1])


class CrowdWorld(LabelingEnvironment):
    """The crowd as an offline world: each (item, worker) pair answers once, from the
    answer table; workers arrive in the crowd's order."""

    def __init__(self, crowd: Crowd, *, use_contexts: bool, priced: bool = False) -> None:
        self.crowd = crowd
        self.use_contexts = use_contexts
        self.priced = priced
        self.n_items = crowd.n_items
        self.true_labels = crowd.truth

    def reset(self, *, seed: Any = None) -> dict[str, Any]:
        n, m = self.crowd.n_items, self.crowd.n_workers
        self.pairs = PairAvailability(
            items=np.repeat(np.arange(n, dtype=np.int64), m),
            workers=np.tile(np.arange(m, dtype=np.int64), n),
            remaining=np.ones(n * m, dtype=np.int64),
        )
        self._next = 0
        return {}

    def step(self, assignment: Assignment) -> StepResult:
        item, worker = assignment.item, assignment.worker
        assert worker is not None and self.pairs is not None
        self.pairs.remaining[item * self.crowd.n_workers + worker] -= 1
        label = int(self.crowd.answers[item, worker])
        return StepResult(LabelEvent(item=item, worker=worker, label=label, cost=assignment.price))

    def arriving_worker(self) -> int:
        worker = int(self.crowd.arrivals[self._next])
        self._next += 1
        return worker

    def problem(self, budget: float) -> Problem:
        contexts = self.crowd.contexts if self.use_contexts else None
        prices = capacities = None
        if self.priced:
            prices, capacities = self.crowd.prices, self.crowd.capacities
        workers = WorkerSpec(self.crowd.n_workers, prices=prices, capacities=capacities)
        return Problem(n_items=self.n_items, budget=budget, workers=workers, contexts=contexts)


class _LiveRules:
    """The policy as the engine sees it, under the live rule that a worker never labels an
    item twice (the worker's items are closed for the question, ``state.availability``; a
    policy that follows a plan may name one, which is no answer); records the decisions."""

    def __init__(self, policy: AllocationPolicy) -> None:
        self.policy = policy
        self.decisions: list[tuple[int, int | None]] = []
        self.labeled_by: dict[int, set[int]] = {}

    def select(self, state: CampaignState, *, worker: int | None = None) -> Assignment | None:
        own = self.labeled_by.get(worker, set()) if worker is not None else set()
        with state.availability.question(own):
            assignment = self.policy.select(state, worker=worker)
        if assignment is not None and assignment.item in own:
            assignment = None
        if assignment is not None:
            self.decisions.append((assignment.item, assignment.worker))
            if assignment.worker is not None:
                self.labeled_by.setdefault(assignment.worker, set()).add(assignment.item)
        return assignment

    def observe(self, event: LabelEvent) -> None:
        self.policy.observe(event)


def run_offline(
    policy_id: str, world: LabelingEnvironment, budget: float, mode: str, seed: int
) -> tuple[float, list[tuple[int, int | None]]]:
    """The engine on ``world`` with the generators a live campaign of ``seed`` gives its
    policy ([seed, 0] at reset, then [seed, 1]) and the live rule that a worker never labels
    an item twice (the worker's items excluded); returns the accuracy and the
    decisions."""
    world.reset(seed=seed)
    policy = make_policy(policy_id)
    problem = world.problem(budget)
    policy.reset(problem, np.random.default_rng([seed, 0]))
    policy.rng_ = np.random.default_rng([seed, 1])
    state = CampaignState.initial(problem)
    state.pairs = world.pairs
    rules = _LiveRules(policy)
    drive(rules, world, state, Clock(mode), StopAtSpend(budget))  # type: ignore[arg-type]
    # the campaign's verdict (Campaign.verdict_probabilities): the policy's default — its own
    # model, ties by the estimated class prior, draws seeded by the campaign's seed; or an
    # aggregator (the worker-aware one-coin policy's MACE) seeded by the campaign's seed and
    # fitted on every label with the campaign's worker numbering (all known workers)
    name = split_verdict(policy_id)[1].name
    if name in ("posterior", "paper"):
        verdict = make_verdict(name)
        verdict.reset(problem, np.random.default_rng(seed))
        labels = verdict.labels(state, policy)
    else:
        log = state.label_log
        n_workers = problem.n_workers or int(log.workers.max(initial=-1)) + 1
        data = LabelData(
            items=log.items.copy(),
            workers=log.workers.copy(),
            labels=log.labels.copy(),
            item_ids=np.arange(problem.n_items).astype(str).astype(object),
            worker_ids=np.arange(n_workers).astype(str).astype(object),
            classes=tuple(str(c) for c in range(problem.n_classes)),
        )
        labels = make_aggregator(f"{name}:seed={seed}").fit(data).labels_
    mask = world.evaluation_mask if world.evaluation_mask is not None else slice(None)
    return float(np.mean(labels[mask] == world.true_labels[mask])), rules.decisions


# ------------------------------------------------------------------------------ live runs
def _live_campaign(
    base_url: str, body: dict[str, Any], team: list[str]
) -> tuple[str, Client, dict[str, Client]]:
    """Create the campaign (requester key) and a token per team member."""
    anon = Client(base_url)
    created = anon.create_campaign(**body)
    cid = created["campaign_id"]
    boss = anon.with_key(created["requester_key"])
    members = {w: anon.with_key(boss.add_worker(cid, w)["worker_token"]) for w in team}
    return cid, boss, members


def run_live_crowd(
    base_url: str, crowd: Crowd, policy: str, mode: str, budget: int, seed: int
) -> tuple[float, list[tuple[int, int]], dict[str, Any]]:
    """One live campaign over HTTP on the simulated crowd; returns accuracy, decisions and
    the final status."""
    items = [f"i{k}" for k in range(crowd.n_items)]
    team = [f"w{j}" for j in range(crowd.n_workers)]
    body: dict[str, Any] = {
        "items": items,
        "budget": budget,
        "policy": policy,
        "seed": seed,
        "mode": mode,
        "workers": team,
        "ttl": 600.0,
    }
    if policy.startswith("bbta"):
        body["contexts"] = crowd.contexts.tolist()
    if policy.startswith("b-kube"):
        body["worker_prices"] = {w: float(p) for w, p in zip(team, crowd.prices, strict=True)}
        body["worker_capacities"] = {w: int(c) for w, c in zip(team, crowd.capacities, strict=True)}
    cid, boss, members = _live_campaign(base_url, body, team)
    decisions: list[tuple[int, int]] = []

    def answer(assignment: dict[str, Any]) -> None:
        i, j = int(assignment["item_id"][1:]), int(assignment["worker_id"][1:])
        decisions.append((i, j))
        members[assignment["worker_id"]].submit_label(
            cid, assignment["assignment_id"], str(crowd.answers[i, j])
        )

    if mode == "push":
        while batch := boss.push(cid, count=1):
            for assignment in batch:
                answer(assignment)
    else:
        for worker in crowd.arrivals:
            work = members[team[int(worker)]].next_assignment(cid)
            if work is None:
                break  # as the engine does: the policy stopped (or the budget is spent)
            answer(work)
    results = {r["task"]: r["label"] for r in boss.results(cid)}
    labels = np.array([int(results[i]) for i in items])
    return float(np.mean(labels == crowd.truth)), decisions, boss.status(cid)


def run_family(family: str, base_url: str, n_items: int, budget: int, seed: int) -> dict[str, Any]:
    policy, mode = FAMILIES[family]
    if family == "requallo":
        # room to spare: Requallo stops once no item gains, leaving the rest unspent
        budget = 12 * n_items
    crowd = Crowd.simulate(n_items, n_workers=30, n_contexts=3, seed=seed)
    live, live_decisions, status = run_live_crowd(base_url, crowd, policy, mode, budget, seed)
    world = CrowdWorld(
        crowd, use_contexts=policy.startswith("bbta"), priced=policy.startswith("b-kube")
    )
    offline, offline_decisions = run_offline(policy, world, budget, mode, seed)
    return {
        "family": family,
        "policy": policy,
        "mode": mode,
        "items": n_items,
        "budget": budget,
        "spent_live": status["spent"],
        "items_labeled": status["items_labeled"],
        "live_accuracy": live,
        "offline_accuracy": offline,
        "same_decisions": live_decisions == offline_decisions,
    }


def run_rte(base_url: str, budget: int, seed: int, reps: int = 10) -> dict[str, Any]:
    """opt-kg:posterior=one-coin in push mode replaying RTE through HTTP, beside the engine
    with the campaign's generators and ``crowdbudget replay`` (``reps`` replications)."""
    policy = "opt-kg:posterior=one-coin"
    data = load_dataset("rte")
    world = ReplayEnvironment.from_label_data(data)
    world.reset(seed=0)
    assert world.pairs is not None
    items = [str(i) for i in data.item_ids]
    team = [str(w) for w in data.worker_ids]
    pairs = [
        [items[i], team[w]] for i, w in zip(world.pairs.items, world.pairs.workers, strict=True)
    ]
    recorded = {
        (items[i], team[w]): str(data.classes[label])
        for i, w, label in zip(data.items, data.workers, data.labels, strict=True)
    }
    body = {
        "items": items,
        "budget": budget,
        "classes": list(data.classes),
        "policy": policy,
        "seed": seed,
        "mode": "push",
        "workers": team,
        "pairs": pairs,
        "ttl": 600.0,
    }
    cid, boss, members = _live_campaign(base_url, body, team)
    while batch := boss.push(cid, count=1):
        for a in batch:
            label = recorded[(a["item_id"], a["worker_id"])]
            members[a["worker_id"]].submit_label(cid, a["assignment_id"], label)
    gold = dict(zip(items, np.asarray(data.classes)[data.gold], strict=True))
    live = float(np.mean([r["label"] == gold[r["task"]] for r in boss.results(cid)]))
    engine, _ = run_offline(policy, world, budget, "push", seed)
    replay = run_experiment([policy], world, [budget], reps, seed=seed, progress=False, n_jobs=1)
    row = replay.summary.iloc[0]
    return {
        "family": "rte",
        "policy": policy,
        "mode": "push",
        "budget": budget,
        "spent_live": boss.status(cid)["spent"],
        "live_accuracy": live,
        "offline_accuracy": engine,
        "replay_accuracy_mean": float(row["accuracy_mean"]),
        "replay_accuracy_std": float(row["accuracy_std"]),
        "replay_reps": reps,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--family",
        default="all",
        choices=["all", *FAMILIES, "rte"],
        help="one policy family, or all of them (default all)",
    )
    parser.add_argument(
        "--items", type=int, default=400, help="items of each family's campaign (default 400)"
    )
    parser.add_argument(
        "--budget", type=int, default=1200, help="labels of each family's campaign (default 1200)"
    )
    parser.add_argument(
        "--rte-budget", type=int, default=3200, help="labels of the RTE replay (default 3200)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of crowds and policies")
    parser.add_argument("--quick", action="store_true", help="small sizes (the test's)")
    args = parser.parse_args(argv)
    if args.quick:
        args.items, args.budget, args.rte_budget = 120, 360, 800
    families = [*FAMILIES, "rte"] if args.family == "all" else [args.family]
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        # simulated workers answer at machine speed: lift the per-key request rate meant for
        # people (the requester's push loop alone would pass it)
        LocalServer(
            f"sqlite:///{Path(tmp) / 'live.db'}",
            extra_args=["--requests-per-second-per-key", "100000"],
        ) as server,
    ):
        for family in families:
            if family == "rte":
                rows.append(
                    run_rte(server.url, args.rte_budget, args.seed, 3 if args.quick else 10)
                )
            else:
                rows.append(run_family(family, server.url, args.items, args.budget, args.seed))
            print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
