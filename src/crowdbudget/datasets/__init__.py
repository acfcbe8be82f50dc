"""Crowd label data: the :class:`LabelData` table, CSV reading, bundled and external sets."""

from crowdbudget.datasets.loaders import (
    BUNDLED,
    EXTERNAL,
    LabelData,
    default_data_dir,
    from_frame,
    list_datasets,
    load_dataset,
    read_labels_csv,
)

__all__ = [
    "BUNDLED",
    "EXTERNAL",
    "LabelData",
    "default_data_dir",
    "from_frame",
    "list_datasets",
    "load_dataset",
    "read_labels_csv",
]
