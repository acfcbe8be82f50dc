"""Fuzzing the HTTP API with hypothesis: whatever arrives, the answer is never a 5xx."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crowdbudget.service import create_app
from service_helpers import bearer

FINITE = st.floats(allow_nan=False, allow_infinity=False)  # JSON has no NaN or infinity
json_scalars = st.none() | st.booleans() | st.integers() | FINITE | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
campaign_bodies = st.fixed_dictionaries(
    {},
    optional={
        "items": st.lists(st.text(max_size=5), max_size=5) | json_values,
        "budget": st.floats(allow_nan=False, allow_infinity=False) | json_values,
        "classes": st.lists(st.text(max_size=3), max_size=4) | json_values,
        "policy": st.sampled_from(["opt-kg", "kg-random", "uniform", "cvar-kg:alpha=2", "x:y"])
        | st.text(max_size=10),
        "prior": st.lists(FINITE, max_size=3) | json_values,
        "ttl": FINITE | json_values,
        "max_labels_per_item": st.integers(-2, 3) | json_values,
        "worker_prices": st.dictionaries(st.text(max_size=3), FINITE, max_size=2),
    },
)


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> TestClient:
    db = Path(tmp_path_factory.mktemp("fuzz")) / "f.db"
    return TestClient(create_app(f"sqlite:///{db}"), raise_server_exceptions=False)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=campaign_bodies)
def test_create_campaign_never_5xx(api: TestClient, body: dict[str, object]) -> None:
    response = api.post("/v1/campaigns", json=body)
    assert response.status_code < 500, (body, response.text)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    label=json_values,
    assignment=st.text(st.characters(codec="ascii", categories=["L", "N", "P"]), max_size=6),
    auth=st.sampled_from(["requester", "worker", "none", "garbage"]),
    path=st.sampled_from(
        [
            "label",
            "cancel",
            "get",
            "next",
            "status",
            "results",
            "export",
            "dashboard",
            "items",
            "workers",
        ]
    ),
    payload=json_values,
)
def test_campaign_routes_never_5xx(
    api: TestClient, label: object, assignment: str, auth: str, path: str, payload: object
) -> None:
    created = api.post("/v1/campaigns", json={"items": ["a", "b"], "budget": 3}).json()
    cid, key = created["campaign_id"], created["requester_key"]
    token = api.post(
        f"/v1/campaigns/{cid}/workers",
        json={"worker_id": "w"},
        headers=bearer(key),
    ).json()["worker_token"]
    headers = {
        "requester": bearer(key),
        "worker": bearer(token),
        "none": {},
        "garbage": {"Authorization": "Basic zzz"},
    }[auth]
    real = api.post(f"/v1/campaigns/{cid}/assignments", headers=bearer(token))
    aid = (
        real.json()["assignment_id"] if real.status_code == 200 and assignment == "" else assignment
    )
    base = f"/v1/campaigns/{cid}"
    if path == "label":
        r = api.post(f"{base}/assignments/{aid}/label", json={"label": label}, headers=headers)
    elif path == "cancel":
        r = api.post(f"{base}/assignments/{aid}/cancel", headers=headers)
    elif path == "get":
        r = api.get(f"{base}/assignments/{aid}", headers=headers)
    elif path == "next":
        r = api.post(f"{base}/assignments", headers=headers)
    elif path == "items":
        r = api.post(f"{base}/items", json=payload, headers=headers)
    elif path == "workers":
        r = api.post(f"{base}/workers", json=payload, headers=headers)
    else:
        r = api.get(f"{base}/{path}", headers=headers)
    assert r.status_code < 500, (path, auth, label, payload, r.text)


def test_non_json_numbers_and_broken_bodies_are_4xx(api: TestClient) -> None:
    for content in [
        b'{"items": ["a"], "budget": NaN}',
        b'{"items": ["a"], "budget": Infinity}',
        b"{not json",
        b"",
        b"[]",
    ]:
        r = api.post("/v1/campaigns", content=content, headers={"Content-Type": "application/json"})
        assert 400 <= r.status_code < 500, (content, r.status_code, r.text)
