"""Crowd label tables: reading, integer coding, validation, the bundled data sets.

Arrays inside, ids at the edge (DESIGN §7): a :class:`LabelData` holds one row per collected
label as three integer arrays (``items``, ``workers``, ``labels``) plus the string ids they
code, so aggregators and the replay environment never loop over Python objects per row.

File formats (crowd-kit's columns; plain or gzip-compressed, ``.csv`` or ``.csv.gz``):

- labels CSV: ``task,worker,label`` — one row per collected label, ids and labels as strings;
- gold CSV: ``task,label`` — the true label of some tasks (same label coding);
- contexts CSV (optional): ``task,context`` — task types, one or more rows per task.

Validation at load, one policy for every command (:func:`from_frame`):

- **classes** are the gold's classes when there is gold (a label outside them is an error
  naming its row, unless ``classes=`` lists every class), else the labels' classes; labels
  that all read as integers sort numerically (``"2" < "10"``), others as text. For two
  classes, class 1 is the "positive" class of the Beta–Bernoulli model (RTE: label ``1``);
- **repeated (task, worker) rows** are an error naming the first one, unless
  ``duplicates=`` says what to do: ``keep`` (every row is a label), ``first`` or ``last``
  (keep one row per pair). The bundled ``adult`` and ``fact_eval`` sets hold such repeats in
  their sources (2,922 and 45 pairs); their declared policy is ``keep``
  (:data:`BUNDLED_DUPLICATES`), which is what the published counts and our reproductions use;
- **gold tasks without labels** are counted (``extra["gold_without_labels"]``) and the
  commands report them: accuracy is measured on the gold tasks that have labels.

Data sets in the package (offline; :data:`BUNDLED_SHA256` holds the SHA-256 of each file's
uncompressed bytes, and ``datasets/data/README.md`` the provenance and licence of each):
crowd label sets ``rte``, ``temp``, ``wsd`` (Snow et al. 2008), ``millionaire`` (Aydin et
al.), ``fact_eval`` (CrowdScale 2013), ``trec`` (Zhang et al. 2014), ``adult`` (Ipeirotis
et al. 2010); feature sets ``ionosphere``, ``breast_cancer``, ``pima`` (UCI) and ``splice``
(LIBSVM). A data set of your own is a folder ``DIR/<name>/`` holding ``labels.csv`` and
``gold.csv`` (feature sets: ``features.csv``, ``gold.csv``); pass ``data_dir=DIR`` (the CLI's
``--data-dir``) or set ``CROWDBUDGET_DATA_DIR``. A set found there is used in place of a
bundled set of the same name.

Example:
    >>> data = load_dataset("rte")
    >>> data.n_items, data.n_workers, data.n_labels, data.n_classes
    (800, 164, 8000, 2)
"""

from __future__ import annotations

import gzip
import hashlib
import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import pandas as pd

from crowdbudget.exceptions import DataFormatError
from crowdbudget.labels import LabelData as LabelData  # re-export: it moved to the core

IntArray = npt.NDArray[np.int64]

#: the crowd label sets in the package
BUNDLED = ("rte", "temp", "wsd", "millionaire", "fact_eval", "trec", "adult")
#: the UCI / LIBSVM feature sets in the package (no crowd labels; workers are simulated)
FEATURE_SETS = ("ionosphere", "breast_cancer", "pima", "splice")
#: no crowd label set lives outside the package any more (kept for callers of the old name)
EXTERNAL: tuple[str, ...] = ()

#: how repeated (task, worker) rows are handled, per validation policy (:func:`from_frame`)
DUPLICATE_POLICIES = ("error", "keep", "first", "last")
#: the declared policy of bundled sets whose source holds repeated (task, worker) rows: the
#: data README's counts (and every reproduction) use all recorded rows
BUNDLED_DUPLICATES = {"fact_eval": "keep", "adult": "keep"}

#: SHA-256 of the uncompressed bytes of every packaged file (``<name>/<file>.csv``; stored as
#: ``.csv.gz``). They equal the digests of the source copies the data README describes.
BUNDLED_SHA256: dict[str, str] = {
    "rte/contexts.csv": "440de342e17d77db9ea599b7844142ede360e705a86c48b2d373295cfab5f056",
    "rte/gold.csv": "126ba27478041321acf2c0c3d8d2032defff1f534c2496a743dedf4a7e8d265b",
    "rte/labels.csv": "cd42608dc19502388f649e724f42df57d9da3866686cbc01b5f53f10420bfb46",
    "temp/gold.csv": "ef2c13b0695229a84f6fd27a50e00e045f3fc0161dfbe823223a341db68c9e3b",
    "temp/labels.csv": "95f73d389ab19796a2f40314b31b980cd92bfec3d7199ed6811145a9d6c049c4",
    "wsd/gold.csv": "5472096b02cdc016ff344b320eb01a5491fdd17253817964c6ef94d4f86245c1",
    "wsd/labels.csv": "a3619c30aec3bc5e4d293c63e47d2eb24bb34a3ef36abcb0b5bfc5f15f86dbcd",
    "millionaire/contexts.csv": "13e13d3d2599481218e695b15be8f24420db5124bb9fa180acf521c8679cb335",
    "millionaire/gold.csv": "a13d31327a112f30fcdaaa61398f4f541727f1d27b39e890ac9ba3fb3ae0ec2c",
    "millionaire/labels.csv": "7faa9c41d92f69da44b9084b3b4a60aa867fe80ce0457d032ec2894cbf2880b8",
    "millionaire/tasks.csv": "7833290eaf8f6df125fac87f0575cc63a9a9a1c2095cb6a7f53d50e65f1164f4",
    "fact_eval/gold.csv": "32351d038ab7de6304c2bb7a4517f1345e9dfd1eb78d0006b3202d9b4c953a7a",
    "fact_eval/labels.csv": "b7a5d67dbb3f707a7e47869db436df50465d2a0c3707347cd2ee14db33e6c037",
    "trec/gold.csv": "769ecf6116442ec6a97affbd7071bc3da0bcb82051ef6fe841fa744d6648e71b",
    "trec/labels.csv": "2aa04748ec1951a65cdb59a5564d18bddbaa7ed87f9d53059c5f497baaaf3f06",
    "adult/gold.csv": "d322e48f4ed40aeaa03f42d8e10a0fc30c9c524526fc29c62330d45797ee1ca2",
    "adult/labels.csv": "f486f2747e0fba89466ae9e05a6452eb1003018a458def8676df25c267f6f125",
    "ionosphere/features.csv": "c7981d581cc5048a664f424b391f8da0906ec6430b99e9183218d8be70f36c2a",
    "ionosphere/gold.csv": "df536315f5643fb5e1e75191856d96897539ee605080e7a9490f0f2450aa3ea6",
    "breast_cancer/features.csv": (
        "c716643cc92380b0c7b0e68e4c5230d79e06ccf26be8d08d9c682c67816f01d1"
    ),
    "breast_cancer/gold.csv": "029fdb899ac02da9ac732fd3dfc671a84e420658e94560f115c091183f3fd9cb",
    "pima/features.csv": "0d196bf5fdc16234c0bb51b346a88289d61a8c85ab4483b5d8af45a230837b76",
    "pima/gold.csv": "327736f991e3ad68d896cc692bc97c12b5497498b4a79ce3a34e5fb94324ab89",
    "splice/features.csv": "19166fb62c281f03c6d0b3acb03e10fe79c1803914e0ddfa0697515e71298c0e",
    "splice/gold.csv": "6ac182fcd33b7e83f7d465c721d00a3660ab4d4b08bb11a827fac8483c363ba9",
    "splice/split.csv": "7fb5942b1af1f7a57bb7ca81df946d9c633855212e427bbf10a0bc1adf60aa43",
}

_DESCRIPTIONS = {
    "rte": "recognizing textual entailment, Snow et al. 2008 (binary, 10 labels per task)",
    "temp": "temporal ordering of events, Snow et al. 2008 (binary, 10 labels per task)",
    "wsd": "word sense disambiguation, Snow et al. 2008 (3 classes, 10 labels per task)",
    "millionaire": "'Who wants to be a millionaire' answers, Aydin et al. (Requallo 'Game'; "
    "4 classes)",
    "fact_eval": "CrowdScale 2013 Google fact evaluation (3 classes, gold for 576 tasks)",
    "trec": "TREC relevance judgments used by Zhang et al. 2014 (binary, gold for 2,275 tasks)",
    "adult": "adult-content rating, Ipeirotis et al. 2010 (4 classes, gold for 333 labeled tasks)",
    "ionosphere": "UCI Ionosphere radar returns (features only, 351 rows, 34 features, binary)",
    "breast_cancer": "UCI Wisconsin diagnostic breast cancer (features only, 569 rows, 30 "
    "features)",
    "pima": "UCI Pima Indians diabetes (features only, 768 rows, 8 features, binary)",
    "splice": "LIBSVM splice junctions (features only, 1,000 train + 2,175 test rows, 60 features)",
}


def _class_order(values: list[str]) -> tuple[str, ...]:
    unique = sorted(set(values))
    try:
        return tuple(sorted(unique, key=lambda v: (int(v), v)))
    except ValueError:
        return tuple(unique)


def _source_name(source: Any) -> str:
    return str(getattr(source, "name", source))


#: column names that other tools export for ours (crowd-kit's names are ours; Toloka writes
#: ``INPUT:…``/``OUTPUT:…``/``ASSIGNMENT:worker_id``, MTurk ``HITId``/``WorkerId``/``Answer.…``)
_COLUMN_ALIASES = {
    "task": ("task_id", "taskid", "item", "item_id", "hitid", "question", "input:"),
    "worker": ("worker_id", "workerid", "assignment:worker_id", "annotator", "user", "user_id"),
    "label": ("answer", "response", "annotation", "output:", "answer."),
}


def _column_hint(found: list[str], missing: list[str]) -> str:
    """A clause for the missing-column error: the found columns that look like the missing ones
    (``; rename task_id→task, answer→label``), or that the header holds tabs."""
    if len(found) == 1 and "\t" in found[0]:
        return "; the header is tab-separated: save the file with commas"
    renames = []
    for column in missing:
        for name in found:
            if any(
                name == a or (a.endswith((":", ".")) and name.startswith(a))
                for a in _COLUMN_ALIASES.get(column, ())
            ):
                renames.append(f"{name}→{column}")
                break
    return f"; rename {', '.join(renames)}" if renames else ""


def _read_csv(source: Any, required: tuple[str, ...], what: str) -> pd.DataFrame:
    """Read a CSV of strings (a path, or a binary file object; ``.gz`` names are gunzipped)."""
    compression: Literal["gzip", "infer"] = (
        "gzip" if _source_name(source).endswith(".gz") else "infer"
    )
    try:
        frame = pd.read_csv(
            source,
            dtype=str,
            keep_default_na=False,
            skipinitialspace=True,
            compression=compression,
        )
    except FileNotFoundError:
        raise DataFormatError(
            f"{what} file {source} does not exist (expected a CSV with columns "
            f"{','.join(required)})"
        ) from None
    except IsADirectoryError:
        raise DataFormatError(f"{what} file {source} is a folder, not a CSV file") from None
    except UnicodeDecodeError:
        raise DataFormatError(_not_utf8(source, what)) from None
    except (
        pd.errors.ParserError,
        pd.errors.EmptyDataError,
        OSError,
        EOFError,
    ) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataFormatError(f"{what} file {source} is not a readable CSV: {first}") from None
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise DataFormatError(
            f"{what} file {source} lacks column(s) {', '.join(missing)}; "
            f"expected columns {','.join(required)} (found {','.join(frame.columns)})"
            + _column_hint(list(frame.columns), missing)
        )
    for column in required:
        stripped = frame[column].str.strip()
        blank = (stripped == "").to_numpy()
        if blank.any():
            row = int(np.flatnonzero(blank)[0]) + 2  # 1-based, after the header
            raise DataFormatError(f"{what} file {source}: empty {column!r} on line {row}")
        frame[column] = stripped
    frame.attrs["source"] = str(source)
    return frame


def _not_utf8(source: Any, what: str) -> str:
    """The one-line error for a CSV that is not UTF-8: the first line that does not decode
    (1-based) and how to convert the file."""
    where = ""
    try:
        opener: Any = gzip.open if _source_name(source).endswith(".gz") else open
        with opener(source, "rb") as raw:
            for number, line in enumerate(raw, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError:
                    where = f" on line {number}"
                    break
    except (OSError, TypeError, EOFError):
        pass  # a file object, or unreadable now: the message names no line
    return (
        f"{what} file {source} is not UTF-8 text (a byte that is not UTF-8{where}); save it as "
        "UTF-8, e.g. iconv -f latin1 -t utf-8 OLD.csv > NEW.csv"
    )


def _same_number(text: str, classes: tuple[str, ...]) -> str | None:
    """The class among ``classes`` that names the same number as ``text`` ("1" and "1.0"),
    if ``text`` is a number and one does; else None."""
    try:
        value = float(text)
    except ValueError:
        return None
    for c in classes:
        try:
            if float(c) == value:
                return c
        except ValueError:
            continue
    return None


def _row_name(frame: pd.DataFrame, position: int, what: str) -> str:
    """``labels file F line N`` for a table read from a file, else ``labels row N``."""
    source = frame.attrs.get("source")
    if source:
        return f"{what} file {source} line {position + 2}"  # 1-based, after the header
    return f"{what} row {position}"


def _resolve_duplicates(
    labels: pd.DataFrame, task: np.ndarray, worker: np.ndarray, duplicates: str, name: str
) -> npt.NDArray[np.bool_] | None:
    """Rows to keep under policy ``duplicates`` (None: keep all), or raise naming the first
    repeated (task, worker) row."""
    if duplicates not in DUPLICATE_POLICIES:
        raise DataFormatError(
            f"unknown duplicates policy {duplicates!r}; allowed: {', '.join(DUPLICATE_POLICIES)}"
        )
    if duplicates == "keep":
        return None
    # one int64 code per (task, worker) pair: exact (codes < n_tasks * n_workers, far below
    # 2**63 for any table that fits in memory) and much faster than hashing string pairs
    task_codes, _ = pd.factorize(task)
    worker_codes, worker_ids = pd.factorize(worker)
    pairs = pd.Series(task_codes.astype(np.int64) * len(worker_ids) + worker_codes)
    if duplicates == "error":
        repeated = pairs.duplicated(keep="first").to_numpy()
        if not repeated.any():
            return None
        position = int(np.flatnonzero(repeated)[0])
        raise DataFormatError(
            f"{_row_name(labels, position, 'labels')}: worker {worker[position]!r} labeled task "
            f"{task[position]!r} more than once (data set {name!r}); choose what to do with "
            "repeated (task, worker) rows: --duplicates keep|first|last"
        )
    kept = ~pairs.duplicated(keep="first" if duplicates == "first" else "last").to_numpy()
    return None if kept.all() else kept


def from_frame(
    labels: pd.DataFrame,
    gold: pd.DataFrame | pd.Series | None = None,
    *,
    classes: tuple[str, ...] | None = None,
    contexts: pd.DataFrame | None = None,
    name: str = "labels",
    duplicates: str = "error",
) -> LabelData:
    """Integer-code a crowd-kit table (``task, worker, label``) and optional gold, validated
    as the module docstring says.

    ``gold`` is a DataFrame with ``task, label`` (or a ``task``-indexed Series). Items are the
    tasks with labels, in order of first appearance; gold-only tasks have nothing to aggregate
    and are counted in ``extra["gold_without_labels"]`` (their ids, up to 5, in
    ``extra["gold_without_labels_examples"]``). ``classes`` fixes the class set and order
    (labels or gold outside it are an error); by default it is the gold's classes when there
    is gold, else the observed labels'. ``duplicates`` is one of :data:`DUPLICATE_POLICIES`.

    Raises:
        DataFormatError: one line naming the row at fault and what is allowed.
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
    keep = _resolve_duplicates(labels, task, worker, duplicates, name)
    if isinstance(gold, pd.Series):
        gold = pd.DataFrame({"task": gold.index.astype(str), "label": gold.astype(str).values})
    gold_task = gold["task"].astype(str).to_numpy() if gold is not None else np.zeros(0, str)
    gold_label = gold["label"].astype(str).to_numpy() if gold is not None else np.zeros(0, str)
    from_gold = classes is None and gold is not None and gold_label.shape[0] > 0
    if classes is not None:
        classes = tuple(str(c) for c in classes)
    elif from_gold:
        classes = _class_order(list(pd.unique(gold_label)))
    else:
        classes = _class_order(list(pd.unique(label)))
    class_index = pd.Index(classes)
    codes = class_index.get_indexer(pd.Index(label))
    if (codes < 0).any():
        position = int(np.flatnonzero(codes < 0)[0])
        where = _row_name(labels, position, "labels")
        twin = _same_number(label[position], classes)
        if from_gold and twin is not None:
            raise DataFormatError(
                f"{where}: label {label[position]!r} and the gold's class {twin!r} are the same "
                "number written two ways; write the gold's labels as the labels table does"
            )
        if from_gold:
            observed = _class_order(list(pd.unique(label)) + list(classes))
            raise DataFormatError(
                f"{where}: label {label[position]!r} is not one of the gold's classes "
                f"({', '.join(classes)}); if it is a real class, list every class: "
                f"--classes {','.join(observed)}"
            )
        raise DataFormatError(
            f"{where}: label {label[position]!r} is not a class; classes: {', '.join(classes)}"
        )
    if keep is not None:
        task, worker, codes = task[keep], worker[keep], codes[keep]
    items, item_ids = pd.factorize(task)
    workers, worker_ids = pd.factorize(worker)
    gold_codes: IntArray | None = None
    extra: dict[str, Any] = {}
    if gold is not None:
        if pd.Index(gold_task).has_duplicates:
            dup = pd.Index(gold_task)[pd.Index(gold_task).duplicated()][0]
            raise DataFormatError(f"gold labels list task {dup!r} more than once")
        g = class_index.get_indexer(pd.Index(gold_label))
        if (g < 0).any():
            position = int(np.flatnonzero(g < 0)[0])
            raise DataFormatError(
                f"{_row_name(gold, position, 'gold')}: gold label {gold_label[position]!r} is "
                f"not a class; classes: {', '.join(classes)}"
            )
        gold_codes = np.full(len(item_ids), -1, dtype=np.int64)
        position_of = pd.Index(item_ids).get_indexer(pd.Index(gold_task))
        known = position_of >= 0
        gold_codes[position_of[known]] = g[known]
        extra["gold_without_labels"] = int((~known).sum())
        extra["gold_without_labels_examples"] = [str(t) for t in gold_task[~known][:5]]
    if keep is not None:
        extra["duplicates_dropped"] = int((~keep).sum())
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
        extra=extra,
    )


def read_labels_csv(
    labels: str | os.PathLike[str],
    gold: str | os.PathLike[str] | None = None,
    *,
    classes: tuple[str, ...] | None = None,
    contexts: str | os.PathLike[str] | None = None,
    name: str | None = None,
    duplicates: str = "error",
) -> LabelData:
    """Read a labels CSV (``task,worker,label``) and optional gold CSV (``task,label``),
    validated by :func:`from_frame`.

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
        duplicates=duplicates,
    )


def _bundled_dir(name: str) -> Any:
    return resources.files("crowdbudget.datasets").joinpath("data", name)


def bundled_files(name: str) -> dict[str, Any]:
    """The package files of bundled set ``name`` by part (``labels``, ``gold``, ``contexts``,
    ``tasks``, ``features``, ``split``): importlib resources of gzip-compressed CSVs."""
    folder = _bundled_dir(name)
    out = {}
    for part in ("labels", "gold", "contexts", "tasks", "features", "split"):
        entry = folder.joinpath(f"{part}.csv.gz")
        if entry.is_file():
            out[part] = entry
    return out


def file_sha256(path: Any) -> str:
    """SHA-256 hex digest of a file's content (a path or an importlib resource); a ``.gz``
    file is digested after decompression, so the digest is that of the CSV itself."""
    digest = hashlib.sha256()
    opener = path.open if hasattr(path, "open") else Path(path).open
    with opener("rb") as raw:
        fh = gzip.GzipFile(fileobj=raw) if _source_name(path).endswith(".gz") else raw
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _declared_duplicates(name: str, labels_file: Path) -> str:
    """The duplicates policy of a user's labels file: the bundled set's declared one when the
    file is that set's labels byte for byte, else ``"error"``."""
    declared = BUNDLED_DUPLICATES.get(name)
    if declared is None or file_sha256(labels_file) != BUNDLED_SHA256.get(f"{name}/labels.csv"):
        return "error"
    return declared


def default_data_dir() -> Path | None:
    """The folder of the user's own data sets: ``$CROWDBUDGET_DATA_DIR``, or None."""
    env = os.environ.get("CROWDBUDGET_DATA_DIR")
    return Path(env) if env else None


def _data_root(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """The user's data folder (``data_dir``, else ``$CROWDBUDGET_DATA_DIR``), checked."""
    root: Path | None
    if data_dir is not None:
        root, what = Path(data_dir), "--data-dir"
    else:
        root, what = default_data_dir(), "CROWDBUDGET_DATA_DIR"
    if root is not None and not root.is_dir():
        raise DataFormatError(
            f"{what} {root} is not a folder; it names a folder of data sets "
            "(DIR/NAME/labels.csv and gold.csv)"
        )
    return root


def _user_folder(name: str, data_dir: str | os.PathLike[str] | None, part: str) -> Path | None:
    """``DIR/name`` when it holds ``part.csv`` (or ``part.csv.gz``), DIR being ``data_dir``
    or ``$CROWDBUDGET_DATA_DIR``; else None."""
    root = _data_root(data_dir)
    if root is None:
        return None
    folder = root / name
    if _part_file(folder, part) is not None:
        return folder
    return None


def _part_file(folder: Path, part: str) -> Path | None:
    for suffix in (".csv", ".csv.gz"):
        candidate = folder / f"{part}{suffix}"
        if candidate.is_file():
            return candidate
    return None


def _user_sets(data_dir: str | os.PathLike[str] | None) -> dict[str, tuple[str, Path]]:
    """The sets in the user's data folder: name -> (kind, folder)."""
    root = _data_root(data_dir)
    if root is None:
        return {}
    found = {}
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        if _part_file(folder, "labels") is not None:
            found[folder.name] = ("labels", folder)
        elif _part_file(folder, "features") is not None:
            found[folder.name] = ("features", folder)
    return found


def list_datasets(data_dir: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Every data set: the bundled ones, then those in ``data_dir`` (default
    ``$CROWDBUDGET_DATA_DIR``); a user set of a bundled name replaces it. Rows have ``name``,
    ``kind`` (``labels`` or ``features``), ``description``, ``bundled``, ``available``,
    ``location`` (``"bundled"`` or the folder)."""
    user = _user_sets(data_dir)
    rows = []
    for name in BUNDLED + FEATURE_SETS:
        kind = "labels" if name in BUNDLED else "features"
        location = str(user[name][1]) if name in user else "bundled"
        rows.append(
            {
                "name": name,
                "kind": kind,
                "description": _DESCRIPTIONS[name],
                "bundled": name not in user,
                "available": True,
                "location": location,
            }
        )
    for name, (kind, folder) in user.items():
        if name in BUNDLED + FEATURE_SETS:
            continue
        rows.append(
            {
                "name": name,
                "kind": kind,
                "description": "your data set",
                "bundled": False,
                "available": True,
                "location": str(folder),
            }
        )
    return rows


def _unknown(name: str, kind: str, data_dir: str | os.PathLike[str] | None) -> DataFormatError:
    root = _data_root(data_dir)
    part = "labels.csv and gold.csv" if kind == "labels" else "features.csv and gold.csv"
    known = BUNDLED if kind == "labels" else FEATURE_SETS
    where = f"; {root}/{name}/ has no such files" if root is not None else ""
    return DataFormatError(
        f"unknown {'data' if kind == 'labels' else 'feature'} set {name!r}; bundled: "
        f"{', '.join(known)}; a set of your own is a folder DIR/{name}/ with {part} "
        f"(--data-dir DIR or CROWDBUDGET_DATA_DIR){where}"
    )


def load_dataset(
    name: str,
    *,
    data_dir: str | os.PathLike[str] | None = None,
    duplicates: str | None = None,
    classes: tuple[str, ...] | None = None,
) -> LabelData:
    """Load a crowd label set: ``DIR/name/`` when the user's data folder (``data_dir``, else
    ``$CROWDBUDGET_DATA_DIR``) holds it, else the bundled set ``name``.

    ``duplicates`` (:data:`DUPLICATE_POLICIES`) defaults to the bundled set's declared policy
    (:data:`BUNDLED_DUPLICATES`), else ``"error"``; ``classes`` as for :func:`from_frame`.
    A user folder whose labels file is byte for byte the bundled set's (its SHA-256 is the
    :data:`BUNDLED_SHA256` entry: e.g. the source copy the package was built from) is that
    set, so it takes the same declared policy.

    Raises:
        DataFormatError: an unknown name (the message says how to add a set), or bad data.
    """
    folder = _user_folder(name, data_dir, "labels")
    if folder is not None:
        labels_file = _part_file(folder, "labels")
        gold_file = _part_file(folder, "gold")
        contexts_file = _part_file(folder, "contexts")
        assert labels_file is not None
        return read_labels_csv(
            labels_file,
            gold_file,
            contexts=contexts_file,
            classes=classes,
            name=name,
            duplicates=duplicates or _declared_duplicates(name, labels_file),
        )
    if name not in BUNDLED:
        raise _unknown(name, "labels", data_dir)
    files = bundled_files(name)
    tables = {}
    for part, required in (
        ("labels", ("task", "worker", "label")),
        ("gold", ("task", "label")),
        ("contexts", ("task", "context")),
    ):
        if part in files:
            with files[part].open("rb") as fh:
                tables[part] = _read_csv(fh, required, part)
            # name the package file (not the open handle) in row-level errors
            tables[part].attrs["source"] = f"{name}/{part}.csv"
    return from_frame(
        tables["labels"],
        tables.get("gold"),
        contexts=tables.get("contexts"),
        classes=classes,
        name=name,
        duplicates=duplicates or BUNDLED_DUPLICATES.get(name, "error"),
    )


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
        split: per task its split name (``split.csv``: splice's ``train`` / ``test``), shape
            (n_items,), or None.
    """

    name: str
    task_ids: npt.NDArray[np.str_]
    features: npt.NDArray[np.float64]
    feature_names: tuple[str, ...]
    gold: npt.NDArray[np.int64]
    classes: tuple[str, ...]
    split: npt.NDArray[np.str_] | None = None

    @property
    def n_items(self) -> int:
        return int(self.features.shape[0])


def _feature_tables(name: str, data_dir: str | os.PathLike[str] | None) -> dict[str, pd.DataFrame]:
    """The raw tables (``features``, ``gold``, optional ``split``) of feature set ``name``,
    from the user's data folder or the package; ``task`` and ``label`` read as strings."""
    dtypes = {"task": str, "label": str, "split": str}
    folder = _user_folder(name, data_dir, "features")
    sources: dict[str, Any] = {}
    if folder is not None:
        for part in ("features", "gold", "split"):
            path = _part_file(folder, part)
            if path is not None:
                sources[part] = path
        if "gold" not in sources:
            raise DataFormatError(f"feature set {name!r} in {folder} has no gold.csv")
    elif name in FEATURE_SETS:
        sources = {k: v for k, v in bundled_files(name).items() if k != "labels"}
    else:
        raise _unknown(name, "features", data_dir)
    tables = {}
    for part, source in sources.items():
        with source.open("rb") as fh:
            tables[part] = pd.read_csv(
                fh,
                dtype=dtypes,
                compression="gzip" if _source_name(source).endswith(".gz") else None,
            )
    return tables


def load_feature_set(name: str, *, data_dir: str | os.PathLike[str] | None = None) -> FeatureData:
    """Load feature set ``name`` (bundled, or ``DIR/name/features.csv`` and ``gold.csv`` in
    the user's data folder); binary sets only."""
    tables = _feature_tables(name, data_dir)
    features = tables["features"]
    gold = tables["gold"].set_index("task")
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
    split = None
    if "split" in tables:
        by_task = tables["split"].set_index("task")["split"]
        split = by_task.reindex(features["task"]).fillna("").to_numpy(dtype=str)
    x = features.drop(columns="task")
    return FeatureData(
        name=name,
        task_ids=features["task"].to_numpy(dtype=str),
        features=x.to_numpy(dtype=float),
        feature_names=tuple(str(c) for c in x.columns),
        gold=labels,
        classes=classes,
        split=split,
    )
