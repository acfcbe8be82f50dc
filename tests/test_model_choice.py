"""The data-chosen verdict (``auto``) and MACE's learned class prior."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from crowdbudget.aggregation.mace import MACE
from crowdbudget.aggregation.model_choice import (
    DEFAULT_CANDIDATES,
    HeldOutLabelChoice,
    held_out_log_likelihood,
    label_folds,
    partnered_labels,
)
from crowdbudget.aggregation.registry import DEFAULT_VERDICT, make_aggregator
from crowdbudget.cli import main
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.experiments.stress import StressCell, make_crowd

IMBALANCED = StressCell("imbalanced", (0.88, 0.12), 3, 176, accuracy=(2.5, 2.0), n_items=1000)


def _accuracy(aggregator: object, gold: np.ndarray) -> float:
    return float(np.mean(aggregator.labels_ == gold))  # type: ignore[attr-defined]


def test_a_learned_class_prior_finds_the_imbalance_and_fixes_mace() -> None:
    crowd = make_crowd(IMBALANCED, 0)
    assert crowd.gold is not None
    uniform = MACE(prior_fit="competence").fit(crowd)
    learned = MACE(prior_fit="competence", class_prior="learned").fit(crowd)
    assert np.allclose(uniform.class_prior_, 0.5)
    assert abs(learned.class_prior_[1] - 0.12) < 0.04
    # uniform classes turn split items to the rare class (the failure); learned not
    assert _accuracy(learned, crowd.gold) > _accuracy(uniform, crowd.gold) + 0.03


def test_mace_refuses_an_unknown_class_prior() -> None:
    with pytest.raises(InvalidParameterError, match="class_prior must be one of"):
        MACE(class_prior="skewed").fit(make_crowd(IMBALANCED, 0))


def test_held_out_labels_are_likelier_under_the_truth_than_under_its_flip() -> None:
    crowd = make_crowd(replace(IMBALANCED, accuracy=(8.0, 2.0)), 1)
    assert crowd.gold is not None
    folds = label_folds(crowd, 3, 0)
    train = crowd.labels[folds != 0]
    assert 0 < train.size < crowd.n_labels
    train_data, test_data = crowd.labels_subset(folds != 0), crowd.labels_subset(folds == 0)
    truth = np.eye(2)[crowd.gold]
    flipped = np.eye(2)[1 - crowd.gold]
    uniform = np.full((crowd.n_items, 2), 0.5)
    scores = [
        held_out_log_likelihood(p, train_data, test_data).mean() for p in (truth, uniform, flipped)
    ]
    # the flip is as likely as the truth under a free worker model (label switching), but
    # an uninformative posterior is worse than both
    assert scores[0] > scores[1] and scores[2] > scores[1]
    assert held_out_log_likelihood(truth, train_data, test_data).shape == (test_data.n_labels,)


def test_folds_do_not_depend_on_the_row_order() -> None:
    crowd = make_crowd(IMBALANCED, 0)
    order = np.random.default_rng(0).permutation(crowd.n_labels)
    shuffled = replace(
        crowd, items=crowd.items[order], workers=crowd.workers[order], labels=crowd.labels[order]
    )
    assert np.array_equal(label_folds(crowd, 3, 5)[order], label_folds(shuffled, 3, 5))
    counts = np.bincount(label_folds(crowd, 3, 5), minlength=3)
    assert counts.min() > 0.25 * crowd.n_labels
    assert not np.array_equal(label_folds(crowd, 3, 5), label_folds(crowd, 3, 6))


def test_an_item_with_few_labels_keeps_them_in_one_fold_and_is_not_scored() -> None:
    crowd = make_crowd(replace(IMBALANCED, labels_per_item=4, n_items=300), 0)
    rng = np.random.default_rng(0)
    # items 0..99 keep 1 label, 100..199 keep 2, the rest all 4
    keep = np.ones(crowd.n_labels, dtype=bool)
    for item, k in ((range(0, 100), 1), (range(100, 200), 2)):
        for i in item:
            rows = np.flatnonzero(crowd.items == i)
            keep[rng.choice(rows, rows.size - k, replace=False)] = False
    data = crowd.labels_subset(keep)
    fold = label_folds(data, 3, 7, together_up_to=2)
    per_item = np.bincount(data.items, minlength=data.n_items)
    for i in np.flatnonzero(per_item <= 2):  # every small item in one fold
        assert np.unique(fold[data.items == i]).size == 1
    scored = partnered_labels(data, fold)
    assert not scored[per_item[data.items] <= 2].any()
    # a 4-label item split over folds: each label has a partner elsewhere
    big = per_item[data.items] == 4
    assert scored[big].mean() > 0.9
    # without keeping small items together, 2-label items are often split and scored
    loose = partnered_labels(data, label_folds(data, 3, 7))
    assert loose[per_item[data.items] == 2].any()
    assert not loose[per_item[data.items] == 1].any()


def test_auto_prefers_the_default_verdict_first() -> None:
    """``auto``'s first candidate is the project's default verdict, read from the registry
    (not a copy of its id), and no candidate is listed twice."""
    assert DEFAULT_CANDIDATES[0] == DEFAULT_VERDICT
    assert len(set(DEFAULT_CANDIDATES)) == len(DEFAULT_CANDIDATES)
    assert make_aggregator("auto").get_params()["candidates"].split(",")[0] == DEFAULT_VERDICT
    from crowdbudget.experiments.stress import subsample_per_item

    crowd = subsample_per_item(make_crowd(IMBALANCED, 0), 1, np.random.default_rng(1))
    choice = make_aggregator("auto").fit(crowd)  # nothing can be scored: the first candidate
    assert choice.chosen_ == DEFAULT_VERDICT
    assert np.array_equal(choice.probas_, make_aggregator(DEFAULT_VERDICT).fit(crowd).probas_)


@pytest.mark.parametrize("per_item", [1, 2])
def test_auto_defers_to_the_first_candidate_when_no_label_can_be_checked(per_item: int) -> None:
    """At one or two labels per item no held-out label keeps a partner on its item, so
    nothing in the labels can tell the candidates apart: the order of preference decides,
    with no cross-validation fit."""
    from crowdbudget.experiments.stress import subsample_per_item

    crowd = subsample_per_item(make_crowd(IMBALANCED, 0), per_item, np.random.default_rng(1))
    choice = HeldOutLabelChoice(candidates=("mace-eb", "bds-oc")).fit(crowd)
    assert choice.chosen_ == "mace-eb" and choice.scores_ == {}
    assert "first in the order of preference" in choice.reason_
    assert np.array_equal(choice.probas_, make_aggregator("mace-eb").fit(crowd).probas_)
    # a binary-only first candidate that refuses the data: the next one
    many = make_crowd(StressCell("three", (0.5, 0.3, 0.2), 1, 20), 0)
    assert HeldOutLabelChoice(candidates=("kos", "mv")).fit(many).chosen_ == "mv"


def test_auto_rejects_the_uniform_class_model_on_an_imbalanced_crowd() -> None:
    crowd = make_crowd(IMBALANCED, 0)
    assert crowd.gold is not None
    choice = HeldOutLabelChoice(candidates=("mace-eb", "mace-eb-cp"), level_within=0).fit(crowd)
    assert choice.chosen_ == "mace-eb-cp"
    assert choice.scores_["mace-eb-cp"] > choice.scores_["mace-eb"]
    assert np.array_equal(choice.probas_, make_aggregator("mace-eb-cp").fit(crowd).probas_)
    assert "mace-eb-cp" in choice.reason_
    assert choice.choice()["chosen"] == "mace-eb-cp"


def test_auto_is_deterministic_and_prefers_the_first_of_level_candidates() -> None:
    crowd = make_crowd(StressCell("easy", (0.5, 0.5), 5, 40, accuracy=(20.0, 1.0)), 0)
    first = HeldOutLabelChoice(candidates=("mv", "bds")).fit(crowd)
    again = HeldOutLabelChoice(candidates=("mv", "bds")).fit(crowd)
    assert first.chosen_ == again.chosen_ and first.scores_ == again.scores_
    # with an infinite level every candidate is level: the order of preference decides
    forced = HeldOutLabelChoice(candidates=("mv", "bds"), level_within=1e9).fit(crowd)
    assert forced.chosen_ == "mv"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("auto:candidates=auto", "candidates"),
        ("auto:candidates=nope", "candidates"),
        ("auto:n-folds=1", "n-folds"),
    ],
)
def test_auto_refuses_bad_parameters(text: str, message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        make_aggregator(text)


def test_aggregate_reports_the_choice(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    crowd = make_crowd(replace(IMBALANCED, n_items=200), 0)
    path = Path(str(tmp_path)) / "labels.csv"
    rows = ["task,worker,label"] + [
        f"{crowd.item_ids[i]},{crowd.worker_ids[w]},{crowd.classes[c]}"
        for i, w, c in zip(crowd.items, crowd.workers, crowd.labels, strict=True)
    ]
    path.write_text("\n".join(rows) + "\n")
    out = Path(str(tmp_path)) / "out.csv"
    assert main(["aggregate", str(path), "--method", "auto", "--json", "--out", str(out)]) == 0
    document = json.loads(capsys.readouterr().out)
    choice = document["results"]["choice"]
    assert choice["chosen"] in choice["scores"] and choice["reason"].startswith(choice["chosen"])
    assert main(["aggregate", str(path), "--method", "auto", "--out", str(out)]) == 0
    assert "auto chose" in capsys.readouterr().err


def _labelled_auto_campaign() -> tuple[Any, int]:
    """A live campaign read by ``auto``: 12 items, 4 workers who agree on 0/1 by parity."""
    from crowdbudget import Campaign

    items = [f"i{k}" for k in range(12)]
    campaign = Campaign.create(
        items, budget=48, classes=["0", "1"], policy="uniform", verdict="auto", seed=3
    )
    n = 0
    for round_ in range(3):
        for worker in ("ann", "bob", "cy", "dee"):
            assignment = campaign.next_assignment(worker)
            if assignment is None:
                continue
            k = int(assignment.item_id[1:])
            wrong = worker == "dee" and round_ == 0
            campaign.record_label(assignment.assignment_id, str((k + wrong) % 2), worker_id=worker)
            n += 1
    return campaign, n


def test_a_live_campaign_reports_what_auto_chose_and_chooses_again_as_labels_arrive() -> None:
    """``status()["verdict_choice"]``: the campaign's own ``auto`` verdict is fitted by the
    status itself (its ``estimated_accuracy`` reads the verdict), so the choice is there with
    the label count it was made at; a fit of another verdict leaves it alone, and a read after
    more labels replaces it."""
    campaign, n = _labelled_auto_campaign()
    campaign.results(verdict="ds")  # another verdict: not the campaign's
    choice = campaign.status()["verdict_choice"]
    # 12 items × 3 labels: fewer than 30 labels can be scored, so the first candidate
    assert choice["chosen"] == DEFAULT_VERDICT and choice["scores"] == {}
    assert choice["at_labels"] == n and choice["reason"]
    json.dumps(choice)  # JSON-ready, as the service sends it
    assignment = campaign.next_assignment("eve")
    assert assignment is not None
    campaign.record_label(assignment.assignment_id, "1", worker_id="eve")
    campaign.results()
    assert campaign.status()["verdict_choice"]["at_labels"] == n + 1


def test_the_service_status_shows_auto_s_choice_fitted_in_a_child(tmp_path: object) -> None:
    """Over HTTP the verdict is fitted in the compute pool's child process; its choice comes
    back with the labels and reaches ``GET …/status``."""
    from pathlib import Path

    from fastapi.testclient import TestClient

    from crowdbudget.service import create_app

    with TestClient(create_app(f"sqlite:///{Path(str(tmp_path)) / 'auto.db'}")) as api:
        created = api.post(
            "/v1/campaigns",
            json={"items": ["a", "b", "c", "d"], "budget": 12, "verdict": "auto"},
        ).json()
        cid, boss = created["campaign_id"], {"Authorization": f"Bearer {created['requester_key']}"}
        csv = "task,worker,label\na,w1,1\nb,w1,0\nc,w1,1\na,w2,1\nb,w2,0\nd,w2,0\na,w3,1\nc,w3,1\n"
        imported = api.post(
            f"/v1/campaigns/{cid}/labels/import",
            content=csv,
            headers={**boss, "Content-Type": "text/csv"},
        )
        assert imported.status_code == 200, imported.text
        assert api.get(f"/v1/campaigns/{cid}/results", headers=boss).status_code == 200
        choice = api.get(f"/v1/campaigns/{cid}/status", headers=boss).json()["verdict_choice"]
        assert choice is not None and choice["at_labels"] == 8
        # 8 labels on 4 items: too few to score, so the first candidate, and it says so
        assert choice["chosen"] == DEFAULT_VERDICT and "first in the order" in choice["reason"]
