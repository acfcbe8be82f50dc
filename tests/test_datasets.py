"""Data loading: every bundled file matches its recorded checksum, every set loads offline with
the data README's counts, validation errors are one line naming the row."""

from __future__ import annotations

import gzip
import re
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crowdbudget.datasets import (
    BUNDLED,
    FEATURE_SETS,
    LabelData,
    from_frame,
    list_datasets,
    load_dataset,
    load_feature_set,
)
from crowdbudget.datasets.loaders import BUNDLED_SHA256, bundled_files, file_sha256, read_labels_csv
from crowdbudget.exceptions import DataFormatError


def test_every_bundled_file_has_a_checksum_and_matches_it() -> None:
    """Each packaged file is listed in BUNDLED_SHA256 and its uncompressed bytes digest to the
    recorded value (the digest of the source copy the data README describes)."""
    packaged = {
        f"{name}/{part}.csv": entry
        for name in BUNDLED + FEATURE_SETS
        for part, entry in bundled_files(name).items()
    }
    assert set(packaged) == set(BUNDLED_SHA256)
    for key, entry in packaged.items():
        assert file_sha256(entry) == BUNDLED_SHA256[key], key


def test_checksum_detects_a_changed_file(tmp_path: Path) -> None:
    original = bundled_files("wsd")["gold"]
    copy = tmp_path / "gold.csv.gz"
    copy.write_bytes(original.read_bytes())
    assert file_sha256(copy) == BUNDLED_SHA256["wsd/gold.csv"]
    with gzip.open(copy, "rb") as fh:
        content = fh.read()
    with gzip.open(copy, "wb") as fh:
        fh.write(content.replace(b",1\n", b",2\n", 1))
    assert file_sha256(copy) != BUNDLED_SHA256["wsd/gold.csv"]


def test_package_data_has_a_provenance_note_per_set() -> None:
    note = resources.files("crowdbudget.datasets").joinpath("data", "README.md").read_text()
    for name in BUNDLED + FEATURE_SETS:
        section = f"**{name}**" in note or any(
            line.startswith("### ") and name in line for line in note.splitlines()
        )
        assert section, name
    assert note.count("Licence / terms") >= 8  # one per source section


# counts from the data README (tasks with labels, labels, classes, gold tasks with labels)
COUNTS = {
    "rte": (800, 8000, 2, 800),
    "temp": (462, 4620, 2, 462),
    "wsd": (177, 1770, 3, 177),
    "millionaire": (1891, 214658, 4, 1891),
    "fact_eval": (42624, 214960, 3, 576),
    "trec": (19033, 88385, 2, 2275),
    "adult": (11040, 92721, 4, 333),
}


@pytest.mark.parametrize("name", BUNDLED)
def test_every_bundled_set_loads_offline_with_the_readme_counts(name: str) -> None:
    data = load_dataset(name)
    assert (data.n_items, data.n_labels, data.n_classes, int(data.gold_mask.sum())) == COUNTS[name]


def test_adult_reports_its_unlabeled_gold_and_keeps_repeats_by_declaration() -> None:
    data = load_dataset("adult")
    assert data.extra["gold_without_labels"] == 1517 - 333
    first = load_dataset("adult", duplicates="first")
    assert first.n_labels == 92721 - 2922
    with pytest.raises(DataFormatError, match=r"more than once .*--duplicates keep\|first\|last"):
        load_dataset("adult", duplicates="error")


@pytest.mark.parametrize(
    ("header", "hint"),
    [
        ("task_id,worker_id,answer", "rename task_id→task, worker_id→worker, answer→label"),
        ("HITId,WorkerId,Answer.topic", "rename hitid→task, workerid→worker, answer.topic→label"),
        ("INPUT:url,OUTPUT:result,ASSIGNMENT:worker_id", "rename input:url→task"),
        ("task\tworker\tlabel", "the header is tab-separated: save the file with commas"),
    ],
)
def test_a_missing_column_error_names_the_columns_to_rename(
    tmp_path: Path, header: str, hint: str
) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(header + "\n" + ",".join(["a"] * 3) + "\n")
    with pytest.raises(DataFormatError, match="lacks column") as caught:
        read_labels_csv(path)
    assert str(caught.value).endswith(hint) or hint + "," in str(caught.value)


def test_a_user_copy_of_a_bundled_set_takes_its_declared_duplicates(tmp_path: Path) -> None:
    """The source copy of fact_eval in a data folder is fact_eval (its repeats are kept); one
    byte changed and it is a set of the user's own, whose repeats are an error."""
    folder = tmp_path / "fact_eval"
    folder.mkdir()
    with bundled_files("fact_eval")["labels"].open("rb") as fh:
        raw = gzip.decompress(fh.read())
    (folder / "labels.csv").write_bytes(raw)
    copy = load_dataset("fact_eval", data_dir=tmp_path)
    assert copy.n_labels == load_dataset("fact_eval").n_labels
    (folder / "labels.csv").write_bytes(raw + b"\n")
    with pytest.raises(DataFormatError, match="more than once"):
        load_dataset("fact_eval", data_dir=tmp_path)
    assert load_dataset("fact_eval", data_dir=tmp_path, duplicates="keep").n_labels == copy.n_labels


@pytest.mark.parametrize("name", FEATURE_SETS)
def test_every_feature_set_loads_offline(name: str) -> None:
    data = load_feature_set(name)
    assert data.features.shape[0] == data.gold.shape[0] == data.n_items
    assert set(np.unique(data.gold)) == {0, 1}
    if name == "splice":
        assert data.split is not None
        assert (data.split == "train").sum() == 1000 and (data.split == "test").sum() == 2175


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


def test_list_datasets_names_every_set_as_available() -> None:
    rows = {r["name"]: r for r in list_datasets()}
    assert set(rows) == set(BUNDLED + FEATURE_SETS)
    assert all(r["available"] and r["bundled"] for r in rows.values())


def _write_set(root: Path, name: str, labels: str, gold: str | None = None) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "labels.csv").write_text(labels)
    if gold is not None:
        (folder / "gold.csv").write_text(gold)


def test_user_data_dir_adds_and_overrides_sets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_set(tmp_path, "mine", "task,worker,label\na,w1,x\nb,w1,y\n", "task,label\na,x\nb,y\n")
    _write_set(tmp_path, "rte", "task,worker,label\na,w1,0\n", "task,label\na,0\n")
    monkeypatch.delenv("CROWDBUDGET_DATA_DIR", raising=False)
    with pytest.raises(DataFormatError, match=r"unknown data set 'mine'.*--data-dir DIR"):
        load_dataset("mine")
    assert load_dataset("mine", data_dir=tmp_path).n_labels == 2
    assert load_dataset("rte", data_dir=tmp_path).n_labels == 1  # the user's set wins
    monkeypatch.setenv("CROWDBUDGET_DATA_DIR", str(tmp_path))
    assert load_dataset("mine").classes == ("x", "y")
    rows = {r["name"]: r for r in list_datasets()}
    assert rows["mine"]["location"] == str(tmp_path / "mine")
    assert rows["rte"]["location"] == str(tmp_path / "rte") and not rows["rte"]["bundled"]


def test_duplicate_pairs_are_an_error_naming_the_row_unless_a_policy_is_chosen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("task,worker,label\na,w1,0\nb,w1,1\na,w1,1\na,w2,0\n")
    with pytest.raises(DataFormatError, match=r"line 4: worker 'w1' labeled task 'a' more than"):
        read_labels_csv(path)
    keep = read_labels_csv(path, duplicates="keep")
    first = read_labels_csv(path, duplicates="first")
    last = read_labels_csv(path, duplicates="last")
    assert (keep.n_labels, first.n_labels, last.n_labels) == (4, 3, 3)
    # (a, w1): the first row says 0, the last 1; (a, w2) says 0
    a_first = first.labels[first.items == list(first.item_ids).index("a")]
    a_last = last.labels[last.items == list(last.item_ids).index("a")]
    assert sorted(a_first.tolist()) == [0, 0] and sorted(a_last.tolist()) == [0, 1]
    assert first.extra["duplicates_dropped"] == 1
    with pytest.raises(DataFormatError, match="unknown duplicates policy 'some'"):
        read_labels_csv(path, duplicates="some")


def test_gold_written_as_other_numbers_is_named(tmp_path: Path) -> None:
    # labels 0/1 and gold 0.0/1.0: the same classes in two spellings, not two more classes
    (tmp_path / "l.csv").write_text("task,worker,label\n1,a,1\n2,a,0\n")
    (tmp_path / "g.csv").write_text("task,label\n1,1.0\n2,0.0\n")
    with pytest.raises(DataFormatError) as err:
        read_labels_csv(tmp_path / "l.csv", tmp_path / "g.csv")
    message = str(err.value)
    assert "label '1' and the gold's class '1.0' are the same number written two ways" in message
    assert "--classes" not in message


def test_a_label_outside_the_gold_classes_names_its_row(tmp_path: Path) -> None:
    (tmp_path / "l.csv").write_text("task,worker,label\n1,a,cat\n2,a,dog\n2,b,bird\n")
    (tmp_path / "g.csv").write_text("task,label\n1,cat\n2,dog\n3,cat\n")
    with pytest.raises(DataFormatError) as err:
        read_labels_csv(tmp_path / "l.csv", tmp_path / "g.csv")
    message = str(err.value)
    assert "line 4: label 'bird' is not one of the gold's classes (cat, dog)" in message
    assert "--classes bird,cat,dog" in message
    data = read_labels_csv(tmp_path / "l.csv", tmp_path / "g.csv", classes=("cat", "dog", "bird"))
    assert data.classes == ("cat", "dog", "bird") and data.n_labels == 3
    assert data.extra["gold_without_labels"] == 1
    assert data.extra["gold_without_labels_examples"] == ["3"]


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
    with pytest.raises(DataFormatError, match="unknown data set 'nope'; bundled: rte"):
        load_dataset("nope")


def test_label_data_is_integer_coded() -> None:
    data = load_dataset("temp")
    assert isinstance(data, LabelData)
    for arr in (data.items, data.workers, data.labels):
        assert arr.dtype == np.int64
    assert data.label_counts().sum() == data.n_labels
