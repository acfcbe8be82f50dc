"""The experiment runner: policies × budgets × replications, with common random numbers.

Every policy faces the same world in replication r (same θ, same answers per item): the world
seed of replication r is the r-th child of ``SeedSequence(seed)``, and the policy's own
generator the r-th child of a sibling stream, so results do not depend on the order, the
process or the number of worker processes. A policy whose decisions do not depend on the total
budget is run once per replication up to the largest budget, and its accuracy is recorded at
each smaller budget on the way (checkpoints); a budget-aware policy (exact DP) is run once per
budget. Where the campaigns run — this process, a process pool, Dask, a pool shared by
concurrent callers — is :mod:`crowdbudget.experiments.executors` (its names are importable
from here too).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special

from crowdbudget._validation import check_budget, check_positive_int
from crowdbudget.engine.blocked import BlockedLabelsVerdict
from crowdbudget.engine.control import ControlLedger, ControlTasks, control_seed, expected_right
from crowdbudget.engine.live import LiveRules
from crowdbudget.engine.loop import CheckpointRecorder, Clock, MetricsHook, drive
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.executors import (
    EXECUTORS,
    FanOutSeat,
    SharedPool,
    dask_scheduler,
    execute,
    fan_out,
    resolve_executor,
)
from crowdbudget.policies.base import AllocationPolicy
from crowdbudget.policies.verdict import AggregatorVerdict, Verdict, make_verdict
from crowdbudget.registry import Spec, VerdictSpec, make_policy, pin_paper_ties, split_verdict
from crowdbudget.simulation.environment import LabelingEnvironment
from crowdbudget.types import CampaignState

__all__ = [
    "ENGINES",
    "EXECUTORS",
    "RUN_COLUMNS",
    "ExperimentResult",
    "FanOutSeat",
    "MetricsHook",
    "SharedPool",
    "dask_scheduler",
    "execute",
    "fan_out",
    "reader_specs",
    "replication_seeds",
    "resolve_executor",
    "run_campaign",
    "run_experiment",
    "sort_runs",
    "summarize",
]

RUN_COLUMNS = ["policy", "budget", "replication", "accuracy", "labels_used", "seconds"]

#: A metric hook (:data:`crowdbudget.engine.loop.MetricsHook`) is called at every checkpoint;
#: its values become extra columns (summarized like accuracy). It must be a module-level
#: function (it is pickled to worker processes).
ENGINES = ("auto", "reference", "fast")


def run_campaign(
    policy: AllocationPolicy,
    env: LabelingEnvironment,
    budgets: Sequence[float],
    *,
    world_seed: int | np.random.SeedSequence | None,
    policy_rng: np.random.Generator,
    mode: str = "push",
    metrics: MetricsHook | None = None,
    verdict: Verdict | None = None,
    readers: Sequence[tuple[str, Verdict]] = (),
    control: ControlTasks | None = None,
    control_items_seed: int | np.random.SeedSequence = 0,
) -> list[dict[str, Any]]:
    """Run one campaign up to ``max(budgets)``, recording accuracy at each budget.

    Args:
        policy: the policy (reset here).
        verdict: where the final labels and their confidence come from
            (:mod:`crowdbudget.policies.verdict`; reset here, after the policy, from the same
            generator — it draws nothing from it); None: ``make_verdict()``, the policy's own
            model (``posterior``).
        env: the world (reset here with ``world_seed``).
        budgets: checkpoints, ascending; the campaign's budget is the largest.
        mode: ``"push"`` (the policy picks) or ``"pull"`` (a worker arrives first).
        metrics: optional hook adding metrics at each checkpoint (:data:`MetricsHook`).
        readers: more verdicts reading the same campaign, ``(label, verdict)`` each (reset
            here like ``verdict``, each from a copy of the policy's generator as it stands
            after the policy's reset — so each reads exactly what a campaign with that verdict
            alone would give): their rows follow the verdict's, with ``"policy": label``.
        control: control tasks (:mod:`crowdbudget.engine.control`; None: none): the control
            items are ``control.choose(evaluated items, control_items_seed)``, served and
            paid under the live rules (:func:`~crowdbudget.engine.loop.drive` with
            :class:`~crowdbudget.engine.live.LiveRules`), and left out of ``accuracy`` and
            the calibration columns; rows gain ``control_labels`` (control answers so far)
            and ``blocked_workers``; with ``blocked_labels="drop"`` every verdict reads the
            campaign without the blocked workers' labels (:func:`_blocked_labels`).

    Returns:
        One dict per budget: ``budget``, ``accuracy`` (fraction of the evaluated items —
        ``env.evaluation_mask``, all by default — whose final label is the true one),
        ``labels_used`` (budget actually spent — less when the policy stops early),
        ``seconds`` (time spent so far) and the hook's metrics. When the policy stops
        early (``select`` returns None) or the world runs out of labels, every remaining
        checkpoint records the final state.
    """
    clock = Clock(mode)
    if (
        mode == "pull"
        and getattr(env, "pairs", None) is not None
        and not (policy.chooses_workers or policy.replay_pull)
    ):
        raise InvalidParameterError(
            f"{type(policy).__name__} cannot restrict itself to the arriving worker's recorded "
            "labels, so it cannot replay in pull mode; use push mode (an item-only policy then "
            "gets a random unused worker's label of its item, Chen et al. §7.2)"
        )
    checkpoints = sorted(float(b) for b in budgets)
    env.check_budget(checkpoints[-1])
    env.reset(seed=world_seed)
    problem = env.problem(checkpoints[-1])
    state = CampaignState.initial(problem)
    state.pairs = env.pairs
    verdict = verdict if verdict is not None else make_verdict()
    if env.eligible is not None:
        state.eligible &= env.eligible
    evaluated = (
        np.ones(problem.n_items, dtype=bool)
        if env.evaluation_mask is None
        else np.asarray(env.evaluation_mask, dtype=bool)
    )
    live, ledger = None, None
    if control is not None:
        control_items = control.choose(evaluated, control_items_seed)
        evaluated = ControlTasks.evaluation_mask(evaluated, control_items)
        ledger = ControlLedger.start(
            control,
            control_items,
            env.true_labels,
            problem.n_workers,
            budget=problem.budget,
            price=problem.default_price,
        )
        verdict, readers = _blocked_labels(verdict, readers, ledger)
        prices = problem.worker_prices
        live = LiveRules(
            worker_prices={} if prices is None else dict(enumerate(map(float, prices))),
            default_price=problem.default_price,
            control=ledger,
        )
    recorder = CheckpointRecorder(
        policy, checkpoints, env.true_labels, evaluated, metrics, verdict, readers
    )
    policy.reset(problem, policy_rng)
    # each reader from the generator as the verdict gets it (a verdict only spawns a child
    # seed from it, which moves the seed sequence's spawn counter: hence the copies)
    for _, reader in readers:
        reader.reset(problem, copy.deepcopy(policy_rng))
    verdict.reset(problem, policy_rng)
    if control is not None:
        _verdicts_read_control(
            [verdict, *(reader for _, reader in readers)],
            control_items,
            env.true_labels,
            calibrate=control.calibrate,
        )
    if ledger is None:
        _drive(policy, env, state, clock, recorder)
        return recorder.rows + recorder.reader_rows
    if ledger.tasks.agreement:
        ledger.agreement_source = _agreement_source(verdict, policy, state, ledger)
    counted = _ControlColumns(recorder, ledger)
    drive(policy, env, state, clock, counted, live=live)
    return recorder.rows + recorder.reader_rows


def _drive(
    policy: AllocationPolicy,
    env: LabelingEnvironment,
    state: CampaignState,
    clock: Clock,
    recorder: CheckpointRecorder,
) -> None:
    """:func:`~crowdbudget.engine.loop.drive`, or its compiled runs on a push-mode replay of a
    policy that offers them (:mod:`crowdbudget.engine.replay_push`: the same campaign)."""
    if getattr(policy, "compiled_replay", False):
        # imported here: the worker-aware kernels' modules only where they run
        from crowdbudget.engine import replay_push

        if replay_push.supports(policy, env, clock, recorder):
            replay_push.drive_replay_push(policy, env, state, recorder)
            return
    drive(policy, env, state, clock, recorder)


def _agreement_source(
    verdict: Verdict, policy: AllocationPolicy, state: CampaignState, ledger: ControlLedger
) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """The ledger's agreement evidence (``ControlTasks.agreement``): the campaign's verdict
    on the state as it is, soft-counted over each worker's labels of the non-control items
    (:func:`~crowdbudget.engine.control.expected_right`)."""

    def source() -> tuple[np.ndarray, np.ndarray]:
        probabilities = verdict.probabilities(state, policy)
        log = state.label_log
        other = ~np.isin(log.items, ledger.items)
        return expected_right(
            probabilities,
            log.items[other],
            log.labels[other],
            log.workers[other],
            ledger.n_workers or 0,
        )

    return source


def _blocked_labels(
    verdict: Verdict, readers: Sequence[tuple[str, Verdict]], ledger: ControlLedger
) -> tuple[Verdict, Sequence[tuple[str, Verdict]]]:
    """The verdict and readers of a campaign with control tasks: as they are when the
    blocked workers' labels are kept, each reading without them when the requester drops
    them (``ControlTasks.blocked_labels``; :mod:`crowdbudget.engine.blocked`)."""
    if ledger.tasks.blocked_labels == "keep":
        return verdict, readers
    return BlockedLabelsVerdict(verdict, ledger), [
        (label, BlockedLabelsVerdict(reader, ledger)) for label, reader in readers
    ]


def _verdicts_read_control(
    verdicts: Sequence[Verdict],
    control_items: np.ndarray,
    truth: np.ndarray,
    *,
    calibrate: str | None,
) -> None:
    """Every aggregator verdict of ``verdicts`` reads the control items (bool, (n_items,)) as
    labels of known truth ``truth`` (n_items,) and, with ``calibrate`` (a method), is
    calibrated on them (:meth:`~crowdbudget.policies.verdict.AggregatorVerdict.read_control`).
    The scores
    stay on the other evaluated items. The policy's own model (``posterior``) reads them
    through the policy (its ``observe_known``)."""
    known = {int(i): int(truth[i]) for i in np.flatnonzero(control_items)}
    for reading in verdicts:
        # a verdict reading without the blocked workers' labels reads the control items too
        verdict = reading.inner if isinstance(reading, BlockedLabelsVerdict) else reading
        if isinstance(verdict, AggregatorVerdict):
            verdict.read_control(known, calibrate=calibrate)


@dataclass
class _ControlColumns:
    """A recorder adding the control columns (``control_labels``, ``blocked_workers``) to
    every row ``inner`` records, as they stand when the row is recorded."""

    inner: CheckpointRecorder
    ledger: ControlLedger
    _rows: int = 0
    _reader_rows: int = 0

    def _tag(self) -> None:
        columns = {
            "control_labels": float(self.ledger.control_labels),
            "blocked_workers": float(len(self.ledger.blocked)),
        }
        for row in self.inner.rows[self._rows :]:
            row.update(columns)
        for row in self.inner.reader_rows[self._reader_rows :]:
            row.update(columns)
        self._rows, self._reader_rows = len(self.inner.rows), len(self.inner.reader_rows)

    def before_decision(self, state: CampaignState) -> bool:
        ended = self.inner.before_decision(state)
        self._tag()
        return ended

    def finish(self, state: CampaignState) -> None:
        self.inner.finish(state)
        self._tag()


def _task(
    entry: tuple[Spec, VerdictSpec, str, tuple[tuple[str, VerdictSpec], ...]],
    env: LabelingEnvironment,
    budgets: list[float],
    replication: int,
    world_seed: np.random.SeedSequence,
    policy_seed: np.random.SeedSequence,
    mode: str,
    engine: str = "auto",
    metrics: MetricsHook | None = None,
    control: ControlTasks | None = None,
    control_items_seed: np.random.SeedSequence | None = None,
) -> list[dict[str, Any]]:
    policy_spec, verdict_spec, label, reader_specs = entry
    policy = make_policy(policy_spec)
    verdict = verdict_spec.build()
    fast = (
        metrics is None
        and control is None
        and verdict_spec.is_posterior
        and not reader_specs
        and _use_fast_engine(policy, env, mode, engine)
    )
    runs = [budgets] if not policy.budget_aware else [[b] for b in budgets]
    rows: list[dict[str, Any]] = []
    for run_budgets in runs:
        rng = np.random.default_rng(policy_seed)
        if fast:
            from crowdbudget.engine.fast import COMPILED_ENGINE  # imports Numba

            campaign = COMPILED_ENGINE.run(
                policy,
                env,
                run_budgets,
                world_seed=world_seed,
                policy_rng=rng,
                sync_policy=False,
                verdict=verdict,
            )
        else:
            campaign = run_campaign(
                policy,
                env,
                run_budgets,
                world_seed=world_seed,
                policy_rng=rng,
                mode=mode,
                metrics=metrics,
                verdict=verdict,
                readers=[(name, spec.build()) for name, spec in reader_specs],
                control=control,
                control_items_seed=0 if control_items_seed is None else control_items_seed,
            )
        for row in campaign:
            # a reader's row names its own label ("policy"), after the default
            rows.append({"policy": label, "replication": replication, **row})
    return rows


def _use_fast_engine(
    policy: AllocationPolicy, env: LabelingEnvironment, mode: str, engine: str
) -> bool:
    """Whether to run ``policy`` with the compiled engine (``engine.fast``): same runs,
    faster; ``"fast"`` insists on it."""
    if engine not in ENGINES:
        raise InvalidParameterError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "reference":
        return False
    from crowdbudget.engine.fast import COMPILED_ENGINE  # imports Numba

    supported = COMPILED_ENGINE.supports(policy, env, mode)
    if engine == "fast" and not supported:
        raise InvalidParameterError(
            f"engine='fast' does not support {policy!r} on {type(env).__name__} in {mode} mode "
            "(it needs push mode, an index policy with tie_break='first' or uniform, a "
            "synthetic world without workers and one prior and threshold for all items; or "
            "lagrangian-index on such a world, push or pull)"
        )
    return supported


def replication_seeds(
    seed: int, n_reps: int
) -> tuple[list[np.random.SeedSequence], list[np.random.SeedSequence]]:
    """Common random numbers: replication r's world seed is the r-th child of the first child
    of ``SeedSequence(seed)`` (the same world for every policy and budget), its policy seed
    the r-th child of the second."""
    world_root, policy_root = np.random.SeedSequence(seed).spawn(2)
    return world_root.spawn(n_reps), policy_root.spawn(n_reps)


def sort_runs(runs: pd.DataFrame, policies: Sequence[str]) -> pd.DataFrame:
    """``runs`` in the order of ``policies``, then by budget and replication."""
    order = {pid: k for k, pid in enumerate(policies)}
    return runs.sort_values(
        ["policy", "budget", "replication"], key=lambda s: s.map(order) if s.name == "policy" else s
    ).reset_index(drop=True)


@dataclass
class ExperimentResult:
    """Tidy per-run rows and their summary per (policy, budget)."""

    runs: pd.DataFrame
    summary: pd.DataFrame


def run_experiment(
    policies: Sequence[str],
    env: LabelingEnvironment,
    budgets: Sequence[float],
    n_reps: int,
    *,
    seed: int = 0,
    n_jobs: int | None = None,
    progress: bool = True,
    mode: str = "push",
    engine: str = "auto",
    metrics: MetricsHook | None = None,
    verdict: str | None = None,
    executor: str | None = None,
    ties: str = "default",
    verdicts: Sequence[str] = (),
    control: ControlTasks | None = None,
) -> ExperimentResult:
    """Run every policy id on ``n_reps`` worlds of ``env`` at every budget.

    Args:
        policies: policy ids (``"opt-kg"``, ``"cvar-kg:alpha=0.3"``, ...), validated up front;
            an id may name its verdict (``"opt-kg:verdict=ds"``); rows are labelled with the
            id as given.
        executor: ``"serial"``, ``"processes"`` or ``"dask"`` (:func:`execute`); None: Dask
            inside :func:`dask_scheduler`, else processes when ``n_jobs`` > 1.
        verdict: the verdict of every id that names none (``"posterior"``, the default: each
            policy's own model; or an aggregator id, :mod:`crowdbudget.policies.verdict`).
        env: the world (pickled to worker processes; reset per replication).
        budgets: absolute budgets.
        n_reps: replications (worlds).
        seed: root seed; replication r uses its r-th child, for every policy.
        n_jobs: processes (None: all CPU cores; 1: in this process).
        progress: show a progress bar on stderr (appears after 2 s).
        engine: ``"auto"`` runs the campaigns the compiled engine supports
            (:func:`~crowdbudget.engine.fast.supports_fast_path`) with it and the others with
            :func:`run_campaign` — the results are identical; ``"reference"`` always uses
            :func:`run_campaign`; ``"fast"`` requires the compiled engine for every policy
            (InvalidParameterError otherwise). Campaigns with an aggregator verdict run on
            the reference engine.
        metrics: optional module-level hook adding metrics per checkpoint
            (:data:`MetricsHook`); campaigns then run on the reference engine.
        ties: ``"default"`` (each policy's own rule among tied items: random for the
            item-selecting policies, bar deterministic ``kg``) or ``"paper"``:
            the papers' rule (``tie-break=first``) for every id that names none
            (:func:`~crowdbudget.registry.pin_paper_ties`; rows keep the ids as given) —
            what the faithful reproductions use.
        verdicts: more verdicts reading every campaign (``posterior``, ``paper`` or aggregator
            ids): each campaign is run once and read at every checkpoint by its own verdict
            and by each of these, one row each, labelled ``<policy id>:verdict=<v>`` (the id
            without its own verdict) — the rows a run of that id would give (same allocation:
            a verdict draws nothing from the policy's generator), at the cost of one
            allocation. A reading that is the id's own verdict, or whose label is one of
            ``policies``, is not repeated. Such campaigns run on the reference engine.
            Likewise ids of ``policies`` that differ only in their verdict share one
            campaign per replication (:func:`_share_allocations`; not with
            ``engine="fast"``): the same rows, one allocation.
        control: control tasks (:mod:`crowdbudget.engine.control`; None: none): one subset
            of the evaluated items, drawn from ``seed`` (:func:`~crowdbudget.engine.control.
            control_seed`), is the control items of every campaign (:func:`run_campaign`);
            such campaigns run on the reference engine (``engine="fast"`` is refused).

    Returns:
        :class:`ExperimentResult` with ``runs`` (columns ``RUN_COLUMNS``) and ``summary``.
    """
    policies = list(policies)
    specs, readings = _checked_specs(policies, env, mode, engine, verdict, verdicts, ties, control)
    budgets = sorted({check_budget(b) for b in budgets})
    env.check_budget(budgets[-1])  # e.g. a replay cannot spend more labels than recorded
    n_reps = check_positive_int(n_reps, "reps")
    # each id's row, then its readings'
    order = [label for pid in policies for label in (str(pid), *(r for r, _ in readings[str(pid)]))]
    running = policies if engine == "fast" else _share_allocations(policies, specs)
    tasks = _replication_tasks(
        [specs[pid] for pid in running], env, budgets, n_reps, seed, mode, engine, metrics, control
    )
    rows = execute(
        _task,
        tasks,
        _labels_to_buy(tasks, budgets),
        n_jobs=n_jobs,
        executor=executor,
        progress=progress,
    )
    extra_columns = list(dict.fromkeys(k for row in rows for k in row if k not in RUN_COLUMNS))
    runs = sort_runs(pd.DataFrame(rows, columns=RUN_COLUMNS + extra_columns), order)
    return ExperimentResult(runs=runs, summary=summarize(runs, order))


#: what :func:`run_experiment` hands a replication's campaign of one id: the policy's spec,
#: its verdict's, the row label and the further readings (label, verdict)
_Entry = tuple[Spec, VerdictSpec, str, tuple[tuple[str, VerdictSpec], ...]]


def _checked_specs(
    policies: list[str],
    env: LabelingEnvironment,
    mode: str,
    engine: str,
    verdict: str | None,
    verdicts: Sequence[str],
    ties: str,
    control: ControlTasks | None,
) -> tuple[dict[str, _Entry], dict[str, tuple[tuple[str, VerdictSpec], ...]]]:
    """The parsed entries of :func:`run_experiment`'s ``policies`` (keyed by id, with
    ``ties="paper"`` pinned) and each id's further readings (:func:`reader_specs`), checked
    before any work: unknown ids, an unknown ``ties``, and what ``engine`` cannot run raise
    InvalidParameterError."""
    if not policies:
        raise InvalidParameterError("at least one policy is needed")
    # parsed and checked once here; the specs (not the strings) go to the worker processes:
    # (the policy's spec, its verdict's, the row label)
    readings = reader_specs(policies, verdict, verdicts)
    specs = {pid: (*split_verdict(pid, verdict), str(pid), readings[str(pid)]) for pid in policies}
    if ties == "paper":
        specs = {pid: (pin_paper_ties(p), v, label, r) for pid, (p, v, label, r) in specs.items()}
    elif ties != "default":
        raise InvalidParameterError(f"ties must be 'default' or 'paper', got {ties!r}")
    for policy_spec, verdict_spec, _, _ in specs.values():
        # fail fast on unknown ids and unsupported engines, before any work
        if verdict_spec.is_posterior or engine == "fast":
            _use_fast_engine(make_policy(policy_spec), env, mode, engine)
        if not verdict_spec.is_posterior and engine == "fast":
            raise InvalidParameterError(
                f"engine='fast' gives the policy's own verdict only; {policy_spec.id!r} has the "
                f"verdict {verdict_spec.name!r}"
            )
    if control is not None and engine == "fast":
        raise InvalidParameterError("engine='fast' does not run control tasks; use 'auto'")
    return specs, readings


def _replication_tasks(
    entries: list[_Entry],
    env: LabelingEnvironment,
    budgets: list[float],
    n_reps: int,
    seed: int,
    mode: str,
    engine: str,
    metrics: MetricsHook | None,
    control: ControlTasks | None,
) -> list[tuple[Any, ...]]:
    """The arguments of :func:`_task` for every replication and every one of ``entries``
    (the campaigns :func:`run_experiment` runs), replication r with the r-th seeds of
    :func:`replication_seeds` and every campaign with the control items' seed of ``seed``."""
    world_seeds, policy_seeds = replication_seeds(seed, n_reps)
    # replications outside, policies inside: every chunk of tasks then holds a mix of cheap
    # and expensive policies, so chunks take about the same time and the progress bar's
    # estimate is honest (policy by policy, the slow policies' chunks all came last: the bar
    # said seconds left at 80% and took minutes). Rows are sorted afterwards: same results.
    control_items_seed = None if control is None else control_seed(seed)
    return [
        (
            entry,
            env,
            budgets,
            r,
            world_seeds[r],
            policy_seeds[r],
            mode,
            engine,
            metrics,
            control,
            control_items_seed,
        )
        for r in range(n_reps)
        for entry in entries
    ]


def _labels_to_buy(tasks: Sequence[tuple[Any, ...]], budgets: Sequence[float]) -> list[float]:
    """The progress weight of each of :func:`run_experiment`'s ``tasks``: the labels it buys.

    The bar counts labels to buy, not campaigns: a budget-aware policy runs one campaign per
    budget (the sum of the budgets), the others one up to the largest budget, so a bar over
    campaigns under-counts the slow ones and its time estimate comes out short."""
    return [
        float(sum(budgets)) if task[0][0].capabilities.budget_aware else float(budgets[-1])
        for task in tasks
    ]


def _share_allocations(
    policies: Sequence[str],
    specs: dict[str, tuple[Spec, VerdictSpec, str, tuple[tuple[str, VerdictSpec], ...]]],
) -> list[str]:
    """The ids whose campaigns :func:`run_experiment` runs: of several ids that differ only in
    their verdict (``bbta:n-explore=1`` and ``bbta:n-explore=1:verdict=one-coin-em``), the
    first runs the campaign and the others become its readings (``specs`` is updated: their
    label and verdict, then their own readings, join the first's). The rows are those of
    separate runs — the policy's generator and the world's are the same for every id of a
    replication, and a verdict draws nothing from the policy's generator (its tie seed is a
    side-effect-free child, :func:`~crowdbudget.policies.verdict.verdict_seed`); checked in
    ``tests/test_verdict.py`` — at the cost of one allocation."""
    first_of: dict[tuple[str, tuple[tuple[str, str], ...], str], str] = {}
    running: list[str] = []
    for pid in policies:
        policy_spec, verdict_spec, label, readings = specs[pid]
        first = first_of.setdefault((policy_spec.id, policy_spec.params, policy_spec.kind), pid)
        if first == pid:
            running.append(pid)
            continue
        spec, verdict_of_first, first_label, first_readings = specs[first]
        shared = (*first_readings, (label, verdict_spec), *readings)
        specs[first] = (spec, verdict_of_first, first_label, shared)
    return running


def reader_specs(
    policies: Sequence[str], verdict: str | None, verdicts: Sequence[str]
) -> dict[str, tuple[tuple[str, VerdictSpec], ...]]:
    """Per policy id, the extra readings of its campaigns (:func:`run_experiment`'s
    ``verdicts``): ``(label, VerdictSpec)`` with label ``<id without its verdict>:verdict=<v>``,
    leaving out the id's own verdict and labels that are ids of ``policies``. An unknown
    verdict fails here, naming the allowed ones."""
    wanted = [VerdictSpec(str(v)) for v in dict.fromkeys(verdicts)]
    for spec in wanted:
        spec.build()  # an unknown aggregator fails here, with the allowed ones
    taken = {str(pid) for pid in policies}
    out: dict[str, tuple[tuple[str, VerdictSpec], ...]] = {}
    for pid in policies:
        policy_spec, own = split_verdict(pid, verdict)
        readings = []
        for spec in wanted:
            label = f"{policy_spec}:verdict={spec.name}"
            if spec == own or label in taken:
                continue
            taken.add(label)
            readings.append((label, spec))
        out[str(pid)] = tuple(readings)
    return out


def summarize(runs: pd.DataFrame, policy_order: Sequence[str] | None = None) -> pd.DataFrame:
    """Mean, std and 95% t-interval of every metric per (policy, budget).

    Columns: ``policy, budget, reps`` and, for each metric m, ``m_mean, m_std, m_ci_low,
    m_ci_high``.
    """
    metrics = [c for c in runs.columns if c not in ("policy", "budget", "replication")]
    grouped = runs.groupby(["policy", "budget"], sort=False)
    out = grouped.size().rename("reps").reset_index()
    for metric in metrics:
        mean = grouped[metric].mean().to_numpy()
        std = grouped[metric].std(ddof=1).fillna(0.0).to_numpy()
        n = out["reps"].to_numpy()
        half = np.where(n > 1, special.stdtrit(np.maximum(n - 1, 1), 0.975) * std / np.sqrt(n), 0.0)
        out[f"{metric}_mean"] = mean
        out[f"{metric}_std"] = std
        out[f"{metric}_ci_low"] = mean - half
        out[f"{metric}_ci_high"] = mean + half
    if policy_order is not None:
        rank = {pid: k for k, pid in enumerate(policy_order)}
        out = out.sort_values(
            ["policy", "budget"], key=lambda s: s.map(rank) if s.name == "policy" else s
        )
    return out.reset_index(drop=True)
