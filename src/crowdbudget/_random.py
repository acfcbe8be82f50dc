"""Explicit randomness: every random draw comes from a passed ``np.random.Generator``.

Integer seeds are accepted only at the top (CLI, experiment runner, ``reset(seed=...)``) and
turned into generators here; child streams come from ``SeedSequence.spawn`` so that replications
are independent and reproducible whatever the order or process they run in.
"""

from __future__ import annotations

import numpy as np

SeedLike = int | np.random.SeedSequence | np.random.Generator | None


def as_generator(seed: SeedLike) -> np.random.Generator:
    """Return a ``Generator``: passed through, or built from an int / ``SeedSequence`` / None."""
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def as_seed_sequence(seed: int | np.random.SeedSequence | None) -> np.random.SeedSequence:
    """Return a ``SeedSequence`` for ``seed`` (a fresh OS-entropy one for None)."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    return np.random.SeedSequence(seed)


def spawn_seeds(seed: int | np.random.SeedSequence | None, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent child seed sequences of ``seed``."""
    return as_seed_sequence(seed).spawn(n)


def child_seed(seed: int | np.random.SeedSequence | None, *keys: int) -> np.random.SeedSequence:
    """The child of ``seed`` at ``keys``, without side effects.

    ``SeedSequence.spawn`` counts the children it has handed out, so spawning twice from the
    same object gives different children — a replication run twice in one process would then
    see two different worlds. This derives the child from the entropy and spawn key alone:
    the same ``(seed, keys)`` always gives the same stream, in any process, in any order.
    """
    seq = as_seed_sequence(seed)
    return np.random.SeedSequence(seq.entropy, spawn_key=(*seq.spawn_key, *keys))
