"""The stress bed: seeded synthetic crowds that vary what real crowds vary, plus every
bundled crowd set — where defaults are chosen and every aggregator is measured
(docs/stress-bed.md).

A :class:`StressCell` describes one crowd: the class prior (binary 50/50 … 95/5, skewed
multi-class), 2–10 classes (``ordinal``: grades whose neighbours are confused), labels per
item, the number of workers and how long-tailed their activity is (many workers with 1–3
labels), the share of spammers (uniform answers) and of biased workers (one class always),
the worker model (one-coin, two-coin with sensitivity ≠ specificity, a class-dependent
confusion, ordinal) and item difficulty. :func:`make_crowd` draws the truth and labels of a
cell from a seed: the workers' confusion matrices are a
:class:`~crowdbudget.simulation.workers.WorkerPool` (the simulation worlds' worker model),
each item's workers are drawn without replacement with probability proportional to their
activity (Gumbel top-k), each label from its worker's confusion row for the item's true
class, mixed with the uniform distribution by the item's difficulty; :func:`draw_crowd` gives
the crowd's hidden side alone (truth, worker kinds, confusion matrices).

:data:`DEFAULT_BED` (17 cells of 300–1,000 items: minutes on 2 cores for every registered
aggregator) and :func:`full_bed` (a grid over the axes) are the beds; :func:`run_bed` fits
every method on every cell and bundled set, on all labels and at ``per_item`` labels per
item (:func:`subsample_per_item`), and returns one row per (set, labels per item, method)
with the metrics of :func:`~crowdbudget.experiments.metrics.calibration_metrics`;
:func:`choose_verdict` is the rule that picks the default verdict from those rows
(``crowdbudget stress``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError
from crowdbudget.labels import LabelData
from crowdbudget.simulation.workers import WorkerPool

WORKER_MODELS = ("one-coin", "two-coin", "confusion", "ordinal")


@dataclass(frozen=True)
class StressCell:
    """One synthetic crowd of the bed.

    Attributes:
        name: the cell's id (``binary-88-12-k3``).
        class_prior: probability of each true class, shape (C,), 2 <= C <= 10.
        labels_per_item: labels each item gets (at most ``n_workers``), 1–40.
        n_workers: workers in the crowd, 5–2,000.
        activity_tail: Pareto shape of the workers' activity weights (smaller: a longer
            tail — a few heavy workers, many with 1–3 labels); 0 gives equal activity.
        worker_model: ``one-coin`` (accuracy ρ on the diagonal), ``two-coin`` (binary:
            sensitivity and specificity drawn apart), ``confusion`` (a class-dependent
            confusion: every row its own Dirichlet draw around the diagonal) or ``ordinal``
            (errors fall on neighbouring grades, ``P(l | y) ∝ exp(−|l − y| / s_j)``).
        accuracy: Beta(a, b) of a good worker's accuracy (one-coin / ordinal sharpness).
        spammer_share: share of workers who answer uniformly at random.
        biased_share: share of workers who give one class always (the class drawn per worker).
        hard_share: share of items that are hard: each label on a hard item is uniform with
            probability ``hardness``.
        hardness: see ``hard_share``.
        n_items: items in the crowd.
    """

    name: str
    class_prior: tuple[float, ...]
    labels_per_item: int
    n_workers: int
    activity_tail: float = 1.5
    worker_model: str = "one-coin"
    accuracy: tuple[float, float] = (6.0, 2.0)
    spammer_share: float = 0.0
    biased_share: float = 0.0
    hard_share: float = 0.0
    hardness: float = 0.7
    n_items: int = 500

    def __post_init__(self) -> None:
        prior = np.asarray(self.class_prior, dtype=float)
        if not 2 <= prior.size <= 10 or np.any(prior <= 0) or abs(prior.sum() - 1) > 1e-9:
            raise InvalidParameterError(
                f"stress cell {self.name!r}: class_prior must be 2-10 positive probabilities "
                f"summing to 1, got {self.class_prior}"
            )
        if self.worker_model not in WORKER_MODELS:
            raise InvalidParameterError(
                f"stress cell {self.name!r}: worker_model must be one of "
                f"{', '.join(WORKER_MODELS)}, got {self.worker_model!r}"
            )
        if self.worker_model == "two-coin" and prior.size != 2:
            raise InvalidParameterError(f"stress cell {self.name!r}: two-coin needs 2 classes")
        if not 1 <= self.labels_per_item <= self.n_workers or self.n_items < 1:
            raise InvalidParameterError(
                f"stress cell {self.name!r}: labels_per_item must be in 1..n_workers "
                f"({self.n_workers}) and n_items >= 1"
            )
        shares = (self.spammer_share, self.biased_share, self.hard_share, self.hardness)
        if any(not 0 <= s <= 1 for s in shares) or self.spammer_share + self.biased_share > 1:
            raise InvalidParameterError(
                f"stress cell {self.name!r}: shares must be in [0, 1] and spammers + biased "
                "workers at most 1"
            )

    @property
    def n_classes(self) -> int:
        return len(self.class_prior)


def _good_workers(cell: StressCell, n: int, rng: np.random.Generator) -> np.ndarray:
    """Confusion matrices (n, C, C) of the workers who are neither spammers nor biased."""
    C = cell.n_classes
    a, b = cell.accuracy
    rho = rng.beta(a, b, size=n)
    if cell.worker_model == "one-coin":
        # a one-coin worker is at least at chance: accuracy 1/C + (1 − 1/C) · Beta draw
        return WorkerPool.one_coin(1.0 / C + (1.0 - 1.0 / C) * rho, C).confusion
    if cell.worker_model == "two-coin":
        # sensitivity and specificity from two different Betas: the positive class is harder
        sens = 0.5 + 0.5 * rng.beta(a, b + 2.0, size=n)
        spec = 0.5 + 0.5 * rng.beta(a + 2.0, b, size=n)
        return WorkerPool.two_coin(sens, spec).confusion
    if cell.worker_model == "ordinal":
        grades = np.arange(C)
        distance = np.abs(grades[:, None] - grades[None, :])
        scale = 0.15 + 1.5 * (1.0 - rho)  # a sharper worker has a smaller scale
        logits = -distance[None, :, :] / scale[:, None, None]
        conf = np.exp(logits - logits.max(axis=2, keepdims=True))
        return conf / conf.sum(axis=2, keepdims=True)
    # class-dependent confusion: each row a Dirichlet draw whose diagonal carries weight
    concentration = np.ones((n, C, C)) + np.eye(C)[None] * (2.0 + 8.0 * rho)[:, None, None]
    conf = rng.gamma(concentration)
    return conf / conf.sum(axis=2, keepdims=True)


@dataclass(frozen=True)
class DrawnCrowd:
    """The hidden side of a cell's crowd: what :func:`make_crowd` draws before the labels.

    Attributes:
        truth: the true class of every item, shape (n_items,).
        spammer: which workers answer uniformly at random, shape (n_workers,), bool.
        biased: which workers give one class always, shape (n_workers,), bool (never a
            spammer too).
        pool: every worker's confusion matrix, ``pool.confusion`` of shape
            (n_workers, C, C) (row ``y``: the worker's answer distribution on class ``y``),
            indexed by the worker's number ``j`` of the id ``w{j}``.
    """

    truth: np.ndarray
    spammer: np.ndarray
    biased: np.ndarray
    pool: WorkerPool


def draw_crowd(cell: StressCell, rng: np.random.Generator) -> DrawnCrowd:
    """The truth, the worker kinds and the confusion matrices of ``cell``, in this order the
    first draws from ``rng`` (which advances past them): :func:`make_crowd` draws its labels
    from the same generator after these, so ``draw_crowd(cell, np.random.default_rng(s))``
    is the crowd behind ``make_crowd(cell, s)``."""
    C, n_w = cell.n_classes, cell.n_workers
    truth = rng.choice(C, size=cell.n_items, p=np.asarray(cell.class_prior))
    kind = rng.random(n_w)
    spammer = kind < cell.spammer_share
    biased = (~spammer) & (kind < cell.spammer_share + cell.biased_share)
    confusion = _good_workers(cell, n_w, rng)
    confusion[spammer] = 1.0 / C
    favourite = rng.integers(0, C, size=n_w)
    confusion[biased] = np.eye(C)[favourite[biased]][:, None, :]
    pool = WorkerPool(confusion, name=cell.name)  # checks every row is a distribution
    return DrawnCrowd(truth=truth, spammer=spammer, biased=biased, pool=pool)


def make_crowd(cell: StressCell, seed: int | np.random.SeedSequence = 0) -> LabelData:
    """The truth and labels of ``cell``, drawn from ``seed`` (the same seed, the same crowd).

    Returns a :class:`~crowdbudget.labels.LabelData` with ``gold`` the true class of every
    item, ``n_items * labels_per_item`` labels, one per (item, worker) pair; the workers
    behind it are :func:`draw_crowd`'s."""
    rng = np.random.default_rng(seed)
    C, n_w, n_i, k = cell.n_classes, cell.n_workers, cell.n_items, cell.labels_per_item
    drawn = draw_crowd(cell, rng)
    truth, pool = drawn.truth, drawn.pool
    if cell.activity_tail > 0:
        activity = rng.pareto(cell.activity_tail, size=n_w) + 1.0
    else:
        activity = np.ones(n_w)
    # Gumbel top-k: k distinct workers per item, with probability proportional to activity
    keys = np.log(activity)[None, :] + rng.gumbel(size=(n_i, n_w))
    workers = (
        np.argpartition(-keys, k - 1, axis=1)[:, :k]
        if k < n_w
        else np.tile(np.arange(n_w), (n_i, 1))
    )
    items = np.repeat(np.arange(n_i), k)
    workers = workers.reshape(-1)
    rows = pool.confusion[workers, truth[items]]  # (n_labels, C)
    hard = rng.random(n_i) < cell.hard_share
    mix = np.where(hard[items], cell.hardness, 0.0)[:, None]
    rows = (1.0 - mix) * rows + mix / C
    cumulative = np.cumsum(rows, axis=1)
    draws = rng.random(items.size)[:, None]
    labels = np.minimum((draws > cumulative).sum(axis=1), C - 1)
    used = np.unique(workers)  # workers who never labelled are not in the data
    codes = np.searchsorted(used, workers)
    return LabelData(
        items=items.astype(np.int64),
        workers=codes.astype(np.int64),
        labels=labels.astype(np.int64),
        item_ids=np.array([f"i{i}" for i in range(n_i)], dtype=object),
        worker_ids=np.array([f"w{j}" for j in used], dtype=object),
        classes=tuple(str(c) for c in range(C)),
        gold=truth.astype(np.int64),
        name=cell.name,
    )


def _binary(share: float) -> tuple[float, float]:
    return (1.0 - share, share)


#: The default bed: one cell per axis the unseen crowds vary (docs/stress-bed.md).
DEFAULT_BED: tuple[StressCell, ...] = (
    StressCell("binary-50-50-k3", _binary(0.5), 3, 100),
    StressCell("binary-88-12-k3", _binary(0.12), 3, 176, n_items=1000),
    StressCell("binary-88-12-weak-k3", _binary(0.12), 3, 176, accuracy=(2.5, 2.0), n_items=1000),
    StressCell("binary-95-05-k5", _binary(0.05), 5, 150, n_items=1000),
    StressCell("binary-70-30-two-coin-k3", _binary(0.3), 3, 120, worker_model="two-coin"),
    StressCell("binary-80-20-spam50-k7", _binary(0.2), 7, 100, spammer_share=0.5),
    StressCell("binary-65-35-biased30-k5", _binary(0.35), 5, 80, biased_share=0.3),
    StressCell("binary-50-50-hard30-k5", _binary(0.5), 5, 100, hard_share=0.3),
    StressCell("binary-85-15-k1", _binary(0.15), 1, 200),
    StressCell("binary-60-40-k40", _binary(0.4), 40, 60, n_items=300),
    StressCell("binary-75-25-5workers-k5", _binary(0.25), 5, 5),
    StressCell(
        "binary-90-10-2000workers-k3", _binary(0.1), 3, 2000, activity_tail=0.8, n_items=1000
    ),
    StressCell("class5-skewed-k3", (0.5, 0.2, 0.15, 0.1, 0.05), 3, 100, worker_model="confusion"),
    StressCell("ordinal5-k5", (0.1, 0.2, 0.4, 0.2, 0.1), 5, 100, worker_model="ordinal"),
    StressCell("ordinal4-skewed-k3", (0.55, 0.25, 0.15, 0.05), 3, 150, worker_model="ordinal"),
    StressCell(
        "class10-skewed-k4",
        tuple((np.arange(10, 0, -1) / 55.0).tolist()),
        4,
        120,
        worker_model="confusion",
    ),
    StressCell("class3-spam30-k5", (0.6, 0.3, 0.1), 5, 60, spammer_share=0.3),
)


def full_bed() -> tuple[StressCell, ...]:
    """The full grid: binary balances × labels per item × spammer shares × worker models,
    plus multi-class and ordinal priors × labels per item (docs/stress-bed.md)."""
    cells = []
    for share, k, spam, model in itertools.product(
        (0.5, 0.3, 0.12, 0.05), (1, 3, 5, 10), (0.0, 0.25, 0.5), ("one-coin", "two-coin")
    ):
        cells.append(
            StressCell(
                f"binary-{round(100 * (1 - share))}-{round(100 * share)}-{model}"
                f"-spam{round(100 * spam)}-k{k}",
                _binary(share),
                k,
                150,
                worker_model=model,
                spammer_share=spam,
                hard_share=0.2,
            )
        )
    priors = {
        "class3": (0.6, 0.3, 0.1),
        "class5": (0.5, 0.2, 0.15, 0.1, 0.05),
        "class10": tuple((np.arange(10, 0, -1) / 55.0).tolist()),
    }
    for (label, prior), k, model, biased in itertools.product(
        priors.items(), (2, 3, 5, 10), ("confusion", "ordinal"), (0.0, 0.2)
    ):
        cells.append(
            StressCell(
                f"{label}-{model}-biased{round(100 * biased)}-k{k}",
                prior,
                k,
                150,
                worker_model=model,
                biased_share=biased,
            )
        )
    for n_workers, tail in ((5, 0.0), (40, 1.5), (2000, 0.8)):
        cells.append(
            StressCell(
                f"binary-80-20-{n_workers}workers-k5",
                _binary(0.2),
                5,
                n_workers,
                activity_tail=tail,
                n_items=1000,
            )
        )
    cells.append(StressCell("binary-60-40-k40", _binary(0.4), 40, 60, n_items=300))
    return tuple(cells)


def subsample_per_item(data: LabelData, per_item: int, rng: np.random.Generator) -> LabelData:
    """Keep a uniformly random ``min(per_item, n_i)`` of each item's ``n_i`` labels (one
    random key per label, so O(n_labels log n_labels))."""
    order = np.lexsort((rng.random(data.n_labels), data.items))  # items, random within item
    items_sorted = data.items[order]
    starts = np.searchsorted(items_sorted, items_sorted, side="left")
    rank = np.arange(data.n_labels) - starts
    return data.labels_subset(np.sort(order[rank < per_item]))


def evaluate_method(method: str, data: LabelData) -> dict[str, float] | None:
    """Accuracy, calibration (:func:`~crowdbudget.experiments.metrics.calibration_metrics`
    on the gold items) and fit ``seconds`` of aggregator id ``method`` on ``data``; None when
    the method refuses the data (e.g. a binary-only method on more classes)."""
    from crowdbudget.aggregation.registry import make_aggregator
    from crowdbudget.experiments.metrics import calibration_metrics

    aggregator = make_aggregator(method)
    start = time.perf_counter()
    try:
        aggregator.fit(data)
    except CrowdBudgetError:
        return None
    seconds = time.perf_counter() - start
    if data.gold is None:
        raise InvalidParameterError(f"data set {data.name!r} has no gold labels to score")
    row = calibration_metrics(aggregator.probas_, data.gold, labels=aggregator.labels_)
    row["seconds"] = seconds
    return row


def evaluate_mean(method: str, samples: Sequence[LabelData]) -> dict[str, float] | None:
    """:func:`evaluate_method`'s numbers averaged over ``samples`` (replications of one row);
    None when the method refuses any of them."""
    found = [evaluate_method(method, sample) for sample in samples]
    if any(r is None for r in found):
        return None
    return {str(k): float(v) for k, v in pd.DataFrame(found).mean().items()}


def run_bed(
    cells: Sequence[StressCell],
    sets: Sequence[str],
    methods: Sequence[str],
    *,
    per_item: Sequence[int] = (),
    reps: int = 1,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> pd.DataFrame:
    """Fit every method on every cell and bundled set.

    Each cell is drawn ``reps`` times (replication r from the r-th child of
    ``SeedSequence([seed, cell index])``); each bundled set (``sets``, loaded with
    :func:`~crowdbudget.datasets.load_dataset`) once on all labels. With ``per_item``, each
    crowd is also subsampled to k labels per item (``reps`` draws for a bundled set, one per
    replication for a cell). Metrics are averaged over replications.

    Returns one row per (``set``, ``per_item`` — ``"all"`` or k —, ``method``) with
    ``kind`` (``cell`` / ``bundled``), ``reps`` and the metrics; a method that refuses a
    crowd (binary-only) has no row there."""
    from crowdbudget.datasets import load_dataset

    budgets: list[str | int] = ["all", *[int(k) for k in per_item]]
    crowds: list[tuple[str, str, list[LabelData], np.random.SeedSequence]] = []
    for index, cell in enumerate(cells):
        root = np.random.SeedSequence([seed, index])
        draws = [make_crowd(cell, child) for child in root.spawn(reps)]
        crowds.append(("cell", cell.name, draws, root))
    for index, name in enumerate(sets):
        crowds.append(
            ("bundled", name, [load_dataset(name)], np.random.SeedSequence([seed, 1000 + index]))
        )
    rows = []
    for kind, name, draws, root in crowds:
        for budget in budgets:
            if budget == "all":
                samples = draws
            else:
                streams = [np.random.default_rng(s) for s in root.spawn(reps + 1)[1:]]
                bases = draws if len(draws) == reps else draws * reps
                samples = [
                    subsample_per_item(d, int(budget), r)
                    for d, r in zip(bases, streams, strict=True)
                ]
            for method in methods:
                mean = evaluate_mean(method, samples)
                if mean is None:
                    continue
                rows.append(
                    {
                        "kind": kind,
                        "set": name,
                        "per_item": str(budget),
                        "method": method,
                        "reps": len(samples),
                        **mean,
                    }
                )
            if progress is not None:
                progress(f"{kind} {name} @ {budget} per item: {len(methods)} methods")
    return pd.DataFrame(rows)


def choose_verdict(
    table: pd.DataFrame, margin: float = 0.005, *, candidates: Iterable[str] | None = None
) -> tuple[str, pd.DataFrame]:
    """The default-verdict rule: the method whose *worst* accuracy shortfall to the best
    method of each row (set, labels per item) of ``table`` is smallest — the worst case, not
    the mean. Methods within ``margin`` of the smallest worst shortfall are level, and are
    compared by their second-worst shortfall (again up to ``margin``), then the third, and so
    on (the lexicographic worst case: one row where every method fails does not make them
    all equal); methods level on every row are decided by the lowest mean NLL.

    ``table``: rows with ``set``, ``per_item``, ``method``, ``accuracy``, ``nll`` (as
    :func:`run_bed` returns). The best method of a row is the best among all methods of the
    table; only methods with a row everywhere (binary-only methods drop out on multi-class
    sets) and in ``candidates`` (default: all) can be chosen.

    Returns the chosen id and one row per method: ``rows``, ``worst_shortfall``,
    ``worst_row`` (where it is), ``second_shortfall``, ``mean_shortfall``, ``mean_nll``,
    ``eligible`` (still in the running when the rule stopped), sorted by the rule. Raises
    InvalidParameterError when no method has a row everywhere."""
    key = table["set"].astype(str) + "@" + table["per_item"].astype(str)
    best = table.groupby(key)["accuracy"].transform("max")
    rows = table.assign(key=key, shortfall=best - table["accuracy"])
    n_rows = rows["key"].nunique()
    grouped = rows.groupby("method")
    per_method = grouped.agg(
        rows=("key", "nunique"),
        worst_shortfall=("shortfall", "max"),
        mean_shortfall=("shortfall", "mean"),
        mean_nll=("nll", "mean"),
    )
    worst_at = grouped["shortfall"].idxmax()
    per_method["worst_row"] = pd.Series(
        rows.loc[worst_at.to_numpy(), "key"].to_numpy(), index=worst_at.index
    )
    # every method's shortfalls, worst first: shape (n_rows,) for a method with every row
    ordered = {str(m): np.sort(g["shortfall"].to_numpy())[::-1] for m, g in rows.groupby("method")}
    per_method["second_shortfall"] = [
        float(ordered[str(m)][1]) if ordered[str(m)].size > 1 else 0.0 for m in per_method.index
    ]
    wanted = set(per_method.index if candidates is None else candidates)
    pool = [str(m) for m in per_method.index if per_method.loc[m, "rows"] == n_rows and m in wanted]
    if not pool:
        raise InvalidParameterError(
            "choose_verdict: no candidate method has a row for every (set, labels per item)"
        )
    for level in range(n_rows):
        smallest = min(ordered[m][level] for m in pool)
        pool = [m for m in pool if ordered[m][level] <= smallest + margin + 1e-12]
        if len(pool) == 1:
            break
    per_method["eligible"] = per_method.index.isin(pool)
    chosen = per_method.loc[pool].sort_values(["mean_nll", "worst_shortfall"]).index[0]
    ranking = per_method.sort_values(
        ["eligible", "worst_shortfall", "second_shortfall", "mean_nll"],
        ascending=[False, True, True, True],
    )
    return str(chosen), ranking
