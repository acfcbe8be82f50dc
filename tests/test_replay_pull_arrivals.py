"""Pull-mode replay arrivals (``ReplayEnvironment.arriving_worker``): a worker arrives as
often as they have labels left to give, so a pull campaign's labels come from the crowd, not
from the two or three workers who happened to arrive first (docs/stress-bed.md, "pull mode —
why the one-coin prior collapses")."""

from __future__ import annotations

import numpy as np
import pytest

from crowdbudget.datasets import load_dataset
from crowdbudget.experiments.runner import run_campaign
from crowdbudget.policies.verdict import AggregatorVerdict, log_label_data
from crowdbudget.registry import make_policy
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import CampaignState


class _KeepLog(AggregatorVerdict):
    """``bds-ev`` that keeps the workers of the label log it last read."""

    kept_workers: np.ndarray | None = None

    def _fitted(self, state: CampaignState) -> tuple[np.ndarray, np.ndarray]:
        self.kept_workers = log_label_data(state).workers
        return super()._fitted(state)


@pytest.mark.parametrize("seed", [1, 2, 4])
def test_a_uniform_pull_campaign_hears_the_crowd(seed: int) -> None:
    """temp (76 workers) at one label per item: the documented arrivals give about 60
    workers, none above 12 % of the labels (first 462 records of a random order); the old
    arrivals gave 2–5, the largest 64–72 % — and ``bds-ev`` read the campaign as one class
    (0.439 at these seeds)."""
    env = ReplayEnvironment.from_label_data(load_dataset("temp"))
    verdict = _KeepLog("bds-ev")
    [row] = run_campaign(
        make_policy("uniform"),
        env,
        [462],
        world_seed=seed,
        policy_rng=np.random.default_rng(seed),
        mode="pull",
        verdict=verdict,
    )
    assert verdict.kept_workers is not None
    counts = np.bincount(verdict.kept_workers)
    assert counts.sum() == 462
    assert (counts > 0).sum() >= 40, counts
    assert counts.max() <= 0.2 * 462, counts.max()
    assert row["accuracy"] > 0.6, row


def test_every_record_is_reachable_when_the_policy_declines() -> None:
    """Arrivals whose offer is declined still move the order on; once it runs out the unused
    records are shuffled anew, so every worker with labels left arrives again and a pull
    campaign can spend every record."""
    env = ReplayEnvironment(
        items=[0, 1, 2, 0, 1, 2],
        workers=[0, 0, 0, 1, 1, 2],
        labels=[0, 1, 0, 0, 1, 1],
        gold=[0, 1, 0],
    )
    env.reset(seed=0)
    seen = [env.arriving_worker() for _ in range(40)]  # nothing used: the order cycles
    assert set(seen) == {0, 1, 2}
    # each pass visits every record once: worker 0 three times, worker 1 twice, worker 2 once
    assert np.bincount(seen[:6]).tolist() == [3, 2, 1]
