"""The project's default verdict, in a module of its own: the registry imports every
aggregator, so an aggregator that reads the default (``auto``'s first candidate,
:mod:`~crowdbudget.aggregation.model_choice`) cannot import the registry when it is loaded.
:mod:`~crowdbudget.aggregation.registry` re-exports it.
"""

from __future__ import annotations

#: The default verdict: the aggregator that :func:`crowdbudget.experiments.stress.choose_verdict`
#: selects on the stress bed and every bundled crowd set, all labels and 1 / 2 / 3 / 5 labels
#: per item (the smallest worst accuracy shortfall to the best method of each crowd, ties by
#: the next-worst, then NLL) — ``crowdbudget stress --per-item 1,2,3,5 --reps 3``; the table
#: and its numbers: docs/stress-bed.md.
DEFAULT_VERDICT = "bds-ev"
