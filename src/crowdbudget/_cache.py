"""A small on-disk cache of numeric tables (index tables of the Gittins policies).

Tables are dictionaries of NumPy arrays stored as ``.npz`` files in one directory:
``$CROWDBUDGET_CACHE_DIR`` if set, else ``~/.cache/crowdbudget``. A table's file name is a
SHA-256 hash of its parameters (:func:`cache_key`), so a change of any parameter (prior,
threshold, discount, solver, tolerance, algorithm version) is a different file.

Writes are atomic: the arrays go to a temporary file in the same directory, which then
replaces the target with :func:`os.replace` (atomic on POSIX and Windows). Two processes
writing the same key therefore never leave a torn file: the last ``os.replace`` wins, and a
reader sees either the old or the new complete table. Callers that grow a table
(:func:`merge_table`) re-read the file just before writing and write the union, so entries
written by another process in between are kept unless both write in the very same instant.
A file that cannot be read (truncated by a crash of an older version, foreign content) is
treated as missing. An unwritable or missing directory is not an error: tables are then
computed and kept in memory only (:func:`save_table` returns False).

Example:
    >>> import numpy as np, tempfile, os
    >>> os.environ["CROWDBUDGET_CACHE_DIR"] = tempfile.mkdtemp()
    >>> key = cache_key("demo", a=1.0, b=2.0)
    >>> save_table(key, {"x": np.arange(3.0)})
    True
    >>> load_table(key)["x"].tolist()
    [0.0, 1.0, 2.0]
    >>> del os.environ["CROWDBUDGET_CACHE_DIR"]
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

ENV_VAR = "CROWDBUDGET_CACHE_DIR"

Table = dict[str, np.ndarray]


def cache_dir() -> Path:
    """The cache directory (not created here): ``$CROWDBUDGET_CACHE_DIR`` or
    ``~/.cache/crowdbudget``."""
    configured = os.environ.get(ENV_VAR)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "crowdbudget"


def cache_key(kind: str, **params: Any) -> str:
    """A file-name-safe key: ``kind`` followed by a hash of the parameters (JSON with sorted
    keys; floats by ``repr``, so 0.1 and 0.1000000001 differ)."""
    text = json.dumps(
        {k: repr(v) if isinstance(v, float) else v for k, v in params.items()},
        sort_keys=True,
    )
    digest = hashlib.sha256(f"{kind}|{text}".encode()).hexdigest()[:24]
    return f"{kind}-{digest}"


def _path(key: str) -> Path:
    return cache_dir() / f"{key}.npz"


def load_table(key: str) -> Table | None:
    """The stored table of ``key``, or None when there is none (or it cannot be read)."""
    path = _path(key)
    try:
        with np.load(path, allow_pickle=False) as stored:
            return {name: stored[name] for name in stored.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return None


def save_table(key: str, table: Mapping[str, np.ndarray]) -> bool:
    """Write ``table`` atomically (temporary file + ``os.replace``). Returns False, and
    writes nothing, when the directory cannot be created or written."""
    directory = cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=f".{key}.", suffix=".tmp", dir=directory)
    except OSError:
        return False
    try:
        with os.fdopen(handle, "wb") as out:
            np.savez(out, **{name: np.asarray(v) for name, v in table.items()})  # type: ignore[arg-type]
        os.replace(temporary, _path(key))
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return False
    return True


def merge_table(
    key: str,
    table: Mapping[str, np.ndarray],
    merge: Callable[[Table, Mapping[str, np.ndarray]], Table],
) -> bool:
    """Write ``merge(stored, table)`` (or ``table`` when nothing is stored) atomically, so
    that entries another process stored meanwhile are kept."""
    stored = load_table(key)
    return save_table(key, dict(table) if stored is None else merge(stored, table))
