"""Golden hashes: the safety net of the "one house" refactor (issue #16).

Every case below runs today's code on a small, fixed configuration and reduces the run to a
SHA-256 digest of its canonical JSON:

- ``policy/<id>@<world>[/pull]``: one campaign of a registered policy id through the runner's
  campaign loop, recording every assignment the loop hands to the world (item, worker, price)
  with the label that came back (worker, label, cost), and the policy's final labels and
  the runner's row (accuracy, labels used) at each budget checkpoint;
- ``experiment/<id>@<world>``: the per-run numbers of :func:`run_experiment` (2 replications,
  seed 0, one process, engine ``auto`` — so the compiled engine's campaigns are covered too);
- ``priced/<id>@<set>``: the priced-worker policies of Rangi & Franceschetti (2018) on one
  small worker set: the worker of every evaluation, the predicted labels and the spend;
- ``continuous/<id>``: one continuous-time campaign (Hu & Frazier §6);
- ``reproduce/<id>``: the summary numbers (means, stds and intervals of every metric, the
  claims, the extra figures' data) of every reproduction's ``--quick`` run at seed 0, or of
  a reduced run of the same code path when the quick run is slow (see ``REDUCED``);
- ``live/<id>/<mode>``: one scripted live :class:`~crowdbudget.campaign.Campaign` per id in
  each mode it declares (pull, push) on a fake clock — prices, a capacity, a label cap, a
  pending limit, a ttl, items and workers joining, cancellations and expiries: every
  assignment, every refusal and "no work" answer with its stop reason, the money and the
  results — the net under the live allocation rules;
- ``store/<id>/<mode>``: the event table the ``live/<id>/<mode>`` script leaves, row by row
  as written (sequence number, kind, the payload's JSON text — its bytes, not the parsed
  value), the random ids (campaign, assignments) numbered by first appearance and the wall
  clock's ``created_at`` dropped — the net under the event store's write path;
- ``cli/<command>``: the ``results`` of the ``--json`` document of ``simulate``, ``replay``
  and ``compare`` with their default policies and budgets (fewer replications).

Timings (``seconds`` columns) are dropped: they are the only part of a run that is not a
function of the seed. So are the calibration columns of the verdict (``ece``, ``nll``,
``brier`` and their summaries, issue 19): they were added after these digests were recorded,
and the digests check that the numbers that were there are unchanged. Floats are hashed
through ``repr`` (shortest round-trip form), so a digest is equal only when every number is
bit-identical.

Regenerate after a deliberate change (and name the change in the closing note)::

    CROWDBUDGET_DATA_DIR=<directory of the large data sets> python tests/golden/record.py

Cases whose data set is not found (neither bundled nor under ``CROWDBUDGET_DATA_DIR``) are
recorded as missing and skipped by the test, which says which ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crowdbudget.exceptions import CrowdBudgetError, DataFormatError
from crowdbudget.experiments.continuous import run_continuous_campaign
from crowdbudget.experiments.runner import run_campaign, run_experiment
from crowdbudget.registry import make_policy, split_verdict
from crowdbudget.simulation.contextual import ContextualWorkerEnvironment
from crowdbudget.simulation.continuous_time import ContinuousTimeEnvironment
from crowdbudget.simulation.environment import (
    FeatureEnvironment,
    LabelingEnvironment,
    SyntheticBernoulliEnvironment,
)
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.simulation.workers import WorkerPool, WorkerPrior
from crowdbudget.types import Assignment, StepResult

HASHES_PATH = Path(__file__).with_name("hashes.json")
#: per case, digests of the same code recorded on other CPUs and why they differ
#: (``{"case": {"digests": [...], "why": "..."}}``); :func:`main` drops the cases it records
OTHER_MACHINES_PATH = Path(__file__).with_name("other_machines.json")

# --------------------------------------------------------------------------- canonical form


#: the verdict's calibration metrics (issue 19), added after the digests were recorded
_CALIBRATION = ("ece", "nll", "brier")


def _kept(name: Any) -> bool:
    """Whether a column / key is hashed: not a timing, not a calibration metric."""
    text = str(name)
    return "seconds" not in text and not text.startswith(_CALIBRATION)


def _plain(value: Any) -> Any:
    """``value`` as plain JSON types (arrays as lists, NaN as the string "nan")."""
    if isinstance(value, pd.DataFrame):
        frame = value[[c for c in value.columns if _kept(c)]]
        return {"columns": [str(c) for c in frame.columns], "rows": _plain(frame.to_numpy())}
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items() if _kept(k)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return _plain(value.item())
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def digest(payload: Any) -> str:
    """SHA-256 of the canonical JSON of ``payload`` (sorted keys, floats by repr)."""
    text = json.dumps(_plain(payload), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- worlds


class _Recording:
    """A world that records what the campaign loop asked of it: the loop sees the wrapped
    world through attribute delegation, only ``step`` is observed."""

    def __init__(self, env: LabelingEnvironment) -> None:
        self._env = env
        self.steps: list[list[Any]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def step(self, assignment: Assignment) -> StepResult:
        result = self._env.step(assignment)
        event = result.event
        self.steps.append(
            [
                assignment.item,
                assignment.worker,
                assignment.price,
                None if event is None else [event.worker, event.label, event.cost],
            ]
        )
        return result


def _replay_subset(name: str, n_items: int) -> ReplayEnvironment:
    """The replay world of the first ``n_items`` items of a bundled data set."""
    from crowdbudget.datasets import load_dataset

    data = load_dataset(name)
    keep = data.items < n_items
    assert data.gold is not None
    return ReplayEnvironment(
        data.items[keep],
        data.workers[keep],
        data.labels[keep],
        data.gold[:n_items],
        n_items=n_items,
        n_workers=data.n_workers,
        n_classes=data.n_classes,
        name=f"{name}[:{n_items}]",
    )


def _contextual() -> ContextualWorkerEnvironment:
    rng = np.random.default_rng(7)
    truth = rng.integers(0, 2, 24)
    contexts = rng.integers(0, 3, 24)
    return ContextualWorkerEnvironment(truth, contexts, "one-coin", n_workers=6)


def _features() -> FeatureEnvironment:
    features = np.random.default_rng(11).normal(size=(12, 3))
    return FeatureEnvironment(features, world="logistic", weight_var=1.0)


#: world name -> (factory, budgets)
WORLDS: dict[str, tuple[Callable[[], LabelingEnvironment], tuple[float, ...]]] = {
    "noiseless": (lambda: SyntheticBernoulliEnvironment(10), (12.0, 30.0)),
    "one-coin": (lambda: SyntheticBernoulliEnvironment(10, workers=WorkerPrior(4)), (12.0, 30.0)),
    "two-coin": (
        lambda: SyntheticBernoulliEnvironment(
            8, workers=WorkerPool.two_coin([0.9, 0.6, 0.8], [0.7, 0.8, 0.9])
        ),
        (12.0, 24.0),
    ),
    "replay-rte": (lambda: _replay_subset("rte", 20), (20.0, 60.0)),
    "replay-wsd": (lambda: _replay_subset("wsd", 12), (12.0, 40.0)),
    "contextual": (_contextual, (24.0, 60.0)),
    "features": (_features, (12.0, 30.0)),
}

#: the policy ids every world is tried with (a policy that refuses a world is recorded as
#: refusing it): every registered id and the variants the papers name
POLICY_IDS = (
    "uniform",
    "round-robin",
    "kg",
    "kg-random",
    "opt-kg",
    "cvar-kg:alpha=0.3",
    "thompson",
    "ucb1-tuned",
    "label-uncertainty",
    "gittins",
    "gittins-inf",
    "lagrangian-index",
    "dp",
    "kos",
    "random-bp",
    "random-pair",
    "requallo",
    "bbta",
    "iethresh",
    "crowdsense",
    "opt-kg-per-context",
    "opt-kg:per-context",
    "opt-kg:workers=one-coin",
    "opt-kg:workers=two-coin",
    "kg:workers=one-coin",
    "opt-kg:features=logistic",
    "opt-kg:final=ds",
    "uniform:final=one-coin-em",
)

#: policies too slow for the larger worlds (budget-aware exact DP): a 3-item world, once
_TINY_ONLY = {"dp"}


def _policy_case(policy_id: str, world: str, mode: str) -> dict[str, Any]:
    factory, budgets = WORLDS[world]
    if policy_id in _TINY_ONLY:
        factory, budgets = (lambda: SyntheticBernoulliEnvironment(3)), (6.0,)
    env = _Recording(factory())
    finals: list[list[int]] = []

    def keep_final_labels(state: Any, labels: Any, truth: Any, mask: Any) -> dict[str, float]:
        finals.append(np.asarray(labels).tolist())
        return {}

    try:
        # the verdict beside the policy (ids recorded as ``…:final=ds`` name one)
        policy_spec, verdict_spec = split_verdict(policy_id)
        rows = run_campaign(
            make_policy(policy_spec),
            env,  # type: ignore[arg-type]
            budgets,
            world_seed=np.random.SeedSequence(0),
            policy_rng=np.random.default_rng(1),
            mode=mode,
            metrics=keep_final_labels,
            verdict=None if verdict_spec.is_posterior else verdict_spec.build(),
        )
    except CrowdBudgetError:
        return {"refused": True}
    return {"steps": env.steps, "final_labels": finals, "rows": rows}


def _experiment_case(policy_id: str, world: str) -> dict[str, Any]:
    factory, budgets = WORLDS[world]
    if policy_id in _TINY_ONLY:
        factory, budgets = (lambda: SyntheticBernoulliEnvironment(3)), (6.0,)
    try:
        result = run_experiment(
            [policy_id], factory(), budgets, 2, seed=0, n_jobs=1, progress=False
        )
    except CrowdBudgetError:
        return {"refused": True}
    return {"runs": result.runs}


def _priced_case(policy_id: str, worker_set: str) -> dict[str, Any]:
    from crowdbudget.experiments.papers.rangi2018 import ALL_POLICIES
    from crowdbudget.simulation.priced_workers import rangi_worker_sets

    set_a, set_b = rangi_worker_sets(12, np.random.default_rng([0, 0, 12]))
    pool = set_a if worker_set == "A" else set_b
    outcome = ALL_POLICIES[policy_id](pool, 60.0, 12, np.random.default_rng([0, 0, 12, 60, 1]))
    return {
        "selections": outcome.selections,
        "predicted": outcome.predicted,
        "labels_per_task": outcome.labels_per_task,
        "true_labels": outcome.true_labels,
        "spent": outcome.spent,
        "remaining_capacity": outcome.remaining_capacity,
    }


def _continuous_case(policy_id: str) -> dict[str, Any]:
    env = ContinuousTimeEnvironment(
        SyntheticBernoulliEnvironment(8), arrival_rate=0.5, completion_rate=0.4
    )
    row = run_continuous_campaign(
        make_policy(policy_id), env, 30, world_seed=3, policy_rng=np.random.default_rng(4)
    )
    return {"row": row}


# --------------------------------------------------------------------------- reproductions

#: reproductions whose ``--quick`` run is too slow for the test suite: the same code path at a
#: smaller size (module function and keyword arguments)
REDUCED: dict[str, Callable[[], Any]] = {
    # quick: 3 replications at 1, 4, 10 labels per item of RTE (about 40 s)
    "chen2013-fig3b": lambda: _paper("chen2013").fig3b(
        seed=0, quick=True, n_jobs=1, progress=False, reps=1, per_item=[1, 2]
    ),
    # quick: 2 replications at 0.1, 0.5, 1, 2 labels per item of ionosphere (about 3 min)
    "chen2013-features": lambda: _paper("chen2013").features(
        seed=0, quick=True, n_jobs=1, progress=False, reps=1, per_item=(0.1, 0.2)
    ),
    # quick: 5 replications at 5 budgets and a regret curve at 3 budgets (about 20 s)
    "bkube-fig1": lambda: _rangi(50, with_regret=True),
    # quick: 5 replications at 5 budgets (about 9 s)
    "bkube-fig2": lambda: _rangi(100, with_regret=False),
}


class _Reduced:
    """What :func:`_reproduction_case` reads of a reproduction's result."""

    def __init__(self, summary: Any, claims: Any, extra: list[tuple[str, Any]]) -> None:
        self.summary = summary
        self.claims = claims
        self.extra_plots = [type("Plot", (), {"name": n, "summary": s}) for n, s in extra]


def _rangi(n_tasks: int, *, with_regret: bool) -> _Reduced:
    """The steps of ``rangi2018._figure`` (cases, summary, claims, regret curves) at one
    replication and the first two budgets (regret: one replication, the first budget)."""
    rangi2018 = _paper("rangi2018")
    raw = rangi2018.run_case(n_tasks, rangi2018.BUDGETS[:2], 1, 0)
    summary = rangi2018.summarize_cases(raw)
    extra = []
    if with_regret:
        for feedback in ("truth", "estimate"):
            curve = rangi2018.regret_curve(rangi2018.REGRET_BUDGETS[:1], 1, 0, feedback=feedback)
            extra.append((f"regret-{feedback}", curve))
    return _Reduced(summary, rangi2018.claim_rows(summary), extra)


def _paper(name: str) -> Any:
    import importlib

    return importlib.import_module(f"crowdbudget.experiments.papers.{name}")


def _reproduction_case(reproduction_id: str) -> dict[str, Any]:
    from crowdbudget.experiments.papers import REPRODUCTIONS

    run = REDUCED.get(reproduction_id)
    if run is not None:
        result = run()
    else:
        result = REPRODUCTIONS[reproduction_id].run(seed=0, quick=True, n_jobs=1, progress=False)
    return {
        "summary": result.summary,
        "claims": result.claims,
        "extra_plots": [{"name": p.name, "summary": p.summary} for p in result.extra_plots],
    }


# --------------------------------------------------------------------------- command line


def _cli_case(argv: list[str]) -> dict[str, Any]:
    import tempfile

    from crowdbudget.cli import main

    with tempfile.TemporaryDirectory() as out:
        extra = ["--out", out] if argv[0] == "compare" else []
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            status = main([*argv, *extra, "--json", "--no-progress", "--jobs", "1"])
    document = json.loads(buffer.getvalue())
    return {"status": status, "results": document["results"]}


CLI_CASES = {
    "simulate": [
        "simulate",
        "--items",
        "10",
        "--policies",
        "uniform,kg,opt-kg",
        "--budget-per-item",
        "1,3,5",
        "--reps",
        "3",
    ],
    "replay": [
        "replay",
        "--policies",
        "uniform,opt-kg,opt-kg:workers=one-coin",
        "--budget-per-item",
        "1,2",
        "--reps",
        "2",
    ],
    "compare-rte": ["compare", "--budget-per-item", "1,3", "--reps", "1"],
    "compare-wsd": ["compare", "--dataset", "wsd", "--reps", "2"],
}

# --------------------------------------------------------------------------- live campaigns

#: what a live campaign is tried with: every id that runs live in pull or push mode
LIVE_VARIANTS = ("opt-kg:posterior=one-coin", "opt-kg:posterior=one-coin:refit=10")


class _LiveClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _live_case(policy_id: str, mode: str, events: bool = False) -> Any:
    """One scripted live :class:`~crowdbudget.campaign.Campaign` on a fake clock: priced
    workers, a capacity, a label cap, a pending limit, a ttl, items and workers added
    mid-campaign, cancellations and expiries. Records every assignment handed out (item,
    worker, price), every ``None`` answer with the status' stop reason, and at the end the
    status' money and the results (label, confidence); with ``events``, the rows the script
    left in the event table instead (:func:`_stored_events`)."""
    from crowdbudget.campaign import Campaign, EventStore

    clock = _LiveClock()
    rng = np.random.default_rng(7)
    n_items = 4 if policy_id == "dp" else 12
    items = [f"q{k}" for k in range(n_items)]
    truth = {f"q{k}": int(rng.integers(2)) for k in range(n_items + 3)}
    accuracy = {"w0": 0.95, "w1": 0.9, "w2": 0.8, "w3": 0.7, "w4": 0.55, "late": 0.85}
    try:
        campaign = Campaign.create(
            items,
            budget=8.0 if policy_id == "dp" else 30.0,
            policy=policy_id,
            seed=3,
            ttl=10.0,
            workers=["w0", "w1", "w2"],
            worker_prices={"w1": 0.5, "w3": 1.5},
            worker_capacities={"w2": 4},
            max_labels_per_item=None if policy_id == "dp" else 4,
            max_pending_per_worker=2,
            mode=mode,
            store=EventStore("sqlite://"),
            clock=clock,
        )
    except CrowdBudgetError as exc:
        return {"refused": type(exc).__name__}
    present = ["w0", "w1", "w2", "w3", "w4"]
    log: list[Any] = []
    held: list[Any] = []
    for step in range(160):
        clock.now += 1.0
        if step == 10 and policy_id != "dp":
            try:
                campaign.add_items([f"q{n_items + k}" for k in range(3)])
                log.append("items+3")
            except CrowdBudgetError as exc:
                log.append(["add_items refused", type(exc).__name__])
        if step == 12:
            present.append("late")
            if mode == "push":
                campaign.add_workers(["w3", "w4", "late"])
        if step == 25:
            for pending in campaign.pending_assignments("w4"):
                campaign.cancel_assignment(pending.assignment_id)
            present.remove("w4")
        if mode == "push":
            given = campaign.push_assignments(2)
        else:
            one = campaign.next_assignment(present[int(rng.integers(len(present)))])
            given = [] if one is None else [one]
        if not given:
            log.append(["none", campaign.status()["stop_reason"]])
            if len(log) > 2 and log[-2][0:1] == ["none"] and log[-3][0:1] == ["none"]:
                break  # three times nothing: the campaign is done
        for assignment in given:
            log.append([assignment.item_id, assignment.worker_id, assignment.price])
            held.append(assignment)
        # answer, cancel or leave the oldest held assignments
        while len(held) > 1:
            assignment = held.pop(0)
            pair = [assignment.item_id, assignment.worker_id]  # ids are random: not hashed
            fate = rng.random()
            try:
                if fate < 0.08:
                    campaign.cancel_assignment(assignment.assignment_id)
                    log.append(["cancel", *pair])
                elif fate < 0.14:
                    log.append(["left", *pair])  # expires after the ttl
                else:
                    right = rng.random() < accuracy[assignment.worker_id]
                    value = truth[assignment.item_id]
                    label = value if right else 1 - value
                    campaign.record_label(assignment.assignment_id, str(label))
                    log.append(["label", *pair, label])
            except CrowdBudgetError as exc:  # expired, or handed out again and answered
                log.append(["refused", *pair, type(exc).__name__])
    clock.now += 100.0
    campaign.expire_overdue()
    if events:
        return _stored_events(campaign)
    status = campaign.status()
    money = {k: status[k] for k in ("spent", "committed", "remaining", "n_labels", "pending")}
    results = campaign.results()
    return {
        "log": log,
        "status": money,
        "stopped": [status["stopped"], status["stop_reason"]],
        "results": [results["label"].tolist(), results["confidence"].tolist()],
    }


#: a random id of the live campaign (``uuid4().hex``) as a JSON string in a payload (the
#: policy's stream state is hex too, but ``0x``-prefixed, so never matched)
_RANDOM_ID = re.compile(r'(?<=")[0-9a-f]{32}(?=")')

#: the live ids whose event tables are pinned (``store/<id>/<mode>``): the default, its
#: refit variant, and a policy without workers
STORE_VARIANTS = (
    ("opt-kg:posterior=one-coin", "pull"),
    ("opt-kg:posterior=one-coin", "push"),
    ("opt-kg:posterior=one-coin:refit=10", "pull"),
    ("opt-kg", "pull"),
)


def _stored_events(campaign: Any) -> list[list[Any]]:
    """Every row of ``campaign``'s event table as written: ``[seq, kind, payload text]``,
    with each random id (the campaign's, the assignments') replaced by its order of first
    appearance; ``created_at`` (the wall clock's) left out."""
    import sqlalchemy as sa

    names: dict[str, str] = {}

    def rename(match: re.Match[str]) -> str:
        return names.setdefault(match.group(0), f"id{len(names)}")

    query = sa.text("SELECT campaign_id, seq, kind, payload FROM events ORDER BY seq")
    with campaign.store.engine.connect() as connection:
        rows = connection.execute(query).all()
    assert {row[0] for row in rows} == {campaign.campaign_id}
    return [[row[1], row[2], _RANDOM_ID.sub(rename, row[3])] for row in rows]


def _live_ids() -> list[tuple[str, str]]:
    from crowdbudget.registry import parse_policy, registered_policies

    return [
        (policy_id, mode)
        for policy_id in [*sorted(registered_policies()), *LIVE_VARIANTS]
        for mode in parse_policy(policy_id).capabilities.live_modes()
    ]


# --------------------------------------------------------------------------- the cases


def cases() -> Iterator[tuple[str, Callable[[], Any]]]:
    """Every golden case: (name, function returning the payload to hash)."""
    from crowdbudget.experiments.papers import REPRODUCTIONS
    from crowdbudget.experiments.papers.rangi2018 import ALL_POLICIES

    for policy_id in POLICY_IDS:
        worlds = ["noiseless"] if policy_id in _TINY_ONLY else list(WORLDS)
        for world in worlds:
            yield (
                f"policy/{policy_id}@{world}",
                lambda p=policy_id, w=world: _policy_case(p, w, "push"),
            )
        yield (
            f"policy/{policy_id}@one-coin/pull",
            lambda p=policy_id: _policy_case(p, "one-coin", "pull"),
        )
        for world in worlds[:2]:
            yield (
                f"experiment/{policy_id}@{world}",
                lambda p=policy_id, w=world: _experiment_case(p, w),
            )
    for policy_id in ALL_POLICIES:
        for worker_set in ("A", "B"):
            yield (
                f"priced/{policy_id}@{worker_set}",
                lambda p=policy_id, s=worker_set: _priced_case(p, s),
            )
    for policy_id in ("uniform", "opt-kg", "lagrangian-index"):
        yield f"continuous/{policy_id}", lambda p=policy_id: _continuous_case(p)
    for reproduction_id in REPRODUCTIONS:
        yield f"reproduce/{reproduction_id}", lambda r=reproduction_id: _reproduction_case(r)
    for name, argv in CLI_CASES.items():
        yield f"cli/{name}", lambda a=argv: _cli_case(a)
    for policy_id, mode in _live_ids():
        yield f"live/{policy_id}/{mode}", lambda p=policy_id, m=mode: _live_case(p, m)
    for policy_id, mode in STORE_VARIANTS:
        yield (
            f"store/{policy_id}/{mode}",
            lambda p=policy_id, m=mode: _live_case(p, m, events=True),
        )


MISSING = "missing-data"


def compute(name: str, make: Callable[[], Any]) -> str:
    """The digest of one case, or :data:`MISSING` when its data set is not available."""
    try:
        return digest(make())
    except (DataFormatError, FileNotFoundError) as exc:
        print(f"{name}: data not available ({exc})", file=sys.stderr)
        return MISSING


def main(prefixes: list[str]) -> int:
    """Record every case (or those whose name starts with one of ``prefixes``, keeping the
    other recorded hashes)."""
    import time

    hashes: dict[str, str] = {}
    if prefixes and HASHES_PATH.exists():
        hashes = json.loads(HASHES_PATH.read_text())
    for name, make in cases():
        if prefixes and not name.startswith(tuple(prefixes)):
            continue
        start = time.perf_counter()
        hashes[name] = compute(name, make)
        print(f"{time.perf_counter() - start:7.2f}s  {name}", file=sys.stderr)
    HASHES_PATH.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
    # a case recorded anew may differ from what other machines gave for the old code
    others = json.loads(OTHER_MACHINES_PATH.read_text()) if OTHER_MACHINES_PATH.exists() else {}
    kept = {k: v for k, v in others.items() if not (prefixes and k.startswith(tuple(prefixes)))}
    OTHER_MACHINES_PATH.write_text(json.dumps(kept if prefixes else {}, indent=1) + "\n")
    print(f"{len(hashes)} hashes written to {HASHES_PATH}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
