"""The Label Studio integration's own logic, without a server (always runs).

The config parsing, the settings check, the counting of annotations, and the controller's
reconciliation against a small in-process stand-in for Label Studio's REST API that keeps the
rules the real server was seen to keep (``is_labeled`` recomputed as "distinct finished
annotators ≥ overlap" on each annotation, ``/next`` serving only ``is_labeled = false``
tasks, submissions to closed tasks accepted). The real server is exercised by
``tests/test_labelstudio_e2e.py``.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from typing import Any

import httpx
import numpy as np
import pytest

from crowdbudget.campaign import EventStore
from crowdbudget.cli import main
from crowdbudget.exceptions import DataFormatError, InvalidParameterError
from crowdbudget.integrations.labelstudio import (
    WEBHOOK_SECRET_HEADER,
    ChoicesControl,
    LabelStudioAPI,
    LabelStudioError,
    LabelStudioSync,
    TaskAnnotation,
    WebhookReceiver,
    check_project_settings,
    desired_task_state,
    export_labels,
    parse_label_config,
    task_annotations,
    unrecorded,
    webhook_task_ids,
)
from crowdbudget.integrations.labelstudio_memory import MemoryLabelStudio

CONFIG = (
    '<View><Text name="text" value="$text"/><Choices name="label" toName="text" '
    'choice="single"><Choice value="no"/><Choice value="yes"/></Choices></View>'
)
CONTROL = ChoicesControl("label", "text", ("no", "yes"))


# ---------------------------------------------------------------------------------------------
# config and settings
# ---------------------------------------------------------------------------------------------
def test_parse_label_config_finds_the_choices() -> None:
    assert parse_label_config(CONFIG) == CONTROL
    aliased = CONFIG.replace('<Choice value="no"/>', '<Choice value="No" alias="n"/>')
    assert parse_label_config(aliased).classes == ("n", "yes")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ("<View><Text", "not valid XML"),
        ('<View><Text name="t" value="$t"/></View>', "0 <Choices> controls"),
        (CONFIG.replace("</View>", CONFIG[6:]), "2 <Choices> controls"),
        (CONFIG.replace('choice="single"', 'choice="multiple"'), "choice='multiple'"),
        (CONFIG.replace('<Choice value="yes"/>', ""), "at least 2 distinct"),
        (CONFIG.replace('value="yes"', 'value="no"'), "at least 2 distinct"),
        (
            CONFIG.replace("</View>", '<TextArea name="c" toName="text"/></View>'),
            "also has TextArea",
        ),
    ],
)
def test_parse_label_config_refuses_other_configs(config: str, message: str) -> None:
    with pytest.raises(DataFormatError, match=re.escape(message)) as caught:
        parse_label_config(config)
    assert "\n" not in str(caught.value)


def test_project_settings_that_fight_are_refused() -> None:
    check_project_settings({"id": 1, "maximum_annotations": 1, "overlap_cohort_percentage": 100})
    with pytest.raises(InvalidParameterError, match="maximum_annotations\\) = 3"):
        check_project_settings({"id": 1, "maximum_annotations": 3})
    with pytest.raises(InvalidParameterError, match="overlap_cohort_percentage = 50"):
        check_project_settings({"id": 1, "maximum_annotations": 1, "overlap_cohort_percentage": 50})


# ---------------------------------------------------------------------------------------------
# counting annotations
# ---------------------------------------------------------------------------------------------
def _annotation(aid: int, user: int, label: str | None, **extra: Any) -> dict[str, Any]:
    result = [] if label is None else CONTROL.result(label)
    return {"id": aid, "completed_by": user, "result": result, **extra}


def test_task_annotations_counts_like_label_studio() -> None:
    task = {
        "id": 7,
        "annotations": [
            _annotation(5, 2, "yes"),
            _annotation(3, 1, "no"),
            _annotation(4, 3, "yes", was_cancelled=True),  # a skip
            _annotation(6, 1, "yes"),  # the same annotator again: the first one stands
            _annotation(8, 4, None),  # submitted without a choice
            _annotation(9, 5, "maybe"),  # not a class
        ],
    }
    assert task_annotations(task, CONTROL) == [
        TaskAnnotation(3, 1, "no"),
        TaskAnnotation(5, 2, "yes"),
        TaskAnnotation(8, 4, None),
        TaskAnnotation(9, 5, None),
    ]


def test_unrecorded_is_what_follows_the_recorded_prefix() -> None:
    annotations = [
        TaskAnnotation(1, 1, "no"),
        TaskAnnotation(2, 2, None),
        TaskAnnotation(3, 3, "y"),
    ]
    assert unrecorded(annotations, 0) == [annotations[0], annotations[2]]
    assert unrecorded(annotations, 1) == [annotations[2]]
    assert unrecorded(annotations, 2) == []
    assert unrecorded(annotations, 5) == []


def test_desired_task_state() -> None:
    assert desired_task_state(2, 1) == {"overlap": 3, "is_labeled": False}
    assert desired_task_state(2, 0) == {"overlap": 2, "is_labeled": True}
    assert desired_task_state(0, 0) == {"overlap": 1, "is_labeled": True}


def test_webhook_task_ids() -> None:
    payload = {"action": "ANNOTATION_CREATED", "annotation": {"id": 1, "task": 12}}
    assert webhook_task_ids(payload) == [12]
    bulk = {"action": "ANNOTATIONS_CREATED", "annotations": [{"task": 1}, {"task": 2}]}
    assert webhook_task_ids(bulk) == [1, 2]
    assert webhook_task_ids({"action": "PROJECT_UPDATED"}) == []
    assert webhook_task_ids("nonsense") == []


def test_webhook_receiver_checks_the_secret() -> None:
    receiver = WebhookReceiver("127.0.0.1", 0, "s3cret").start()
    try:
        body = json.dumps({"action": "ANNOTATION_CREATED", "annotation": {"task": 4}}).encode()
        url = f"http://127.0.0.1:{receiver.port}/"
        bad = urllib.request.Request(url, data=body, headers={WEBHOOK_SECRET_HEADER: "no"})
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(bad, timeout=5)
        good = urllib.request.Request(url, data=body, headers={WEBHOOK_SECRET_HEADER: "s3cret"})
        with urllib.request.urlopen(good, timeout=5) as response:
            assert response.status == 200
        assert receiver.task_ids.get(timeout=5) == 4
        assert receiver.task_ids.empty()
    finally:
        receiver.stop()


# ---------------------------------------------------------------------------------------------
# the controller against an in-process stand-in of the REST API
# ---------------------------------------------------------------------------------------------
class FakeLabelStudio(MemoryLabelStudio):
    """Label Studio's task rules, in memory (:mod:`crowdbudget.integrations.labelstudio_memory`)."""

    def __init__(self, n_tasks: int, maximum_annotations: int = 1) -> None:
        super().__init__(n_tasks, CONFIG, CONTROL, maximum_annotations)

    def usable(self) -> int:
        return sum(len(task_annotations(t, CONTROL)) for t in self.tasks.values())


def _api(fake: FakeLabelStudio) -> LabelStudioAPI:
    return LabelStudioAPI("http://ls.test", "token", transport=httpx.MockTransport(fake.handle))


def _work(fake: FakeLabelStudio, sync: LabelStudioSync, rng: np.random.Generator, n: int) -> int:
    """``n`` rounds of: an annotator takes an open task and answers; the controller reconciles
    the task (as on a webhook). Returns the annotations given."""
    given = 0
    for _ in range(n):
        user = int(rng.integers(1, 9))
        task_id = fake.next_task(user)
        if task_id is None:
            continue
        fake.annotate(task_id, user, "yes" if rng.random() < 0.8 else "no")
        given += 1
        sync.reconcile_tasks([task_id])
    return given


def test_controller_keeps_only_its_slots_open_and_never_overspends() -> None:
    fake = FakeLabelStudio(n_tasks=20)
    store = EventStore("sqlite://")
    sync = LabelStudioSync.connect(_api(fake), 1, store, budget=30, open_slots=4)
    sync.reconcile_all()
    assert len(fake.open_tasks()) == 4  # all 20 were open; now only the policy's choices
    rng = np.random.default_rng(0)
    _work(fake, sync, rng, 200)
    assert sync.done()
    report = sync.report()
    assert report.spent == 30 and report.over_submissions == 0
    assert fake.usable() == 30
    assert fake.open_tasks() == []  # everything closed once the budget is spent
    # a submission to a closed task (Label Studio accepts it) is recorded free and reported
    fake.annotate(100, 99, "no")
    sync.reconcile_all()
    report = sync.report()
    assert report.over_submissions == 1 and report.labels == 31 and report.spent == 30
    assert fake.usable() <= report.budget + report.over_submissions


def test_a_restart_records_what_it_missed_and_nothing_twice() -> None:
    fake = FakeLabelStudio(n_tasks=15)
    store = EventStore("sqlite://")
    sync = LabelStudioSync.connect(_api(fake), 1, store, budget=40, open_slots=5)
    sync.reconcile_all()
    rng = np.random.default_rng(1)
    _work(fake, sync, rng, 10)
    # the controller dies; annotators keep filling the open slots, no webhook reaches anyone
    missed = 0
    for user in range(1, 9):
        task_id = fake.next_task(user)
        if task_id is not None:
            fake.annotate(task_id, user, "no")
            missed += 1
    assert missed > 0
    before = sync.campaign.status()["n_labels"]
    resumed = LabelStudioSync.connect(_api(fake), 1, store, budget=None, open_slots=5)
    assert resumed.n_open_slots() == sync.n_open_slots()  # the slots came back from the store
    assert resumed.reconcile_all() == missed
    assert resumed.campaign.status()["n_labels"] == before + missed
    assert resumed.reconcile_all() == 0  # idempotent
    _work(fake, resumed, rng, 300)
    assert resumed.done()
    counts = resumed.campaign.results()["n_labels"]
    for task_id, task in fake.tasks.items():
        assert counts[str(task_id)] == len(task_annotations(task, CONTROL))
    assert resumed.report().spent == 40


def test_verdicts_are_written_once_per_change() -> None:
    fake = FakeLabelStudio(n_tasks=6)
    sync = LabelStudioSync.connect(_api(fake), 1, EventStore("sqlite://"), budget=12, open_slots=2)
    sync.reconcile_all()
    _work(fake, sync, np.random.default_rng(2), 50)
    written = sync.write_verdicts()
    results = sync.campaign.results()
    assert written == int((results["n_labels"] > 0).sum()) == len(fake.predictions)
    for prediction in fake.predictions.values():
        row = results.loc[str(prediction["task"])]
        assert prediction["result"] == CONTROL.result(row["label"])
        assert prediction["score"] == round(float(row["confidence"]), 3)
        assert prediction["model_version"] == "crowdbudget"
    assert sync.write_verdicts() == 0


def test_connect_refuses_what_cannot_work() -> None:
    fake = FakeLabelStudio(n_tasks=3)
    store = EventStore("sqlite://")
    with pytest.raises(InvalidParameterError, match="give --budget"):
        LabelStudioSync.connect(_api(fake), 1, store, budget=None)
    with pytest.raises(InvalidParameterError, match="chooses workers"):
        LabelStudioSync.connect(_api(fake), 1, store, budget=5, policy="bbta")
    LabelStudioSync.connect(_api(fake), 1, store, budget=5)
    with pytest.raises(InvalidParameterError, match="already has budget 5"):
        LabelStudioSync.connect(_api(fake), 1, store, budget=6)
    fixed = FakeLabelStudio(n_tasks=3, maximum_annotations=3)
    with pytest.raises(InvalidParameterError, match="set it to 1"):
        LabelStudioSync.connect(_api(fixed), 1, EventStore("sqlite://"), budget=5)


def test_export_labels_is_the_crowdkit_table() -> None:
    fake = FakeLabelStudio(n_tasks=2)
    fake.annotate(100, 3, "yes")
    fake.annotate(100, 4, "no")
    fake.annotate(101, 3, "no")
    frame = export_labels(_api(fake), 1)
    assert frame.to_dict(orient="list") == {
        "task": ["100", "100", "101"],
        "worker": ["3", "4", "3"],
        "label": ["yes", "no", "no"],
    }


def test_errors_are_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    token = tmp_path / "token"
    token.write_text("abc\n")
    fake = FakeLabelStudio(n_tasks=1)
    with pytest.raises(LabelStudioError, match="404"):
        _api(fake).request("GET", "/api/nowhere")
    # nothing listens on port 9 of loopback: a clear line, status 2
    argv = ["labelstudio", "export", "--url", "http://127.0.0.1:9", "--token-file", str(token)]
    assert main([*argv, "--project", "1"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach Label Studio" in err and err.count("\n") == 1
    assert main([*argv[:-1], str(tmp_path / "missing"), "--project", "1"]) == 2
    assert "cannot read token file" in capsys.readouterr().err
    assert main(["labelstudio", "sync", "--url", "ftp://x", "--token-file", str(token),
                 "--project", "1"]) == 2  # fmt: skip
    assert "must start with http" in capsys.readouterr().err


def test_a_skip_fills_no_slot() -> None:
    fake = FakeLabelStudio(n_tasks=4)
    sync = LabelStudioSync.connect(_api(fake), 1, EventStore("sqlite://"), budget=6, open_slots=1)
    sync.reconcile_all()
    (task_id,) = fake.open_tasks()
    task = fake.tasks[task_id]
    task["annotations"].append(_annotation(500, 7, None, was_cancelled=True))
    sync.reconcile_tasks([task_id])
    assert sync.n_open_slots() == 1 and fake.open_tasks() == [task_id]
    assert sync.campaign.status()["n_labels"] == 0
    fake.annotate(task_id, 8, "yes")
    sync.reconcile_tasks([task_id])
    assert sync.campaign.status()["n_labels"] == 1 and sync.report().spent == 1


def test_run_survives_a_failed_request_and_stops_when_told() -> None:
    fake = FakeLabelStudio(n_tasks=5)
    handle = fake.handle
    exports = {"calls": 0}

    def flaky(request: httpx.Request) -> httpx.Response:  # exports 1 and 3 fail
        if request.url.path.endswith("/export"):
            exports["calls"] += 1
            if exports["calls"] in (1, 3):
                return httpx.Response(503, json={"detail": "restarting"})
        return handle(request)

    api = LabelStudioAPI("http://ls.test", "token", transport=httpx.MockTransport(flaky))
    store = EventStore("sqlite://")
    sync = LabelStudioSync.connect(api, 1, store, budget=10, open_slots=2)
    with pytest.raises(LabelStudioError, match="503"):
        sync.run(interval=0.05, max_seconds=0.2)  # the first reconciliation must work
    report = sync.run(interval=0.05, max_seconds=0.5)  # export 3 fails inside the loop
    assert exports["calls"] >= 4 and report.reconciliations >= 2
    assert not report.done and report.open_slots == 2 and len(fake.open_tasks()) == 2


def test_an_expired_slot_returns_its_budget_and_a_late_annotation_is_reported() -> None:
    fake = FakeLabelStudio(n_tasks=3)
    store = EventStore("sqlite://")
    sync = LabelStudioSync.connect(_api(fake), 1, store, budget=2, open_slots=1, slot_ttl=60)
    now = [time.time()]
    sync.campaign.clock = lambda: now[0]  # the campaign's time, not the machine's load
    sync.reconcile_all()
    (task_id,) = fake.open_tasks()
    now[0] += 61  # the slot expires; its holder answers late
    fake.annotate(task_id, 5, "yes")
    sync.reconcile_tasks([task_id])
    report = sync.report()
    assert report.over_submissions == 1 and report.spent == 0
    assert report.open_slots == 1  # the budget came back and was committed again


# ---------------------------------------------------------------------------------------------
# annotators: every annotation under its annotator, the slot paying for it
# ---------------------------------------------------------------------------------------------
def test_every_annotation_is_recorded_under_its_annotator() -> None:
    fake = FakeLabelStudio(n_tasks=12)
    store = EventStore("sqlite://")
    policy = "opt-kg:posterior=one-coin"
    sync = LabelStudioSync.connect(_api(fake), 1, store, budget=30, open_slots=3, policy=policy)
    sync.reconcile_all()
    _work(fake, sync, np.random.default_rng(5), 300)
    assert sync.done()
    fake.annotate(100, 42, "no")  # a submission to a closed task: an over-submission
    sync.reconcile_all()
    recorded = sync.campaign.export_labels()
    given = export_labels(_api(fake), 1)
    given["worker"] = "ls-user-" + given["worker"]
    key = ["task", "worker", "label"]
    assert sorted(map(tuple, recorded[key].to_numpy())) == sorted(map(tuple, given[key].to_numpy()))
    report = sync.report()
    assert report.spent == 30 and report.over_submissions == 1 and report.labels == 31
    ledger = sync.campaign.ledger
    assert ledger.committed == 0 and ledger.spent == 30
    # the slots are held by a small pool, which never labels anything
    assert not any(w.startswith("slot-") for w in recorded["worker"])
    holders = [w for w in sync.campaign.worker_ids if w.startswith("slot-")]
    assert len(holders) <= 3
    # a reload is the same campaign
    again = LabelStudioSync.connect(_api(fake), 1, store, budget=None, open_slots=3)
    assert again.campaign.export_labels().equals(sync.campaign.export_labels())
    assert again.campaign.ledger == ledger
    assert again.reconcile_all() == 0


def test_annotations_committed_out_of_id_order_keep_their_annotators() -> None:
    fake = FakeLabelStudio(n_tasks=3)
    sync = LabelStudioSync.connect(
        _api(fake), 1, EventStore("sqlite://"), budget=6, open_slots=2, policy="opt-kg"
    )
    sync.reconcile_all()
    task_id = fake.open_tasks()[0]
    task = fake.tasks[task_id]
    # annotation 51 (user 2) is read before annotation 50 (user 1) is committed
    task["annotations"].append(_annotation(51, 2, "yes"))
    sync.reconcile_tasks([task_id])
    task["annotations"].append(_annotation(50, 1, "no"))
    sync.reconcile_tasks([task_id])
    sync.reconcile_tasks([task_id])
    rows = sync.campaign.export_labels()
    assert sorted(map(tuple, rows.to_numpy())) == [
        (str(task_id), "ls-user-1", "no"),
        (str(task_id), "ls-user-2", "yes"),
    ]


def test_a_slot_takes_no_second_label_of_the_same_annotator() -> None:
    from crowdbudget.campaign import AssignmentError, Campaign
    from crowdbudget.campaign.slots import record_answer

    campaign = Campaign.create(["a", "b"], budget=4, classes=("no", "yes"), policy="uniform")
    first = campaign.next_assignment("slot-0")
    second = campaign.next_assignment("slot-1")
    assert first is not None and second is not None
    record_answer(campaign, first.assignment_id, "yes", "ls-user-1")
    assert record_answer(campaign, first.assignment_id, "yes", "ls-user-1").status == "answered"
    third = campaign.next_assignment("slot-0")  # slot-0 let go of its item: it may hold it again
    assert third is not None
    slot = third if third.item_id == first.item_id else second
    assert slot.item_id == first.item_id
    events = campaign.event_count
    with pytest.raises(AssignmentError, match="already holds or labeled"):
        record_answer(campaign, slot.assignment_id, "no", "ls-user-1")
    assert campaign.event_count == events  # refused: nothing stored
    assert campaign.ledger.spent == 1 and campaign.status()["n_labels"] == 1


def test_expected_scores_are_the_share_weighted_pair_scores() -> None:
    from crowdbudget.integrations.crowd_choice import active_shares, expected_scores
    from crowdbudget.posteriors.base import kg_rewards
    from crowdbudget.posteriors.beta_bernoulli import error_probability
    from crowdbudget.posteriors.one_coin import OneCoinPosterior
    from crowdbudget.types import LabelEvent

    posterior = OneCoinPosterior([1.0, 1.0], (4.0, 16.0), 5, 3)
    posterior.c[2], posterior.d[2] = 30.0, 30.0  # a careless worker: reliability 1/2
    for item, worker, label in [(0, 0, 1), (0, 1, 1), (1, 0, 0), (2, 1, 1), (2, 0, 0)]:
        posterior.update(LabelEvent(item=item, worker=worker, label=label))
    shares = active_shares(["w0", "w1", "w1", "w2", "blocked"], exclude={"blocked"})
    assert shares == {"w0": 0.25, "w1": 0.5, "w2": 0.25}
    workers, weights = np.array([0, 1, 2]), np.array([0.25, 0.5, 0.25])
    scores = expected_scores(posterior, workers, weights)
    now = error_probability(posterior.a, posterior.b, posterior.thresholds)
    by_worker = np.column_stack(
        [kg_rewards(posterior.lookahead(j), now).max(axis=1) for j in range(3)]
    )
    np.testing.assert_allclose(scores, by_worker @ weights, rtol=1e-12)
    assert np.all(by_worker[:, 2] < 0.01 * by_worker[:, 0])  # the careless one adds ~nothing


def test_a_worker_aware_slot_goes_to_the_best_expected_task() -> None:
    fake = FakeLabelStudio(n_tasks=8)
    policy = "opt-kg:posterior=one-coin"
    sync = LabelStudioSync.connect(
        _api(fake), 1, EventStore("sqlite://"), budget=40, open_slots=1, policy=policy
    )
    sync.reconcile_all()
    _work(fake, sync, np.random.default_rng(9), 12)
    connector = sync.connector
    (slot,) = connector.open_slots()
    connector.release(slot.slot_id)
    order = connector.crowd_order()
    assert order is not None
    (opened,) = connector.fill(1)
    assert opened.item_id == connector.item_ids[int(order[0])]


# ---------------------------------------------------------------------------------------------
# ground truth: control tasks, and the blocking of a careless annotator
# ---------------------------------------------------------------------------------------------
def test_ground_truth_tasks_are_control_tasks_and_a_careless_annotator_is_blocked() -> None:
    fake = FakeLabelStudio(n_tasks=30)
    truth = {task_id: ("yes" if task_id % 3 else "no") for task_id in fake.tasks}
    for task_id in range(100, 106):  # a reviewer (user 99) gave the first six a ground truth
        fake.annotate(task_id, 99, truth[task_id], ground_truth=True)
    store = EventStore("sqlite://")
    control = {"first_k": 3, "rate": 0.5, "block_below": 0.7, "min_answers": 2}
    sync = LabelStudioSync.connect(
        _api(fake), 1, store, budget=90, open_slots=3, policy="opt-kg", control=control
    )
    sync.reconcile_all()
    assert sync.campaign.control_items() == {str(t): truth[t] for t in range(100, 106)}
    rng = np.random.default_rng(4)
    careless = 1
    for _ in range(2000):
        user = int(rng.integers(1, 7))
        task_id = fake.next_task(user)
        if task_id is None:
            if sync.done():
                break
            continue
        right = truth[task_id]
        wrong = "no" if right == "yes" else "yes"
        fake.annotate(task_id, user, wrong if user == careless else right)
        sync.reconcile_tasks([task_id])
    sync.reconcile_all()
    # no slot is left where only a blocked annotator could fill it (the control rule's picks
    # skip the tasks every active annotator has done)
    assert sync.done()
    report = sync.report()
    assert [b["worker"] for b in report.blocked] == ["ls-user-1"]
    assert report.blocked[0]["by"] == "rule" and report.blocked[0]["correct"] == 0
    assert report.control_answers >= 3
    # the careless annotator's later annotations are not counted, and the budget is exact
    assert report.not_counted >= 1
    assert report.spent == 90 and report.labels == 90 + report.over_submissions
    exported = export_labels(_api(fake), 1, sync.campaign)
    mine = exported[exported["worker"] == "1"]
    assert mine["blocked"].all() and (~mine["counted"]).sum() == report.not_counted
    assert exported.loc[exported["worker"] != "1", "counted"].all()
    # a restart: the same blocks, nothing recorded twice
    again = LabelStudioSync.connect(_api(fake), 1, store, budget=None, open_slots=3)
    assert again.reconcile_all() == 0
    assert again.report().blocked == report.blocked
    assert again.report().not_counted == report.not_counted


def test_a_changed_ground_truth_is_reported_and_the_first_answer_kept() -> None:
    fake = FakeLabelStudio(n_tasks=4)
    fake.annotate(100, 99, "yes", ground_truth=True)
    sync = LabelStudioSync.connect(_api(fake), 1, EventStore("sqlite://"), budget=4)
    sync.reconcile_all()
    fake.annotate(100, 98, "no", ground_truth=True)  # another reviewer says otherwise
    sync.reconcile_all()
    assert sync.campaign.control_items() == {"100": "yes"}
    assert sync.report().ground_truth_conflicts == [100]


def test_agreement_blocks_a_careless_annotator_without_ground_truth() -> None:
    fake = FakeLabelStudio(n_tasks=40)
    truth = {task_id: ("yes" if task_id % 3 else "no") for task_id in fake.tasks}
    store = EventStore("sqlite://")
    sync = LabelStudioSync.connect(
        _api(fake),
        1,
        store,
        budget=160,
        open_slots=4,
        policy="opt-kg:posterior=one-coin",
        control={"block_below": 0.7},
    )
    sync.reconcile_all()
    rng = np.random.default_rng(11)
    for _ in range(3000):
        user = int(rng.integers(1, 7))
        task_id = fake.next_task(user)
        if task_id is None:
            if sync.done():
                break
            continue
        right = truth[task_id]
        wrong = "no" if right == "yes" else "yes"
        careless = user == 1 and rng.random() < 0.5
        fake.annotate(task_id, user, wrong if careless or rng.random() < 0.05 else right)
        sync.reconcile_tasks([task_id])
    report = sync.report()
    assert [b["worker"] for b in report.blocked] == ["ls-user-1"]
    evidence = report.blocked[0]["agreement"]
    assert evidence["labels"] >= 20 and evidence["p_below"] >= 0.95
    assert evidence["expected_right"] < 0.7 * evidence["labels"]
    # the block is the agreement test's, its evidence in the event: a resumed sync reports it
    assert report.blocked[0]["by"] == "agreement" and report.blocked[0]["evidence"] == evidence
    resumed = LabelStudioSync.connect(_api(fake), 1, store, budget=160)
    assert resumed.report().blocked == report.blocked
    # reversible: the requester unblocks, agreement does not block again
    assert sync.campaign.unblock_worker("ls-user-1")
    sync.connector.agreement_every = 0
    assert sync.connector.block_by_agreement() == []
    assert report.spent == 160


def test_no_slot_waits_on_a_task_only_a_blocked_annotator_could_take() -> None:
    # three annotators, one always wrong; four slot holders, each served a control task half
    # of the time: once the careless one is blocked, a control task both others answered
    # must get no slot (only the blocked one could fill it)
    fake = FakeLabelStudio(n_tasks=20)
    truth = {task_id: ("yes" if task_id % 2 else "no") for task_id in fake.tasks}
    for task_id in (100, 101, 102):
        fake.annotate(task_id, 99, truth[task_id], ground_truth=True)
    control = {"first_k": 3, "rate": 0.5, "block_below": 0.7, "min_answers": 3}
    sync = LabelStudioSync.connect(
        _api(fake), 1, EventStore("sqlite://"), budget=40, open_slots=4, control=control
    )
    sync.reconcile_all()
    rng = np.random.default_rng(2)
    for _ in range(1000):
        user = int(rng.integers(1, 4))
        task_id = fake.next_task(user)
        if task_id is None:
            if sync.done():
                break
            continue
        right = truth[task_id]
        fake.annotate(task_id, user, ("no" if right == "yes" else "yes") if user == 1 else right)
        sync.reconcile_tasks([task_id])
    assert sync.campaign.is_blocked("ls-user-1")
    assert sync.done() and sync.report().open_slots == 0


def test_the_sync_command_line_takes_the_value_rule() -> None:
    import argparse

    from crowdbudget.cli.labelstudio import _control, _sync_arguments

    parser = argparse.ArgumentParser()
    _sync_arguments(parser, None)
    base = ["--url", "http://x", "--token-file", "t", "--project", "1"]
    args = parser.parse_args([*base, "--control-rule", "value", "--block-below", "0.7"])
    assert _control(args) == {"rule": "value", "block_below": 0.7}
    assert _control(parser.parse_args(base)) is None
    with pytest.raises(SystemExit):
        parser.parse_args([*base, "--control-rule", "best"])
