"""The BBTA figures' UCI worlds share one k-means per set (experiments/papers/zhang2015.py):
the same world as ``ContextualWorkerEnvironment.from_uci``, computed once."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.experiments.papers import zhang2015
from crowdbudget.simulation.contextual import ContextualWorkerEnvironment


def test_shared_world_is_from_ucis_and_its_contexts_are_computed_once() -> None:
    zhang2015._uci_labels_and_contexts.cache_clear()
    shared = [zhang2015._uci_world("ionosphere", model) for model in zhang2015.WORKER_MODELS]
    assert zhang2015._uci_labels_and_contexts.cache_info().misses == 1
    for world, model in zip(shared, zhang2015.WORKER_MODELS, strict=True):
        direct = ContextualWorkerEnvironment.from_uci("ionosphere", model)
        assert np.array_equal(world.contexts, direct.contexts)
        assert np.array_equal(world.true_labels, direct.true_labels)
        assert (world.n_workers, world.n_contexts) == (direct.n_workers, direct.n_contexts)
    with pytest.raises(ValueError, match="read-only"):
        shared[0].contexts[0] = 1  # the shared arrays cannot be changed by one world
