"""Push mode (issue 17): the policy picks (item, worker) pairs in a live campaign.

The strongest check: a live push campaign replaying RTE's recorded pairs (each (item, worker)
pair usable once, answered with its recorded label) makes exactly the decisions of the offline
engine (:func:`crowdbudget.engine.loop.drive` on a :class:`ReplayEnvironment`) for every
worker-choosing policy, when the offline policy gets the campaign's generators — the live run
and the replay agree exactly when answers arrive in the same order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from crowdbudget.campaign import Campaign, EventStore
from crowdbudget.datasets import load_dataset
from crowdbudget.engine.loop import Clock, StopAtSpend, drive
from crowdbudget.exceptions import CrowdBudgetError, InvalidParameterError
from crowdbudget.registry import make_policy, registered_policies
from crowdbudget.simulation.replay import ReplayEnvironment
from crowdbudget.types import CampaignState, Problem
from service_helpers import CampaignApi


def _worker_choosing() -> list[str]:
    from crowdbudget.registry import parse_policy

    ids = [p for p in registered_policies() if parse_policy(p).capabilities.chooses_workers]
    ids = [p for p in ids if parse_policy(p).capabilities.needs_workers]
    return [*sorted(ids), "opt-kg:posterior=one-coin", "kg:posterior=two-coin"]


@pytest.fixture(scope="module")
def rte() -> dict[str, Any]:
    data = load_dataset("rte")
    env = ReplayEnvironment.from_label_data(data)
    env.reset(seed=0)
    assert env.pairs is not None
    items = [str(i) for i in data.item_ids]
    workers = [str(w) for w in data.worker_ids]
    # the replay's pair order (item-major), so ties are drawn among the same candidates
    pairs = [
        [items[i], workers[w]] for i, w in zip(env.pairs.items, env.pairs.workers, strict=True)
    ]
    answers = {
        (items[i], workers[w]): str(data.classes[label])
        for i, w, label in zip(data.items, data.workers, data.labels, strict=True)
    }
    return {"data": data, "items": items, "workers": workers, "pairs": pairs, "answers": answers}


@pytest.mark.parametrize("policy", _worker_choosing())
def test_live_push_equals_the_offline_replay(policy: str, rte: dict[str, Any]) -> None:
    data, budget, seed = rte["data"], 400, 3
    campaign = Campaign.create(
        rte["items"],
        budget=budget,
        classes=list(data.classes),
        policy=policy,
        seed=seed,
        mode="push",
        pairs=rte["pairs"],
        workers=rte["workers"],
    )
    live = []
    while batch := campaign.push_assignments(1):
        (a,) = batch
        live.append((campaign._item_index[a.item_id], campaign._worker_index[a.worker_id]))
        campaign.record_label(a.assignment_id, rte["answers"][(a.item_id, a.worker_id)])
    # the single-step plans of the ε-first family may leave money unspent on a replay
    if policy not in ("bounded-eps-first", "eps-first", "trailsourcing"):
        assert len(live) == budget

    env = ReplayEnvironment.from_label_data(data)
    env.reset(seed=0)
    offline_policy = make_policy(policy)
    problem = Problem(n_items=data.n_items, budget=budget, n_workers=data.n_workers)
    # the campaign's generators: reset with [seed, 0] (its created event), then the stream
    # it starts once created, [seed, 1]
    offline_policy.reset(problem, np.random.default_rng([seed, 0]))
    offline_policy.rng_ = np.random.default_rng([seed, 1])
    state = CampaignState.initial(problem)
    state.pairs = env.pairs
    offline: list[tuple[int, int]] = []
    select = offline_policy.select

    def recording_select(state: CampaignState, *, worker: int | None = None) -> Any:
        assignment = select(state, worker=worker)
        if assignment is not None:
            offline.append((assignment.item, assignment.worker))
        return assignment

    offline_policy.select = recording_select  # type: ignore[method-assign]
    drive(offline_policy, env, state, Clock("push"), StopAtSpend(budget))
    assert live == offline
    np.testing.assert_array_equal(
        campaign.policy.final_labels(campaign.state), offline_policy.final_labels(state)
    )


def test_push_mode_is_checked_at_creation_in_one_line() -> None:
    items = ["a", "b"]
    refusals = [
        ({"policy": "opt-kg", "mode": "push", "workers": ["w"]}, "picks items only"),
        ({"policy": "bbta", "mode": "push"}, "needs the team"),
        ({"policy": "bbta", "mode": "sideways", "workers": ["w"]}, "mode must be"),
        ({"policy": "bbta", "pairs": [["a", "w"]]}, "give mode='push'"),
        ({"policy": "bbta", "mode": "push", "pairs": [["zz", "w"]]}, "unknown item"),
        ({"policy": "bbta", "mode": "push", "pairs": [["a", "w"], ["a", "w"]]}, "more than once"),
        ({"policy": "bbta", "mode": "push", "pairs": []}, "empty"),
    ]
    for config, message in refusals:
        store = EventStore("sqlite://")
        with pytest.raises(CrowdBudgetError, match=message) as error:
            Campaign.create(items, budget=4, store=store, **config)  # type: ignore[arg-type]
        assert "\n" not in str(error.value)
        assert store.campaign_ids() == []
    pull = Campaign.create(items, budget=4, policy="bbta", workers=["w"])
    with pytest.raises(InvalidParameterError, match="pull mode"):
        pull.push_assignments(1)
    listed = Campaign.create(items, budget=4, policy="bbta", mode="push", pairs=[["a", "w"]])
    with pytest.raises(InvalidParameterError, match="lists its"):
        listed.add_items(["c"])


def test_push_never_gives_a_pair_twice_and_a_joining_worker_gets_pairs() -> None:
    campaign = Campaign.create(
        [f"q{k}" for k in range(3)],
        budget=20,
        policy="opt-kg:posterior=one-coin",
        mode="push",
        workers=["w0", "w1"],
    )
    batch = campaign.push_assignments(4)
    pairs = [(a.item_id, a.worker_id) for a in batch]
    assert len(set(pairs)) == len(pairs) == 4
    for a in batch:
        campaign.record_label(a.assignment_id, "1")
    campaign.add_workers(["w2"])
    assert campaign.problem.n_workers == 3  # push mode: exactly the team
    given = pairs
    while batch := campaign.push_assignments(1):
        given += [(a.item_id, a.worker_id) for a in batch]
        campaign.record_label(batch[0].assignment_id, "0")
    assert len(set(given)) == len(given) == 9  # every pair once, then nothing left
    assert campaign.status()["spent"] == 9


def test_push_over_http(tmp_path: Any) -> None:
    body = {
        "items": ["a", "b", "c"],
        "budget": 4,
        "policy": "opt-kg:posterior=one-coin",
        "mode": "push",
        "pairs": [["a", "ann"], ["b", "ann"], ["b", "bob"], ["c", "bob"], ["c", "cy"]],
    }
    api = CampaignApi(tmp_path, body, "push.db")
    tokens = {name: api.worker(name) for name in ("ann", "bob", "cy")}
    neither = api.call("POST", "/push", json={})
    assert neither.status_code == 422 and "either" in neither.json()["detail"]
    spent = 0
    while True:
        pushed = api.call("POST", "/push", json={"count": 2})
        assert pushed.status_code == 200, pushed.text
        if not pushed.json():
            break
        for a in pushed.json():
            assert [a["item_id"], a["worker_id"]] in body["pairs"]
            path = f"/assignments/{a['assignment_id']}/label"
            answer = api.call("POST", path, key=tokens[a["worker_id"]], json={"label": "1"})
            assert answer.status_code == 200, answer.text
            spent += 1
    assert spent == 4  # the budget, never more
    status = api.call("GET", "/status").json()
    assert status["spent"] == 4


def _declares_push() -> list[str]:
    from crowdbudget.registry import parse_policy

    return sorted(p for p in registered_policies() if parse_policy(p).capabilities.chooses_workers)


@pytest.mark.parametrize("policy", _declares_push())
def test_every_push_policy_pushes_over_http_until_it_stops(policy: str, tmp_path: Any) -> None:
    """Every id that declares push runs over HTTP to its end (``kos`` was a 500 at the first
    push: its graph named workers outside the team): every push answers 200 with pairs of
    the team, and the campaign ends spent or stopped with a reason."""
    team = ["ann", "bob", "cy"]
    body = {"items": [f"i{k}" for k in range(6)], "budget": 12, "policy": policy}
    api = CampaignApi(tmp_path, {**body, "mode": "push", "workers": team}, "push.db")
    tokens = {name: api.worker(name) for name in team}
    for _ in range(50):
        pushed = api.call("POST", "/push", json={"count": 2})
        assert pushed.status_code == 200, pushed.text
        if not pushed.json():
            break
        for a in pushed.json():
            assert a["worker_id"] in team
            path = f"/assignments/{a['assignment_id']}/label"
            answer = api.call("POST", path, key=tokens[a["worker_id"]], json={"label": "1"})
            assert answer.status_code == 200, answer.text
    status = api.call("GET", "/status").json()
    assert status["stopped"] and status["stop_reason"], status
    assert status["spent"] == 12 or not status["stop_reason"].startswith("the budget")


def test_contexts_and_features_reach_the_live_problem() -> None:
    rng = np.random.default_rng(0)
    items = [f"q{k}" for k in range(6)]
    contexts = [0, 1, 2, 0, 1, 2]
    bbta = Campaign.create(
        items, budget=12, policy="bbta", mode="push", workers=["a", "b"], contexts=contexts
    )
    np.testing.assert_array_equal(bbta.problem.contexts, contexts)
    assert bbta.problem.n_contexts == 3
    bbta.add_items(["q6"], contexts=[3])
    assert bbta.problem.n_contexts == 4 and bbta.problem.n_items == 7
    with pytest.raises(InvalidParameterError, match="give theirs"):
        bbta.add_items(["q7"])
    while batch := bbta.push_assignments(1):
        bbta.record_label(batch[0].assignment_id, "1")
    assert bbta.status()["spent"] == 12

    features = rng.normal(size=(6, 3)).tolist()
    store = EventStore("sqlite://")
    logistic = Campaign.create(
        items, budget=10, policy="opt-kg:features=logistic", features=features, store=store
    )
    np.testing.assert_allclose(logistic.problem.features, features)
    with pytest.raises(InvalidParameterError, match="features"):
        logistic.add_items(["x"], features=[[1.0, 2.0]])  # 2 features, the campaign has 3
    logistic.add_items(["x"], features=[[1.0, 2.0, 3.0]])
    for k in range(10):
        a = logistic.next_assignment(f"w{k % 3}")
        assert a is not None
        logistic.record_label(a.assignment_id, str(k % 2))
    reloaded = Campaign.load(store, logistic.campaign_id)
    np.testing.assert_allclose(reloaded.problem.features, logistic.problem.features)
    np.testing.assert_array_equal(reloaded.state.label_counts, logistic.state.label_counts)
    # refused at creation, nothing stored
    for bad in ({"contexts": [0, 1]}, {"contexts": [0, -1, 0, 0, 0, 0]}, {"features": [[1.0]]}):
        empty = EventStore("sqlite://")
        with pytest.raises(CrowdBudgetError):
            Campaign.create(items, budget=4, store=empty, **bad)  # type: ignore[arg-type]
        assert empty.campaign_ids() == []
    with pytest.raises(CrowdBudgetError, match="features"):
        Campaign.create(items, budget=4, policy="opt-kg:features=logistic")


def test_contexts_over_http(tmp_path: Any) -> None:
    body = {
        "items": ["a", "b", "c"],
        "budget": 6,
        "policy": "bbta",
        "mode": "push",
        "workers": ["ann", "bob"],
        "contexts": [0, 1, 0],
    }
    api = CampaignApi(tmp_path, body, "ctx.db")
    missing = api.call("POST", "/items", json={"items": ["d"]})
    assert missing.status_code == 422 and "contexts" in missing.json()["detail"]
    added = api.call("POST", "/items", json={"items": ["d"], "contexts": [2]})
    assert added.status_code == 204, added.text
    status = api.call("GET", "/status").json()
    assert status["n_items"] == 4


def test_features_over_http_with_a_csv_upload(tmp_path: Any) -> None:
    body = {
        "items": ["a", "b", "c"],
        "budget": 6,
        "policy": "opt-kg:features=logistic",
        "features": [[0.1, 1.0], [0.5, -1.0], [2.0, 0.0]],
    }
    api = CampaignApi(tmp_path, body, "features.db")
    csv_type = {"Content-Type": "text/csv"}
    added = api.call(
        "POST", "/items/csv", content="item,x1,x2\nd,0.3,0.2\ne,-1,4\n", headers=csv_type
    )
    assert added.status_code == 204, added.text
    status = api.call("GET", "/status").json()
    assert status["n_items"] == 5
    for csv, message in (
        ("item,x1\nf,0.3\n", "features"),  # one feature, the campaign has two
        ("name,x1,x2\nf,1,2\n", "column 'item'"),
        ("item,x1,x2\nf,one,2\n", "numbers"),
    ):
        refused = api.call("POST", "/items/csv", content=csv, headers=csv_type)
        assert refused.status_code == 422 and message in refused.json()["detail"], refused.text
    after = api.call("GET", "/status").json()
    assert after["n_items"] == 5 and after["events"] == status["events"]  # nothing stored
