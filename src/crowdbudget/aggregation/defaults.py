"""The project's default verdict, in a module of its own: the registry imports every
aggregator, so an aggregator that reads the default (``auto``'s first candidate,
:mod:`~crowdbudget.aggregation.model_choice`) cannot import the registry when it is loaded.
:mod:`~crowdbudget.aggregation.registry` re-exports it.
"""

from __future__ import annotations

#: The default verdict: the aggregator that :func:`crowdbudget.experiments.stress.choose_verdict`
#: selects (the smallest worst accuracy shortfall to the best method of each crowd, ties by the
#: next-worst, then NLL) over every row with two or more labels of an item — the whole stress
#: bed (``crowdbudget stress --full``), ``DEFAULT_BED`` and every bundled crowd set at 2 / 3 / 5
#: labels per item and all labels — among the verdicts that also read the default policy's
#: own campaigns (push and pull) no worse than the previous default. At one label per item no
#: worker can be checked and every candidate reads the labels alike (``bds-ev-blind-own`` is
#: ``bds-oc`` there, bit for bit). ``bds-ev-blind-recheck`` is ``bds-ev-blind-own`` except where
#: that fit reads every item as one class: then the confusion-prior reading is fitted too and
#: the one with the larger evidence bound is read. It reads every bed and bundled-set row as
#: ``bds-ev-blind-own`` does and no few-worker probe crowd worse, some far better (a one-class
#: collapse undone). ``bds-hard-blind-recheck`` reads the labels as ``bds-ev-blind-recheck``
#: does unless a label-only gate finds errors that agree on the same items more than the
#: workers' accuracies allow and the evidence then prefers the item-difficulty mixture
#: (aggregation/item_difficulty.py): on the verdict table it is level on 118 rows and better on
#: fact_eval at 5 per item and all labels (correlated errors), on the held-out bed level or
#: better on every row. ``bds-hard-blind-recheck-tempered`` is that verdict with its posterior
#: tempered (``q(z)^τ``, τ by the leave-one-label-out predictive likelihood of the model finally
#: read, aggregation/_tempering.py): every label the same, on every row of both tables; the mean
#: NLL and ECE lower on both, NLL at most Dawid–Skene's on one more row (millionaire at all
#: labels). ``bds-hard-blind-recheck-refit-ev-tempered`` is that tempered verdict whose crowd
#: prior is chosen by the evidence bound between the majority vote's and one re-fitted on the
#: verdict's own posterior (aggregation/prior_refit.py): the worst row of the held-out bed
#: 0.061 → 0.048 and of the verdict table (above one label per item) 0.042 → 0.036, more rows
#: within 0.01 of the best on the held-out bed, the default policy's held-out campaigns 91 → 93
#: of 96 met; it moves many rows both ways (down by at most 0.017) and costs about 1.8× the fit.
#: The tables and their commands: docs/stress-bed.md.
DEFAULT_VERDICT = "bds-hard-blind-recheck-refit-ev-tempered"
