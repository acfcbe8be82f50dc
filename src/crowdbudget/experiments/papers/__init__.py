"""One module per reproduced paper; every figure or table is an entry of the one registry.

:data:`crowdbudget.registry.REPRODUCTIONS` holds them (:mod:`.builtin` registers the built-in
ones: paper, figure, replications, typical times, parameter table). :data:`REPRODUCTIONS` here
is the same table read as a mapping ``id -> ReproductionSpec`` (``.run``, ``.title``,
``.reproduction_id`` as before), and :data:`TYPICAL_TIMES` its ``(--quick, full)`` times.

To add a reproduction: write ``f(*, seed, quick, n_jobs, progress) -> ReproductionResult`` in a
paper module and add one entry in :mod:`.builtin`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from crowdbudget.experiments.papers.base import Reproduction, ReproductionResult
from crowdbudget.experiments.papers.builtin import Paper, ReproductionSpec
from crowdbudget.registry import REPRODUCTIONS as _REGISTRY


class _Reproductions(Mapping[str, ReproductionSpec]):
    """The registered reproductions by id (a live view of the registry)."""

    def _entries(self) -> dict[str, ReproductionSpec]:
        return {
            rid: entry
            for rid, entry in _REGISTRY.entries().items()
            if isinstance(entry, ReproductionSpec)
        }

    def __getitem__(self, key: str) -> ReproductionSpec:
        return self._entries()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries())

    def __len__(self) -> int:
        return len(self._entries())

    def __repr__(self) -> str:
        return f"REPRODUCTIONS({', '.join(self)})"


class _TypicalTimes(Mapping[str, tuple[str, str]]):
    """Each reproduction's typical ``(--quick, full)`` time, from its registry entry."""

    def __getitem__(self, key: str) -> tuple[str, str]:
        return REPRODUCTIONS[key].times

    def __iter__(self) -> Iterator[str]:
        return iter(REPRODUCTIONS)

    def __len__(self) -> int:
        return len(REPRODUCTIONS)


#: every reproduction by id, in the order of ``crowdbudget reproduce --list``
REPRODUCTIONS: Mapping[str, ReproductionSpec] = _Reproductions()

#: Typical time of each reproduction (``--quick``, full run) on the project's 2-core machine,
#: seed 0, default jobs. Quick: CPU seconds (user + sys, workers included) of
#: ``/usr/bin/time crowdbudget reproduce ID --quick`` — the wall time of a run that has the
#: machine to itself is at most about that; with the cores shared by other jobs (load 10 on 2
#: cores when measured) the wall time was 2-4 times longer. Full: the wall times recorded in
#: docs/reproductions.md ("-": not recorded). Read from the registry entries (``times``).
TYPICAL_TIMES: Mapping[str, tuple[str, str]] = _TypicalTimes()

__all__ = [
    "REPRODUCTIONS",
    "TYPICAL_TIMES",
    "Paper",
    "Reproduction",
    "ReproductionResult",
    "ReproductionSpec",
]
