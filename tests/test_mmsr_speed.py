"""MMSR's compiled trimmed means (``_msr_rows``) give bit for bit what the first, vectorised
implementation (``_msr_means_reference``, a lexsort of every co-worker ratio per call) gives:
the row kernel on random CSR matrices with ties, ±0, ±inf and NaN, the covariance's gather
against SciPy's fancy indexing, and whole fits (skills, accuracies, posteriors, labels,
iteration count, loss history) on rte, temp, wsd and synthetic designs — including sparse
ones (2–3 labels per item: F = 0, where the iteration may diverge and the last finite iterate
is kept, and a lone surviving 0 becomes 1/√n_tasks) and ones where a worker's current value
is 0, so that its co-workers' ratios are ±inf or NaN."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from crowdbudget.aggregation import mmsr
from crowdbudget.aggregation.mmsr import MMSR
from crowdbudget.datasets import load_dataset
from crowdbudget.labels import LabelData

#: what the reference met during the fits of one test (see ``_reference_means``)
_SEEN: dict[str, int] = {}


def _reference_means(
    matrix: sp.csr_matrix, divisor: Any, current: Any, trim: int, n_tasks: int
) -> Any:
    """The reference, noting which of the special cases the call met."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = matrix.data / divisor[matrix.indices]
    out = mmsr._msr_means_reference(matrix, divisor, current, trim, n_tasks)
    _SEEN["calls"] = _SEEN.get("calls", 0) + 1
    _SEEN["non-finite ratio"] = _SEEN.get("non-finite ratio", 0) + int(
        not np.all(np.isfinite(ratios))
    )
    _SEEN["F = 0"] = _SEEN.get("F = 0", 0) + int(trim == 0)
    _SEEN["F > 0"] = _SEEN.get("F > 0", 0) + int(trim > 0)
    _SEEN["lone zero"] = _SEEN.get("lone zero", 0) + int(
        np.any((out == 1.0 / np.sqrt(n_tasks)) & (out != current))
    )
    return out


class _ReferenceMMSR(MMSR):
    _row_means = staticmethod(_reference_means)


def _same_bits(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _assert_same_fit(data: LabelData, **params: Any) -> MMSR:
    """Fits both paths; returns the reference fit."""
    ours = MMSR(**params).fit(data)
    reference = _ReferenceMMSR(**params).fit(data)
    for name in ("skills_", "accuracies_", "probas_", "labels_"):
        assert _same_bits(getattr(ours, name), getattr(reference, name)), name
    assert ours.n_iter_ == reference.n_iter_
    assert _same_bits(ours.loss_history_, reference.loss_history_)
    return reference


def _diverged(fitted: MMSR) -> bool:
    """The loop stopped on a non-finite / huge iterate (it records no loss for that one)."""
    return len(fitted.loss_history_) == fitted.n_iter_ - 1


def _design(
    n_items: int,
    per_item: int,
    n_workers: int,
    n_classes: int,
    seed: int,
    accuracy: tuple[float, float] = (0.55, 0.95),
) -> LabelData:
    """``per_item`` distinct random workers per item, one-coin answers."""
    rng = np.random.default_rng(seed)
    items = np.repeat(np.arange(n_items), per_item)
    workers = np.concatenate(
        [rng.choice(n_workers, per_item, replace=False) for _ in range(n_items)]
    )
    truth = rng.integers(n_classes, size=n_items)
    skill = rng.uniform(*accuracy, size=n_workers)
    correct = rng.random(items.size) < skill[workers]
    wrong = (truth[items] + rng.integers(1, n_classes, size=items.size)) % n_classes
    return LabelData(
        items=items.astype(np.int64),
        workers=workers.astype(np.int64),
        labels=np.where(correct, truth[items], wrong).astype(np.int64),
        item_ids=np.arange(n_items).astype(str).astype(object),
        worker_ids=np.arange(n_workers).astype(str).astype(object),
        classes=tuple(str(c) for c in range(n_classes)),
        gold=truth.astype(np.int64),
    )


# --- the row kernel -------------------------------------------------------------------------

#: values with ties, signed zeros, infinities, NaN and extremes
_POOL = np.array(
    [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, np.inf, -np.inf, np.nan, 1e-300, 1e300, 0.1, 0.2, 0.3]
)


def _random_case(
    rng: np.random.Generator, size: int, density: float, max_trim: int
) -> tuple[sp.csr_matrix, Any, Any, int]:
    matrix = sp.random(
        size, size, density=density, format="csr", random_state=int(rng.integers(2**31))
    )
    if rng.random() < 0.5:
        matrix.data = rng.choice(_POOL[: int(rng.integers(2, _POOL.size + 1))], matrix.nnz)
    else:
        matrix.data = np.round(rng.normal(size=matrix.nnz), int(rng.integers(0, 3)))
    divisor = rng.choice(_POOL, size) if rng.random() < 0.5 else rng.normal(size=size)
    if rng.random() < 0.5:
        current = rng.choice(_POOL, size)
    else:  # current values equal to some of the row's ratios (ties with a)
        with np.errstate(all="ignore"):
            ratios = matrix.data / divisor[matrix.indices]
        current = rng.choice(ratios, size) if ratios.size else np.ones(size)
    return matrix, divisor, current, int(rng.integers(0, max_trim + 1))


@pytest.mark.parametrize("seed", range(4))
def test_row_kernel_matches_the_reference_on_small_random_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(500):
        case = _random_case(rng, int(rng.integers(1, 30)), rng.uniform(0.05, 1.0), 16)
        with np.errstate(all="ignore"):
            expected = mmsr._msr_means_reference(*case, n_tasks=7)
        assert _same_bits(mmsr._msr_means(*case, n_tasks=7), expected), case


@pytest.mark.parametrize("seed", range(3))
def test_row_kernel_matches_the_reference_on_wide_rows(seed: int) -> None:
    """Rows of ~300 ratios (both ways of picking the kept values: a scan for a few, a
    selection for many), the current value near the middle or anywhere, F from 0 to ~d/2."""
    rng = np.random.default_rng(100 + seed)
    for trial in range(25):
        size = int(rng.integers(200, 320))
        matrix = sp.random(size, size, density=0.97, format="csr", random_state=trial)
        matrix.data = np.abs(np.round(rng.normal(size=matrix.nnz), 2))  # ties and zeros
        divisor = rng.uniform(0.2, 2.0, size)
        divisor[rng.random(size) < 0.01] = 0.0  # ±inf and NaN ratios
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = matrix.data / divisor[matrix.indices]
        finite = ratios[np.isfinite(ratios)]
        middle = np.full(size, np.median(finite))
        current = middle if trial % 2 else rng.choice(finite, size)
        degree = np.diff(matrix.indptr)
        trim = int(rng.integers(0, degree.min() // 2 + 1))
        expected = mmsr._msr_means_reference(matrix, divisor, current, trim, 50)
        assert _same_bits(mmsr._msr_means(matrix, divisor, current, trim, 50), expected)


def test_row_kernel_special_rows() -> None:
    """Hand-made rows: a lone 0 (→ 1/√n_tasks), a NaN kept by F = 0 (value stays), an inf
    trimmed first, nothing kept, an empty row, a NaN current value."""
    rows = [
        [0.0],  # lone 0
        [1.0, np.nan],  # F = 0 keeps the NaN: the current value stays
        [1.0, 2.0, 3.0, np.inf, 2.0],
        [5.0, 6.0],
        [],
        [1.0, 2.0],
    ]
    current = np.array([3.0, 4.0, 2.0, 1.0, 7.0, np.nan])
    indptr = np.cumsum([0] + [len(r) for r in rows])
    values = np.array([v for r in rows for v in r], dtype=float)
    indices = np.concatenate([np.arange(len(r)) for r in rows]).astype(np.int32)
    matrix = sp.csr_matrix((values, indices, indptr), shape=(len(rows), 6))
    divisor = np.ones(6)
    for trim in (0, 1, 2):
        with np.errstate(all="ignore"):
            expected = mmsr._msr_means_reference(matrix, divisor, current, trim, 16)
        got = mmsr._msr_means(matrix, divisor, current, trim, 16)
        assert _same_bits(got, expected), trim
    got = mmsr._msr_means(matrix, divisor, current, 0, 16)
    assert got[0] == 0.25  # 1/√16
    assert got[1] == 4.0 and got[4] == 7.0  # kept
    assert got[5] == 1.5  # F = 0: everything kept, whatever the current value
    got = mmsr._msr_means(matrix, divisor, current, 1, 16)
    assert got[2] == 7.0 / 3.0  # 1 and inf trimmed
    assert np.isnan(got[5])  # trimming by value against NaN keeps nothing


def test_covariance_gathers_what_scipy_indexing_gives() -> None:
    """``_entries_at`` is ``equal[common.nonzero()]`` (duplicates summed)."""
    rng = np.random.default_rng(5)
    for _ in range(30):
        n = int(rng.integers(1, 40))
        pattern = sp.random(n, n, density=rng.uniform(0.05, 0.9), format="csr", random_state=1)
        rows = rng.integers(n, size=3 * n)
        cols = rng.integers(n, size=3 * n)
        source = sp.csr_matrix(
            (rng.integers(1, 5, size=3 * n).astype(float), (rows, cols)), shape=(n, n)
        )
        if rng.random() < 0.5:  # every entry twice, in reversed order (not canonical)
            parts = [slice(source.indptr[r], source.indptr[r + 1]) for r in range(n)]
            source = sp.csr_matrix(
                (
                    np.concatenate([np.r_[source.data[q], source.data[q][::-1]] for q in parts]),
                    np.concatenate(
                        [np.r_[source.indices[q], source.indices[q][::-1]] for q in parts]
                    ),
                    np.r_[0, np.cumsum(2 * np.diff(source.indptr))],
                ),
                shape=(n, n),
            )
            assert not source.has_canonical_format
        at_rows, at_cols = pattern.nonzero()
        expected = np.zeros(0)
        if at_rows.size:
            expected = np.asarray(source[at_rows, at_cols]).reshape(-1)
        got = mmsr._entries_at(
            pattern.indptr,
            pattern.indices,
            source.indptr,
            source.indices,
            np.asarray(source.data, dtype=float),
            n,
        )
        assert _same_bits(got, expected)


# --- whole fits -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["rte", "temp", "wsd"])
def test_fit_matches_the_reference_on_datasets(name: str) -> None:
    _SEEN.clear()
    _assert_same_fit(load_dataset(name))
    assert _SEEN["F > 0"] > 0
    if name == "temp":  # a worker's value reaches 0 there
        assert _SEEN["non-finite ratio"] > 0


@pytest.mark.parametrize("n_classes", [2, 3])
def test_fit_matches_the_reference_on_synthetic_data(n_classes: int) -> None:
    _SEEN.clear()
    fitted = _assert_same_fit(_design(500, 10, 40, n_classes, seed=n_classes))
    assert _SEEN["F > 0"] > 0 and fitted.n_iter_ > 5


def test_fit_matches_the_reference_on_sparse_designs() -> None:
    """2–3 labels per item: F = 0 (a plain mean), divergence (the last finite iterate is
    kept), lone zeros; every case must be met at least once."""
    _SEEN.clear()
    diverged = 0
    for seed in range(12, 28):
        for per_item, shape, accuracy in [
            (2, (40, 30), (0.3, 0.9)),
            (2, (30, 40), (0.5, 0.7)),
            (3, (100, 80), (0.2, 1.0)),
        ]:
            data = _design(shape[0], per_item, shape[1], 2, seed, accuracy)
            diverged += _diverged(_assert_same_fit(data, n_iter=300))
    assert diverged > 0
    assert _SEEN["F = 0"] > 0 and _SEEN["lone zero"] > 0


def test_fit_matches_the_reference_with_zero_values_and_ties() -> None:
    """Few common tasks per pair and coin-flip workers: many C_ij = 0 and equal ratios, and
    workers whose value becomes 0, so that ratios are ±inf or NaN."""
    _SEEN.clear()
    for seed in range(20, 36):
        for shape in [(12, 3, 6), (20, 4, 8), (30, 2, 10)]:
            data = _design(shape[0], shape[1], shape[2], 2, seed, (0.5, 0.5))
            _assert_same_fit(data, n_iter=300)
    assert _SEEN["non-finite ratio"] > 0 and _SEEN["F > 0"] > 0 and _SEEN["F = 0"] > 0


def test_workers_who_never_share_an_item_get_skill_zero_not_an_error() -> None:
    """Every item labelled once, each by its own worker: no co-worker pairs, so the
    covariance has no entry and nothing is known of any worker — skills 0 (accuracy 1/K),
    uniform probabilities; the first implementation raised a ValueError here."""
    data = LabelData(
        items=np.arange(4, dtype=np.int64),
        workers=np.arange(4, dtype=np.int64),
        labels=np.array([0, 1, 1, 0], dtype=np.int64),
        item_ids=np.array(["a", "b", "c", "d"], dtype=object),
        worker_ids=np.array(["w", "x", "y", "z"], dtype=object),
        classes=("0", "1"),
    )
    model = MMSR()
    probas = model.fit_predict_proba(data)
    assert np.array_equal(model.skills_, np.zeros(4))
    assert np.allclose(probas, 0.5)
