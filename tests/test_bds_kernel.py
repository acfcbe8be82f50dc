"""The compiled variational iteration of ``bds-ev`` on two classes gives the NumPy loop's bits
(:mod:`crowdbudget.aggregation._bds_kernel`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

from crowdbudget.aggregation import BayesianDawidSkene, make_aggregator
from crowdbudget.datasets import load_dataset
from crowdbudget.labels import LabelData

#: the class-blind verdicts: unguarded and read blind only on a worker's own evidence
BLIND = ("bds-ev-blind", "bds-ev-blind-own")

FITTED = ("probas_", "labels_", "errors_", "symmetric_", "priors_", "confusion_prior_")


@contextmanager
def numpy_loop() -> Iterator[None]:
    """The NumPy loop of ``BayesianDawidSkene._variational`` instead of the compiled one."""
    BayesianDawidSkene._compiled_iteration = False
    try:
        yield
    finally:
        BayesianDawidSkene._compiled_iteration = True


def assert_same_fit(
    spec: str, data: LabelData, known: dict[int, int] | None = None, reference_spec: str = ""
) -> int:
    """Fit ``spec`` on ``data`` compiled and by NumPy (``reference_spec``, default the same
    spec); every fitted number must be the same bits. Returns the iterations run."""
    compiled = make_aggregator(spec).fit(data, known_truth=known)
    with numpy_loop():
        reference = make_aggregator(reference_spec or spec).fit(data, known_truth=known)
    for name in FITTED:
        got, want = np.asarray(getattr(compiled, name)), np.asarray(getattr(reference, name))
        assert got.shape == want.shape, name
        assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), name
    for name in ("symmetric_share_", "n_iter_", "temperature_"):
        assert getattr(compiled, name) == getattr(reference, name), name
    assert isinstance(compiled, BayesianDawidSkene)
    return int(compiled.n_iter_)


def subsample(data: LabelData, n_labels: int, seed: int) -> LabelData:
    """``n_labels`` of ``data``'s labels drawn without replacement (a campaign's log)."""
    keep = np.sort(np.random.default_rng(seed).choice(data.n_labels, n_labels, replace=False))
    return data.labels_subset(keep)


@pytest.mark.parametrize("dataset", ["rte", "temp"])
@pytest.mark.parametrize("n_labels", [400, 3200, None])
def test_the_compiled_iteration_gives_the_numpy_bits(dataset: str, n_labels: int | None) -> None:
    data = load_dataset(dataset)
    if n_labels is not None:
        data = subsample(data, min(n_labels, data.n_labels), seed=n_labels)
    assert assert_same_fit("bds-ev", data) > 2


@pytest.mark.parametrize(
    "spec",
    [
        "bds-ev:temperature=auto",
        "bds-ev:lone-labels=count",
        "bds-ev:pool-below=3",
        "bds-ev:prior-form=confusion",
        "bds-ev:tol=1e-9:n-iter=500",
        "bds:asymmetry=evidence:prior-floor=0",
    ],
)
def test_every_variant_on_two_classes(spec: str) -> None:
    data = subsample(load_dataset("rte"), 2000, seed=7)
    assert_same_fit(spec, data)


def test_known_truth_and_lone_labels() -> None:
    data = subsample(load_dataset("rte"), 900, seed=3)  # most items with one label or none
    gold = np.asarray(data.gold)
    known = {int(i): int(gold[i]) for i in np.flatnonzero(gold >= 0)[:40]}
    assert_same_fit("bds-ev", data, known)
    assert_same_fit("bds-ev", data)


def test_a_crowd_with_nothing_to_check_keeps_the_numpy_path() -> None:
    # one label per item: nothing partnered, so the free workers (not the evidence) — both
    # switches give the same fit, as the compiled path is not taken
    data = load_dataset("rte")
    first = np.unique(data.items, return_index=True)[1]
    one_each = LabelData(
        items=data.items[first],
        workers=data.workers[first],
        labels=data.labels[first],
        item_ids=data.item_ids,
        worker_ids=data.worker_ids,
        classes=data.classes,
    )
    assert_same_fit("bds-ev", one_each)


def test_the_check_can_fail() -> None:
    # a class prior one part in 10^9 larger moves the fit by far less than the tolerance,
    # but not by zero bits: the comparison sees it
    data = subsample(load_dataset("rte"), 1500, seed=5)
    with pytest.raises(AssertionError):
        assert_same_fit("bds-ev", data, reference_spec="bds-ev:class-prior=1.000000001")


def test_the_default_verdict_takes_the_compiled_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bds-ev`` on two classes runs the compiled iterations (the replays' verdict: a lost
    condition would cost the default its speed, not its bits); more classes keep NumPy's."""
    from crowdbudget.aggregation import _bds_kernel

    calls: list[int] = []
    compiled = _bds_kernel.evidence_iterations

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return compiled(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_bds_kernel, "evidence_iterations", counted)
    make_aggregator("bds-ev").fit(subsample(load_dataset("rte"), 800, seed=2))
    assert calls == [1]
    make_aggregator("bds-ev").fit(load_dataset("wsd"))  # three classes
    assert calls == [1]


@pytest.mark.parametrize("verdict", BLIND)
@pytest.mark.parametrize("dataset", ["rte", "temp"])
@pytest.mark.parametrize("n_labels", [400, 3200, None])
def test_the_blind_verdict_compiled_gives_the_numpy_bits(
    dataset: str, n_labels: int | None, verdict: str
) -> None:
    data = load_dataset(dataset)
    if n_labels is not None:
        data = subsample(data, min(n_labels, data.n_labels), seed=n_labels)
    assert assert_same_fit(verdict, data) > 2


@pytest.mark.parametrize(
    "spec",
    [
        "bds-ev-blind:temperature=auto",
        "bds-ev-blind:lone-labels=count",
        "bds-ev-blind:pool-below=3",
        "bds-ev-blind:tol=1e-9:n-iter=500",
        "bds-ev-blind-own:temperature=auto",
        "bds-ev-blind-own:lone-labels=count",
        "bds-ev-blind-own:pool-below=3",
    ],
)
def test_every_blind_variant_on_two_classes(spec: str) -> None:
    data = subsample(load_dataset("rte"), 2000, seed=7)
    assert_same_fit(spec, data)


@pytest.mark.parametrize("verdict", BLIND)
def test_blind_known_truth(verdict: str) -> None:
    data = subsample(load_dataset("rte"), 900, seed=3)
    gold = np.asarray(data.gold)
    known = {int(i): int(gold[i]) for i in np.flatnonzero(gold >= 0)[:40]}
    assert_same_fit(verdict, data, known)


@pytest.mark.parametrize(
    "name",
    [
        "binary-50-50-one-coin-spam50-k3",
        "binary-95-5-two-coin-spam25-k5",
        "binary-70-30-two-coin-spam50-k10",
        "binary-88-12-one-coin-spam0-k3",
    ],
)
@pytest.mark.parametrize("verdict", BLIND)
def test_the_blind_kernel_on_spammer_cells(name: str, verdict: str) -> None:
    """Cells of the held-out bed (spammers answering uniformly, two-coin workers, 95/5)."""
    from crowdbudget.experiments.stress import full_bed, make_crowd

    cells = {cell.name: cell for cell in full_bed()}
    assert_same_fit(verdict, make_crowd(cells[name], 1))


@pytest.mark.parametrize("biased", [0.2, 0.4])
def test_the_blind_kernel_with_one_class_workers(biased: float) -> None:
    """Binary crowds with workers who give one class always (the blind kind's own case)."""
    from crowdbudget.experiments.stress import StressCell, make_crowd

    cell = StressCell(
        f"binary-80-20-biased{round(100 * biased)}-k5",
        (0.8, 0.2),
        5,
        60,
        spammer_share=0.1,
        biased_share=biased,
        hard_share=0.2,
        n_items=400,
    )
    data = make_crowd(cell, 3)
    assert assert_same_fit("bds-ev-blind", data) > 2
    blind = make_aggregator("bds-ev-blind").fit(data)
    assert isinstance(blind, BayesianDawidSkene)
    assert blind.symmetric_share_ < 1.0  # the weights, not the two-kind share
    # the guarded kind: the same bits compiled, and the guard changes the fit (it is used)
    assert assert_same_fit("bds-ev-blind-own", data) > 2
    own = make_aggregator("bds-ev-blind-own").fit(data)
    assert not np.array_equal(own.probas_, blind.probas_)


def test_the_blind_check_can_fail() -> None:
    data = subsample(load_dataset("rte"), 1500, seed=5)
    with pytest.raises(AssertionError):
        assert_same_fit("bds-ev-blind", data, reference_spec="bds-ev-blind:class-prior=1.000000001")
    with pytest.raises(AssertionError):
        assert_same_fit(
            "bds-ev-blind-own", data, reference_spec="bds-ev-blind-own:class-prior=1.000000001"
        )


def test_the_blind_verdict_takes_the_compiled_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """``bds-ev-blind`` on two classes runs the compiled iterations; more classes NumPy's."""
    from crowdbudget.aggregation import _bds_kernel

    calls: list[int] = []
    compiled = _bds_kernel.blind_iterations

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return compiled(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_bds_kernel, "blind_iterations", counted)
    make_aggregator("bds-ev-blind").fit(subsample(load_dataset("rte"), 800, seed=2))
    assert calls == [1]
    make_aggregator("bds-ev-blind").fit(load_dataset("wsd"))  # three classes
    assert calls == [1]
    make_aggregator("bds-ev-blind-own").fit(subsample(load_dataset("rte"), 800, seed=2))
    assert calls == [1, 1]


@pytest.mark.parametrize("verdict", BLIND)
def test_the_blind_kernel_keeps_unmoved_workers_as_numpy_does(
    verdict: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On temp (all labels) some workers' counts stop moving before the fit ends: the NumPy
    loop keeps their evidence (``worker_blind.moved_workers``) and the compiled one must
    keep the same workers' (the same bits)."""
    from crowdbudget.aggregation import worker_blind

    kept: list[int] = []
    moved_workers = worker_blind.moved_workers

    def counted(*args: object) -> object:
        mask = moved_workers(*args)  # type: ignore[arg-type]
        if mask is not None:
            kept.append(int((~mask).sum()))
        return mask

    monkeypatch.setattr(worker_blind, "moved_workers", counted)
    assert assert_same_fit(verdict, load_dataset("temp")) > 2
    assert sum(kept) > 0  # the NumPy loop kept some workers' evidence


@pytest.mark.parametrize("n_labels", [800, 3200])
def test_the_form_chosen_by_the_evidence_compiled(n_labels: int) -> None:
    """``bds-ev-blind-form`` fits both forms by the compiled iteration: the NumPy loop's bits,
    and the same form chosen."""
    data = subsample(load_dataset("rte"), n_labels, seed=n_labels + 1)
    assert_same_fit("bds-ev-blind-form", data)
    compiled = make_aggregator("bds-ev-blind-form").fit(data)
    with numpy_loop():
        reference = make_aggregator("bds-ev-blind-form").fit(data)
    assert isinstance(compiled, BayesianDawidSkene) and isinstance(reference, BayesianDawidSkene)
    assert compiled.prior_form_ == reference.prior_form_
    assert compiled.form_bounds_ == reference.form_bounds_


def test_the_one_class_recheck_compiled() -> None:
    """``bds-ev-blind-recheck`` on a few-worker crowd that the one-coin fit reads as one
    class (both fits made): the NumPy loop's bits."""
    from crowdbudget.experiments.stress import StressCell, make_crowd

    cell = StressCell("binary-80-20-8workers-biased-k2", (0.8, 0.2), 2, 8, 0.5, biased_share=0.19)
    data = make_crowd(cell, 0)
    assert assert_same_fit("bds-ev-blind-recheck", data) > 2
    with numpy_loop():
        reference = make_aggregator("bds-ev-blind-recheck").fit(data)
    assert isinstance(reference, BayesianDawidSkene) and reference.prior_form_ == "confusion"
