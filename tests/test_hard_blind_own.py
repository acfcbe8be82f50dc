"""``bds-hard-blind-own``: the item-difficulty mixture of ``bds-hard``
(aggregation/item_difficulty.py) on ``bds-ev-blind-own``'s workers — its fall-backs to
``bds-ev-blind-own`` bit for bit, the blind workers it keeps where ``bds-hard`` (on
``bds-ev``'s workers) collapses, and the mixture it still takes on correlated errors
(docs/stress-bed.md, "the verdict table under the new default")."""

from __future__ import annotations

import numpy as np

from crowdbudget.aggregation import make_aggregator
from crowdbudget.aggregation.base import Aggregator
from crowdbudget.aggregation.item_difficulty import ItemDifficultyDawidSkene
from crowdbudget.datasets import load_dataset
from crowdbudget.datasets.loaders import LabelData
from crowdbudget.experiments.stress import DEFAULT_BED, full_bed, make_crowd


def build(text: str) -> ItemDifficultyDawidSkene:
    model = make_aggregator(text)
    assert isinstance(model, ItemDifficultyDawidSkene)
    return model


def accuracy(model: Aggregator, data: LabelData) -> float:
    assert data.gold is not None
    return float(np.mean(model.probas_.argmax(axis=1) == data.gold))


def correlated_crowd(seed: int, n_items: int = 600, n_workers: int = 30, k: int = 5) -> LabelData:
    """A binary crowd (60 % class 1) of accurate symmetric workers (0.88–0.98) in which a
    fifth of the class-1 items makes every worker say 0 with probability 0.45 (errors
    correlated across workers); ``extra["misleading"]`` marks those items."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n_items) < 0.6).astype(np.int64)
    misleading = (truth == 1) & (rng.random(n_items) < 0.2)
    items = np.repeat(np.arange(n_items), k)
    workers = np.concatenate([rng.choice(n_workers, k, replace=False) for _ in range(n_items)])
    skill = rng.uniform(0.88, 0.98, n_workers)
    labels = np.where(rng.random(items.size) < skill[workers], truth[items], 1 - truth[items])
    labels = np.where(misleading[items], (rng.random(items.size) >= 0.45).astype(np.int64), labels)
    return LabelData(
        items=items,
        workers=workers,
        labels=labels.astype(np.int64),
        item_ids=np.array([f"i{i}" for i in range(n_items)], dtype=object),
        worker_ids=np.array([f"w{j}" for j in range(n_workers)], dtype=object),
        classes=("0", "1"),
        gold=truth,
        extra={"misleading": misleading},
    )


def log_loss(model: Aggregator, data: LabelData) -> float:
    assert data.gold is not None
    probas = model.probas_
    return float(-np.mean(np.log(np.maximum(probas[np.arange(data.n_items), data.gold], 1e-300))))


def test_the_id_is_bds_hard_on_the_guarded_blind_workers() -> None:
    model = build("bds-hard-blind-own")
    assert model.asymmetry == "evidence-blind-own"
    assert model.difficulty == "evidence"
    assert build("bds-hard").asymmetry == "evidence"


def test_without_the_mixture_it_is_bds_ev_blind_own_bit_for_bit() -> None:
    # difficulty=none, and the gate's refusal on crowds of independent workers
    for cell in (
        c for c in DEFAULT_BED if c.name in ("binary-65-35-biased30-k5", "class3-spam30-k5")
    ):
        data = make_crowd(cell, 0)
        reference = make_aggregator("bds-ev-blind-own").fit(data).probas_
        plain = build("bds-hard-blind-own:difficulty=none").fit(data)
        assert np.array_equal(plain.probas_, reference)
        gated = build("bds-hard-blind-own").fit(data)
        assert gated.difficulty_ == "none" and gated.evidence_gate_
        assert np.array_equal(gated.probas_, reference)
    rte = load_dataset("rte")
    fit = build("bds-hard-blind-own").fit(rte)
    assert fit.difficulty_ == "none"
    assert np.array_equal(fit.probas_, make_aggregator("bds-ev-blind-own").fit(rte).probas_)


def test_it_keeps_the_blind_workers_where_bds_hard_collapses() -> None:
    # the held-out collapse (ten classes, a fifth of the workers one-class): bds-hard reads it
    # with bds-ev's workers (0.726 on this draw), the composition as bds-ev-blind-own (0.778)
    cells = full_bed()
    names = [c.name for c in cells]
    index = names.index("class10-confusion-biased20-k5")
    seed = np.random.SeedSequence([0, index]).spawn(2)[0]
    data = make_crowd(cells[index], seed)
    own = accuracy(make_aggregator("bds-ev-blind-own").fit(data), data)
    composed = build("bds-hard-blind-own").fit(data)
    hard = build("bds-hard").fit(data)
    assert composed.difficulty_ == "none"
    assert np.array_equal(composed.probas_, make_aggregator("bds-ev-blind-own").fit(data).probas_)
    assert accuracy(composed, data) == own
    assert accuracy(composed, data) > accuracy(hard, data) + 0.03


def test_it_takes_the_mixture_on_correlated_errors() -> None:
    # seed 0: bds-hard takes the mixture (2.2 nats past BIC's charge); no worker here is
    # class-blind, so the composition reads as bds-hard (to rounding: NumPy against the
    # compiled two-class iteration)
    data = correlated_crowd(0)
    misleading = data.extra["misleading"]
    composed = build("bds-hard-blind-own").fit(data)
    own = make_aggregator("bds-ev-blind-own").fit(data)
    assert composed.difficulty_ == "mixture" and composed.evidence_gain_ > 0
    assert composed.hard_[misleading].mean() > 3 * composed.hard_[~misleading].mean()
    assert accuracy(composed, data) >= accuracy(own, data)
    assert log_loss(composed, data) < log_loss(own, data) - 0.05
    hard = build("bds-hard").fit(data)
    assert np.max(np.abs(composed.probas_ - hard.probas_)) < 1e-9
