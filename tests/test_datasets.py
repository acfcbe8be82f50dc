"""Data loading: bundled copies are byte-identical to shared/data, CSV errors are one line."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crowdbudget.datasets import LabelData, from_frame, list_datasets, load_dataset
from crowdbudget.datasets.loaders import BUNDLED_SHA256, bundled_files, file_sha256, read_labels_csv
from crowdbudget.exceptions import DataFormatError

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.mark.parametrize("key", sorted(BUNDLED_SHA256))
def test_bundled_checksums(key: str) -> None:
    name, part = key.split("/")
    packaged = bundled_files(name)[part.removesuffix(".csv")]
    assert file_sha256(packaged) == BUNDLED_SHA256[key]
    if SHARED.is_dir():  # the reference copy (present in CI and in development)
        assert file_sha256(SHARED / key) == BUNDLED_SHA256[key]


def test_rte_counts_match_the_paper() -> None:
    data = load_dataset("rte")
    assert (data.n_items, data.n_workers, data.n_labels, data.n_classes) == (800, 164, 8000, 2)
    assert data.classes == ("0", "1")
    assert np.all(np.bincount(data.items) == 10)
    assert data.gold is not None and np.all(data.gold >= 0)
    assert data.contexts is not None and sum(c == ("CD",) for c in data.contexts) == 150


def test_round_trip_through_crowd_kit_frame() -> None:
    data = load_dataset("wsd")
    again = from_frame(data.to_frame(), data.gold_series())
    assert again.n_labels == data.n_labels and again.classes == data.classes
    np.testing.assert_array_equal(again.labels, data.labels)
    np.testing.assert_array_equal(again.gold, data.gold)


def test_numeric_class_order() -> None:
    df = pd.DataFrame({"task": ["a", "b", "c"], "worker": ["w"] * 3, "label": ["10", "2", "1"]})
    assert from_frame(df).classes == ("1", "2", "10")


def test_list_datasets_names_bundled_sets() -> None:
    rows = {r["name"]: r for r in list_datasets()}
    assert rows["rte"]["available"] and rows["rte"]["bundled"]
    assert "millionaire" in rows


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/data is not beside this checkout")
def test_external_dataset_from_shared_dir() -> None:
    data = load_dataset("millionaire", data_dir=SHARED)
    assert (data.n_items, data.n_labels, data.n_classes) == (1891, 214658, 4)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("task,worker\n1,a\n", "lacks column(s) label"),
        ("task,worker,label\n1,a,\n", "empty 'label' on line 2"),
        ("task,worker,label\n", "has no rows"),
        ("", "not a readable CSV"),
    ],
)
def test_malformed_csv_is_one_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(content)
    with pytest.raises(DataFormatError, match=re.escape(message)) as err:
        read_labels_csv(path)
    assert "\n" not in str(err.value)


def test_gold_label_outside_classes(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("task,worker,label\n1,a,0\n")
    (tmp_path / "g.csv").write_text("task,label\n1,7\n")
    with pytest.raises(DataFormatError, match=r"gold label .* is not a class"):
        read_labels_csv(tmp_path / "l.csv", tmp_path / "g.csv", classes=("0", "1"))


def test_missing_file_and_unknown_dataset(tmp_path: Path) -> None:
    with pytest.raises(DataFormatError, match="does not exist"):
        read_labels_csv(tmp_path / "nope.csv")
    with pytest.raises(DataFormatError, match="unknown data set 'nope'; known: rte"):
        load_dataset("nope")


def test_label_data_is_integer_coded() -> None:
    data = load_dataset("temp")
    assert isinstance(data, LabelData)
    for arr in (data.items, data.workers, data.labels):
        assert arr.dtype == np.int64
    assert data.label_counts().sum() == data.n_labels
