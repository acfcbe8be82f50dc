"""Crowd label tables: reading, integer coding, the bundled and external data sets.

Arrays inside, ids at the edge (DESIGN §7): a :class:`LabelData` holds one row per collected
label as three integer arrays (``items``, ``workers``, ``labels``) plus the string ids they
code, so aggregators and the replay environment never loop over Python objects per row.

File formats (crowd-kit's columns):

- labels CSV: ``task,worker,label`` — one row per collected label, ids and labels as strings;
- gold CSV: ``task,label`` — the true label of some tasks (same label coding).

Classes are the sorted union of the labels seen in both files; labels that all read as
integers sort numerically (``"2" < "10"``), others as text. For two classes, class 1 is the
"positive" class of the Beta–Bernoulli model (for RTE, label ``1``).

Bundled data sets (offline, in the package; checksums in :data:`BUNDLED_SHA256`): ``rte``,
``temp``, ``wsd`` (Snow et al. 2008). The large sets (``millionaire``, ``fact_eval``, ``trec``,
``adult``) are read from a directory: ``data_dir=`` or the ``CROWDBUDGET_DATA_DIR``
environment variable, else ``../shared/data`` next to the working directory or this checkout.

Example:
    >>> data = load_dataset("rte")
    >>> data.n_items, data.n_workers, data.n_labels, data.n_classes
    (800, 164, 8000, 2)
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from crowdbudget.exceptions import DataFormatError

IntArray = npt.NDArray[np.int64]

BUNDLED = ("rte", "temp", "wsd")
EXTERNAL = ("millionaire", "fact_eval", "trec", "adult")

#: SHA-256 of the bundled files; identical to the copies in ``shared/data`` (tested).
BUNDLED_SHA256: dict[str, str] = {
    "rte/contexts.csv": "440de342e17d77db9ea599b7844142ede360e705a86c48b2d373295cfab5f056",
    "rte/gold.csv": "126ba27478041321acf2c0c3d8d2032defff1f534c2496a743dedf4a7e8d265b",
    "rte/labels.csv": "cd42608dc19502388f649e724f42df57d9da3866686cbc01b5f53f10420bfb46",
    "temp/gold.csv": "ef2c13b0695229a84f6fd27a50e00e045f3fc0161dfbe823223a341db68c9e3b",
    "temp/labels.csv": "95f73d389ab19796a2f40314b31b980cd92bfec3d7199ed6811145a9d6c049c4",
    "wsd/gold.csv": "5472096b02cdc016ff344b320eb01a5491fdd17253817964c6ef94d4f86245c1",
    "wsd/labels.csv": "a3619c30aec3bc5e4d293c63e47d2eb24bb34a3ef36abcb0b5bfc5f15f86dbcd",
}

_DESCRIPTIONS = {
    "rte": "recognizing textual entailment, Snow et al. 2008 (binary, 10 labels per task)",
    "temp": "temporal ordering of events, Snow et al. 2008 (binary, 10 labels per task)",
    "wsd": "word sense disambiguation, Snow et al. 2008 (3 classes, 10 labels per task)",
    "millionaire": "'Who wants to be a millionaire' answers, Aydin et al. (Requallo 'Game')",
    "fact_eval": "CrowdScale 2013 Google fact evaluation (3 classes, gold for 576 tasks)",
    "trec": "TREC relevance judgments used by Zhang et al. 2014 (binary)",
    "adult": "adult-content rating, Ipeirotis et al. 2010 (4 classes)",
}


@dataclass(frozen=True, eq=False)
class LabelData:
    """Collected crowd labels, integer-coded.

    Attributes:
        items, workers, labels: one entry per collected label, shape (n_labels,), int64;
            ``items`` index ``item_ids``, ``workers`` index ``worker_ids``, ``labels`` index
            ``classes``.
        item_ids: string id of each item, shape (n_items,).
        worker_ids: string id of each worker, shape (n_workers,).
        classes: string label of each class, in class order.
        gold: true class per item, shape (n_items,), ``-1`` where unknown; None: no gold.
        contexts: per item, the tuple of its context names (task types), or None.
        name: a display name.
    """

    items: IntArray
    workers: IntArray
    labels: IntArray
    item_ids: npt.NDArray[np.object_]
    worker_ids: npt.NDArray[np.object_]
    classes: tuple[str, ...]
    gold: IntArray | None = None
    contexts: tuple[tuple[str, ...], ...] | None = None
    name: str = "labels"
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return int(self.item_ids.shape[0])

    @property
    def n_workers(self) -> int:
        return int(self.worker_ids.shape[0])

    @property
    def n_labels(self) -> int:
        return int(self.items.shape[0])

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    @property
    def gold_mask(self) -> npt.NDArray[np.bool_]:
        """Items with a known true label, shape (n_items,)."""
        if self.gold is None:
            return np.zeros(self.n_items, dtype=bool)
        return self.gold >= 0

    def label_counts(self) -> IntArray:
        """Votes per item and class, shape (n_items, n_classes) (one bincount, no loop)."""
        flat = self.items * self.n_classes + self.labels
        counts = np.bincount(flat, minlength=self.n_items * self.n_classes)
        return counts.reshape(self.n_items, self.n_classes).astype(np.int64)

    def to_frame(self) -> pd.DataFrame:
        """crowd-kit's long table: columns ``task, worker, label`` with the string ids."""
        return pd.DataFrame(
            {
                "task": self.item_ids[self.items],
                "worker": self.worker_ids[self.workers],
                "label": np.asarray(self.classes, dtype=object)[self.labels],
            }
        )

    def gold_series(self) -> pd.Series:
        """Gold labels as a ``task``-indexed Series of class strings (known items only)."""
        mask = self.gold_mask
        assert self.gold is not None or not mask.any()
        gold = self.gold if self.gold is not None else np.zeros(0, dtype=np.int64)
        values = np.asarray(self.classes, dtype=object)[gold[mask]]
        return pd.Series(values, index=pd.Index(self.item_ids[mask], name="task"), name="label")

    def accuracy(self, predicted: npt.ArrayLike) -> float:
        """Accuracy of integer class predictions (n_items,) over the items with gold."""
        pred = np.asarray(predicted)
        mask = self.gold_mask
        if not mask.any():
            raise DataFormatError(f"data set {self.name!r} has no gold labels")
        assert self.gold is not None
        return float(np.mean(pred[mask] == self.gold[mask]))


def _class_order(values: list[str]) -> tuple[str, ...]:
    unique = sorted(set(values))
    try:
        return tuple(sorted(unique, key=lambda v: (int(v), v)))
    except ValueError:
        return tuple(unique)


def _read_csv(source: Any, required: tuple[str, ...], what: str) -> pd.DataFrame:
    try:
        frame = pd.read_csv(source, dtype=str, keep_default_na=False, skipinitialspace=True)
    except FileNotFoundError:
        raise DataFormatError(f"{what} file {source} does not exist") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataFormatError(f"{what} file {source} is not a readable CSV: {first}") from None
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataFormatError(
            f"{what} file {source} lacks column(s) {', '.join(missing)}; "
            f"expected columns {','.join(required)} (found {','.join(frame.columns)})"
        )
    for column in required:
        blank = frame[column].str.strip() == ""
        if blank.any():
            row = int(np.flatnonzero(blank.to_numpy())[0]) + 2  # 1-based, after the header
            raise DataFormatError(f"{what} file {source}: empty {column!r} on line {row}")
        frame[column] = frame[column].str.strip()
    return frame


def from_frame(
    labels: pd.DataFrame,
    gold: pd.DataFrame | pd.Series | None = None,
    *,
    classes: tuple[str, ...] | None = None,
    contexts: pd.DataFrame | None = None,
    name: str = "labels",
) -> LabelData:
    """Integer-code a crowd-kit table (``task, worker, label``) and optional gold.

    ``gold`` is a DataFrame with ``task, label`` (or a ``task``-indexed Series). Items are
    the tasks with labels, then gold-only tasks are ignored (nothing to aggregate), in order
    of first appearance. ``classes`` fixes the class set and order (labels outside it are an
    error); by default it is the sorted union of observed labels and gold labels.
    """
    for column in ("task", "worker", "label"):
        if column not in labels.columns:
            raise DataFormatError(
                f"labels table lacks column {column!r}; needs task, worker, label"
            )
    task = labels["task"].astype(str).to_numpy()
    worker = labels["worker"].astype(str).to_numpy()
    label = labels["label"].astype(str).to_numpy()
    if task.shape[0] == 0:
        raise DataFormatError(f"labels table {name!r} has no rows")
    if isinstance(gold, pd.Series):
        gold = pd.DataFrame({"task": gold.index.astype(str), "label": gold.astype(str).values})
    gold_task = gold["task"].astype(str).to_numpy() if gold is not None else np.zeros(0, str)
    gold_label = gold["label"].astype(str).to_numpy() if gold is not None else np.zeros(0, str)
    if classes is None:
        classes = _class_order(list(pd.unique(label)) + list(pd.unique(gold_label)))
    else:
        classes = tuple(str(c) for c in classes)
    class_index = pd.Index(classes)
    items, item_ids = pd.factorize(task)
    workers, worker_ids = pd.factorize(worker)
    codes = class_index.get_indexer(pd.Index(label))
    if (codes < 0).any():
        bad = label[int(np.flatnonzero(codes < 0)[0])]
        raise DataFormatError(f"label {bad!r} is not a class; classes: {', '.join(classes)}")
    gold_codes: IntArray | None = None
    if gold is not None:
        if pd.Index(gold_task).has_duplicates:
            dup = pd.Index(gold_task)[pd.Index(gold_task).duplicated()][0]
            raise DataFormatError(f"gold labels list task {dup!r} more than once")
        g = class_index.get_indexer(pd.Index(gold_label))
        if (g < 0).any():
            bad = gold_label[int(np.flatnonzero(g < 0)[0])]
            raise DataFormatError(
                f"gold label {bad!r} is not a class; classes: {', '.join(classes)}"
            )
        gold_codes = np.full(len(item_ids), -1, dtype=np.int64)
        position = pd.Index(item_ids).get_indexer(pd.Index(gold_task))
        known = position >= 0
        gold_codes[position[known]] = g[known]
    context_tuples = None
    if contexts is not None:
        grouped = contexts.astype(str).groupby("task")["context"].apply(tuple)
        context_tuples = tuple(grouped.get(t, ()) for t in item_ids)
    return LabelData(
        items=np.asarray(items, dtype=np.int64),
        workers=np.asarray(workers, dtype=np.int64),
        labels=np.asarray(codes, dtype=np.int64),
        item_ids=np.asarray(item_ids, dtype=object),
        worker_ids=np.asarray(worker_ids, dtype=object),
        classes=classes,
        gold=gold_codes,
        contexts=context_tuples,
        name=name,
    )


def read_labels_csv(
    labels: str | os.PathLike[str],
    gold: str | os.PathLike[str] | None = None,
    *,
    classes: tuple[str, ...] | None = None,
    contexts: str | os.PathLike[str] | None = None,
    name: str | None = None,
) -> LabelData:
    """Read a labels CSV (``task,worker,label``) and optional gold CSV (``task,label``).

    Raises :class:`DataFormatError` with one line naming the file, line or column at fault.
    """
    frame = _read_csv(labels, ("task", "worker", "label"), "labels")
    gold_frame = _read_csv(gold, ("task", "label"), "gold") if gold is not None else None
    ctx = _read_csv(contexts, ("task", "context"), "contexts") if contexts is not None else None
    return from_frame(
        frame,
        gold_frame,
        classes=classes,
        contexts=ctx,
        name=name or Path(labels).parent.name or "labels",
    )


def _bundled_dir(name: str) -> Any:
    return resources.files("crowdbudget.datasets").joinpath("data", name)


def bundled_files(name: str) -> dict[str, Any]:
    """The package files of bundled data set ``name`` (``labels``, ``gold``, ``contexts``)."""
    folder = _bundled_dir(name)
    out = {}
    for part in ("labels", "gold", "contexts"):
        entry = folder.joinpath(f"{part}.csv")
        if entry.is_file():
            out[part] = entry
    return out


def file_sha256(path: Any) -> str:
    """SHA-256 hex digest of a file (a path or an importlib resource)."""
    digest = hashlib.sha256()
    opener = path.open if hasattr(path, "open") else Path(path).open
    with opener("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def default_data_dir() -> Path | None:
    """Where the large data sets live: ``$CROWDBUDGET_DATA_DIR`` or a ``shared/data`` beside."""
    env = os.environ.get("CROWDBUDGET_DATA_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    candidates = [Path.cwd() / ".." / "shared" / "data", Path.cwd() / "shared" / "data"]
    candidates += [parent / ".." / "shared" / "data" for parent in here.parents]
    for candidate in candidates:
        if (candidate / "README.md").is_file():
            return candidate.resolve()
    return None


def list_datasets() -> list[dict[str, Any]]:
    """Every known data set: name, description, whether bundled, where it is found."""
    rows = []
    data_dir = default_data_dir()
    for name in BUNDLED + EXTERNAL:
        location: str | None
        if name in BUNDLED:
            location = "bundled"
        elif data_dir is not None and (data_dir / name / "labels.csv").is_file():
            location = str(data_dir / name)
        else:
            location = None
        rows.append(
            {
                "name": name,
                "description": _DESCRIPTIONS[name],
                "bundled": name in BUNDLED,
                "available": location is not None,
                "location": location,
            }
        )
    return rows


def load_dataset(name: str, *, data_dir: str | os.PathLike[str] | None = None) -> LabelData:
    """Load a named data set (bundled ones offline; the large ones from ``data_dir``).

    Raises:
        DataFormatError: unknown name, or a large set whose directory cannot be found.
    """
    if name in BUNDLED and data_dir is None:
        files = bundled_files(name)
        with (
            files["labels"].open("rb") as lab,
            files["gold"].open("rb") as gol,
        ):
            labels = _read_csv(lab, ("task", "worker", "label"), "labels")
            gold = _read_csv(gol, ("task", "label"), "gold")
        ctx = None
        if "contexts" in files:
            with files["contexts"].open("rb") as fh:
                ctx = _read_csv(fh, ("task", "context"), "contexts")
        return from_frame(labels, gold, contexts=ctx, name=name)
    if name not in BUNDLED + EXTERNAL:
        raise DataFormatError(
            f"unknown data set {name!r}; known: {', '.join(BUNDLED + EXTERNAL)} "
            "(or pass --labels/--gold CSV files)"
        )
    root = Path(data_dir) if data_dir is not None else default_data_dir()
    if root is None or not (root / name / "labels.csv").is_file():
        raise DataFormatError(
            f"data set {name!r} is not bundled and was not found; pass data_dir= "
            "or set CROWDBUDGET_DATA_DIR to the directory holding "
            f"{name}/labels.csv"
        )
    folder = root / name
    contexts = folder / "contexts.csv"
    return read_labels_csv(
        folder / "labels.csv",
        folder / "gold.csv",
        contexts=contexts if contexts.is_file() else None,
        name=name,
    )


#: the UCI / LIBSVM feature sets (no crowd labels; workers are simulated on them)
FEATURE_SETS = ("ionosphere", "breast_cancer", "pima", "splice")


@dataclass(frozen=True)
class FeatureData:
    """A feature set with binary gold labels, rows in ascending task order.

    Attributes:
        name: the set's name.
        task_ids: the task ids as strings, shape (n_items,).
        features: raw features, float, shape (n_items, n_features) (not standardised).
        feature_names: column names, length n_features.
        gold: class index 0/1 per task, shape (n_items,).
        classes: the class names in index order (sorted).
    """

    name: str
    task_ids: npt.NDArray[np.str_]
    features: npt.NDArray[np.float64]
    feature_names: tuple[str, ...]
    gold: npt.NDArray[np.int64]
    classes: tuple[str, ...]

    @property
    def n_items(self) -> int:
        return int(self.features.shape[0])


def load_feature_set(name: str, *, data_dir: str | os.PathLike[str] | None = None) -> FeatureData:
    """Load UCI feature set ``name`` (``features.csv`` and ``gold.csv`` under ``data_dir``,
    default :func:`default_data_dir`); binary sets only."""
    if name not in FEATURE_SETS:
        raise DataFormatError(
            f"unknown feature set {name!r}; feature sets: {', '.join(FEATURE_SETS)}"
        )
    base = Path(data_dir) if data_dir is not None else default_data_dir()
    folder = None if base is None else base / name
    if folder is None or not (folder / "features.csv").is_file():
        raise DataFormatError(
            f"feature set {name!r} not found; set CROWDBUDGET_DATA_DIR to the shared/data folder"
        )
    features = pd.read_csv(folder / "features.csv", dtype={"task": str})
    gold = pd.read_csv(folder / "gold.csv", dtype={"task": str, "label": str}).set_index("task")
    numeric_ids = pd.to_numeric(features["task"], errors="coerce").fillna(np.inf)
    order = np.argsort(numeric_ids.to_numpy(), kind="stable")
    features = features.iloc[order]
    missing = set(features["task"]) - set(gold.index)
    if missing:
        raise DataFormatError(f"{name}: {len(missing)} tasks have features but no gold label")
    classes = tuple(sorted(gold["label"].unique()))
    if len(classes) != 2:
        raise DataFormatError(f"{name!r} is not binary: classes {list(classes)}")
    index = {c: k for k, c in enumerate(classes)}
    labels = gold.loc[features["task"], "label"].map(index).to_numpy(dtype=np.int64)
    x = features.drop(columns="task")
    return FeatureData(
        name=name,
        task_ids=features["task"].to_numpy(dtype=str),
        features=x.to_numpy(dtype=float),
        feature_names=tuple(str(c) for c in x.columns),
        gold=labels,
        classes=classes,
    )
