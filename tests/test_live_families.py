"""examples/live_families.py: one live campaign per family over HTTP equals the offline run.

Each family (worker-aware Opt-KG in pull mode, Requallo with a requirement in pull mode, BBTA
with contexts in push mode, B-KUBE with prices and capacities in push mode, worker-aware
Opt-KG replaying RTE in push mode) runs against a real
``crowdbudget serve`` and through the engine on the same crowd with the same generators; the
decisions and the accuracy must be the same (issue 17).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "live_families.py"


def test_every_family_live_over_http_equals_the_offline_run() -> None:
    spec = importlib.util.spec_from_file_location("live_families", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = example  # its dataclasses look their module up
    spec.loader.exec_module(example)
    rows = {row["family"]: row for row in example.main(["--quick"])}
    assert set(rows) == {"worker-aware", "requallo", "bbta", "b-kube", "rte"}
    for family in ("worker-aware", "requallo", "bbta", "b-kube"):
        row = rows[family]
        assert row["same_decisions"], row
        assert row["live_accuracy"] == row["offline_accuracy"], row
        assert row["live_accuracy"] > 0.6, row  # better than the spammers' coin
    assert rows["worker-aware"]["spent_live"] == rows["worker-aware"]["budget"]
    assert rows["bbta"]["spent_live"] == rows["bbta"]["budget"]
    # B-KUBE spends money on priced workers up to what no worker's price fits any more
    assert rows["b-kube"]["budget"] - 2.0 < rows["b-kube"]["spent_live"] <= rows["b-kube"]["budget"]
    # Requallo stops by its own rule, leaving budget unspent
    assert rows["requallo"]["spent_live"] < rows["requallo"]["budget"]
    rte = rows["rte"]
    assert rte["spent_live"] == rte["budget"]
    assert rte["live_accuracy"] == rte["offline_accuracy"]
    # the replay's replications (other generators) agree within their spread
    assert abs(rte["live_accuracy"] - rte["replay_accuracy_mean"]) < 0.06, rte
