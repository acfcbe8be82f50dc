"""examples/live_campaign.py: a crowd over HTTP reaches the offline replay's accuracy."""

from __future__ import annotations

import importlib.util
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "live_campaign.py"


def test_live_campaign_matches_offline_replay(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("live_campaign", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    proc, base = example.start_service(tmp_path / "live.db")
    try:
        live = example.run_live(budget=1200, n_workers=8, seed=3, base_url=base)
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert live["spent"] == live["labels"] == 1200  # the budget is used, never exceeded
    mean, std = example.offline_replay("opt-kg", 1200, 10)
    # one live run against the spread of single offline runs (4 standard deviations)
    assert abs(live["accuracy"] - mean) <= 4 * max(std, 0.005), (live, mean, std)
