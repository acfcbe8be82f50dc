"""bbta-fig2/fig3/rte reporting: rows carry the issue's policy ids, the spec that ran, the
setting and the metrics; the claims table compares threshold methods at their spend."""

from __future__ import annotations

import numpy as np
import pandas as pd

from crowdbudget.experiments.papers import zhang2015
from crowdbudget.simulation.contextual import ContextualWorkerEnvironment

ISSUE_FIG2_IDS = [
    "bbta:n-explore=1",
    "bbta:n-explore=0",
    "iethresh",
    "crowdsense",
    "opt-kg",
    "opt-kg:per-context",
    "random",
]


def test_fig2_reports_the_issue_ids() -> None:
    reported = list(zhang2015.FIG2_BUDGETED) + list(zhang2015.FIG2_THRESHOLD)
    assert sorted(reported) == sorted(ISSUE_FIG2_IDS)
    # the specs are the registered policies that implement them
    assert zhang2015.FIG2_BUDGETED["opt-kg"] == "opt-kg-per-context:contexts=single"
    # a registered id of its own (the same policy as opt-kg-per-context)
    assert zhang2015.FIG2_BUDGETED["opt-kg:per-context"] == "opt-kg:per-context"
    assert zhang2015.FIG2_BUDGETED["random"] == "random-pair"


def test_run_case_rows_name_policy_spec_and_spend() -> None:
    rng = np.random.default_rng(0)
    n = 24
    env = ContextualWorkerEnvironment(
        rng.integers(0, 2, n), np.arange(n) % 3, "spammer-hammer", n_workers=6, name="tiny"
    )
    frame = zhang2015._run_case(
        env,
        {"bbta:n-explore=1": "bbta:n-explore=1", "random": "random-pair"},
        {"crowdsense": "crowdsense:eps=0.1"},
        [2, 3],
        2,
        seed=0,
        n_jobs=1,
        progress=False,
        cap=float(n * 6),
    )
    assert set(frame["policy"]) == {"bbta:n-explore=1", "random", "crowdsense"}
    assert dict(zip(frame["policy"], frame["policy_spec"], strict=True))["random"] == (
        "random-pair"
    )
    budgeted = frame[frame["policy"] != "crowdsense"]
    assert sorted(set(budgeted["budget"])) == [2.0 * n, 3.0 * n]
    np.testing.assert_allclose(budgeted["spent_mean"], budgeted["budget"])
    # a threshold method is shown at the budget it spent
    row = frame[frame["policy"] == "crowdsense"].iloc[0]
    assert row["budget"] == round(row["spent_mean"])
    assert {"accuracy_mean", "spent_mean"} <= set(frame.columns)


def test_claims_compare_threshold_methods_at_their_spend() -> None:
    n = 10
    rows = [
        ("bbta:n-explore=1", 30.0, 0.9, 30.0),
        ("bbta:n-explore=1", 50.0, 0.95, 50.0),
        ("opt-kg", 30.0, 0.8, 30.0),
        ("opt-kg", 50.0, 0.96, 50.0),
        ("iethresh", 45.0, 0.92, 45.0),
    ]
    summary = pd.DataFrame(
        [
            {
                "policy_id": p,
                "budget": b,
                "accuracy_mean": a,
                "spent_mean": s,
                "dataset": "d",
                "worker_model": "malicious",
                "n_items": n,
            }
            for p, b, a, s in rows
        ]
    )
    lines = zhang2015._claims(summary, "bbta:n-explore=1", ["opt-kg"], ["iethresh"], ["malicious"])
    # opt-kg: bbta wins at 3N, loses at 5N; iethresh at 4.5N is compared with bbta at 3N
    assert "opt-kg 1/2" in lines[1]
    assert "iethresh no (0.900 at 3N vs 0.920 at 4.5N)" in lines[1]


def test_claim_rows_are_json_ready() -> None:
    """The claims go to `--json` as rows: budgeted methods count budgets >= 3N, a threshold
    method is compared at its spend; `holds` only when every compared budget is won."""
    import json

    n = 10
    summary = pd.DataFrame(
        [
            {
                "policy_id": p,
                "budget": b,
                "accuracy_mean": a,
                "spent_mean": b,
                "dataset": "d",
                "worker_model": "malicious",
                "n_items": n,
            }
            for p, b, a in [
                ("bbta:n-explore=1", 20.0, 0.5),
                ("bbta:n-explore=1", 30.0, 0.9),
                ("random", 20.0, 0.9),
                ("random", 30.0, 0.8),
                ("crowdsense", 15.0, 0.95),
            ]
        ]
    )
    rows = zhang2015.claim_rows(
        summary, "bbta:n-explore=1", ["random"], ["crowdsense"], ["malicious"]
    )
    json.dumps(rows)
    by = {r["baseline"]: r for r in rows}
    # only 3N counts for the budgeted method (2N < 3N is left out)
    assert (by["random"]["budgets_won"], by["random"]["n_budgets"]) == (1, 1)
    assert by["random"]["holds"] is True
    # bbta has no budget <= 1.5N: nothing to compare
    assert by["crowdsense"]["n_budgets"] == 0 and by["crowdsense"]["holds"] is None
    assert zhang2015.claim_rows(summary, "bbta:n-explore=1", ["random"], [], ["one-coin"]) == []


def test_reproduce_bbta_fig2_quick_json(capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The issue's command: rows name the policy, the setting and the metrics; the claims
    (the paper's and our per-context-EM variant's) travel in the document."""
    import json

    from crowdbudget.cli import main

    code = main(
        ["reproduce", "bbta-fig2", "--quick", "--json", "--out", str(tmp_path), "--no-progress"]
    )
    out, _ = capsys.readouterr()
    assert code == 0
    doc = json.loads(out)
    rows = doc["results"]
    assert set(ISSUE_FIG2_IDS) | set(zhang2015.FIG2_VARIANTS) == {r["policy"] for r in rows}
    assert {(r["dataset"], r["worker_model"]) for r in rows} == {
        ("ionosphere", model) for model in ("spammer-hammer", "one-coin", "malicious")
    }
    for row in rows:
        assert 0.0 <= row["accuracy_mean"] <= 1.0
        assert row["spent_mean"] <= row["n_items"] * row["n_workers"]
    # the variants allocate exactly as the methods they wrap: same spend at every budget
    by = {(r["policy"], r["worker_model"], r["budget"]): r for r in rows}
    for (policy, model, budget), row in by.items():
        if policy in zhang2015.FIG2_VARIANTS:
            plain = policy.split(":verdict=")[0]
            assert row["spent_mean"] == by[(plain, model, budget)]["spent_mean"]
    tops = {c["policy"] for c in doc["claims"]}
    assert tops == {"bbta:n-explore=1", f"bbta:n-explore=1:{zhang2015.PER_CONTEXT_EM}"}
    assert {c["worker_model"] for c in doc["claims"]} == {"spammer-hammer", "malicious"}


def test_multi_setting_summaries_are_plotted_one_panel_per_case(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Rows "<id> @<case>" with policy_id: one panel per (metric, case), one line per id."""
    import matplotlib

    matplotlib.use("Agg")
    from crowdbudget.experiments import report

    rows = []
    for case, n in (("ionosphere/malicious", 351), ("pima/malicious", 768)):
        for pid in ("bbta:n-explore=1", "random"):
            for per in (2, 3):
                rows.append(
                    {
                        "policy": f"{pid} @{case}",
                        "policy_id": pid,
                        "n_items": n,
                        "budget": float(per * n),
                        "accuracy_mean": 0.7,
                    }
                )
    summary = pd.DataFrame(rows)
    assert report._facets(summary) == ["ionosphere/malicious", "pima/malicious"]
    assert report._facets(summary.assign(policy=summary["policy_id"])) is None
    captured = {}
    original = report._draw_panel

    def spy(ax, frame, metric, *args, **kwargs):  # type: ignore[no-untyped-def]
        captured[(frame["_case"].iloc[0], metric)] = sorted(frame["_x"].unique())
        return original(ax, frame, metric, *args, **kwargs)

    report._draw_panel = spy  # type: ignore[assignment]
    try:
        path = report.plot_metrics(summary, tmp_path / "f.png", metrics=("accuracy",))
    finally:
        report._draw_panel = original  # type: ignore[assignment]
    assert path.stat().st_size > 0
    # each case on its own panel, budgets per item of that case
    assert captured == {
        ("ionosphere/malicious", "accuracy"): [2.0, 3.0],
        ("pima/malicious", "accuracy"): [2.0, 3.0],
    }
