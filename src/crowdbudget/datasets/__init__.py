"""Crowd label data: the :class:`LabelData` table, CSV reading, bundled and external sets."""

from crowdbudget.datasets.loaders import (
    BUNDLED,
    EXTERNAL,
    FEATURE_SETS,
    FeatureData,
    LabelData,
    default_data_dir,
    from_frame,
    list_datasets,
    load_dataset,
    load_feature_set,
    read_labels_csv,
)

__all__ = [
    "BUNDLED",
    "EXTERNAL",
    "FEATURE_SETS",
    "FeatureData",
    "LabelData",
    "default_data_dir",
    "from_frame",
    "list_datasets",
    "load_dataset",
    "load_feature_set",
    "read_labels_csv",
]
