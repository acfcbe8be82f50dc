"""A misspelt field in a request body is refused with a one-line 422 that names the field and
lists the fields allowed where it stands, for every strict request model of the service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crowdbudget.service import schemas
from service_helpers import OPERATOR, Api

#: (request model, method, path under the campaign ("" for creation), body with a typo, the
#: dotted name of the unknown field); a list body or a nested model puts the typo inside
CASES: list[tuple[type[schemas.StrictRequest], str, str, Any, str]] = [
    (schemas.CampaignCreate, "POST", "", {"items": ["a"], "budget": 3, "polcy": "x"}, "polcy"),
    (
        schemas.ControlCreate,
        "POST",
        "",
        {"items": ["a"], "budget": 3, "control": {"frist_k": 2}},
        "control.frist_k",
    ),
    (
        schemas.ControlItem,
        "POST",
        "/control/items",
        [{"item": "i0", "label": "1", "lable": "1"}],
        "0.lable",
    ),
    (schemas.ControlSettings, "PATCH", "/control", {"rat": 0.1}, "rat"),
    (schemas.BlockRequest, "PUT", "/blocked-workers/w", {"reson": "spam"}, "reson"),
    (schemas.CampaignSettingsUpdate, "PATCH", "", {"tll": 5}, "tll"),
    (schemas.ItemsAdd, "POST", "/items", {"items": ["z"], "context": [0]}, "context"),
    (schemas.WorkerCreate, "POST", "/workers", {"worker_id": "w", "worker": "w"}, "worker"),
    (schemas.TeamPush, "POST", "/push", {"cont": 1}, "cont"),
    (schemas.GoldLabel, "PUT", "/gold", [{"item": "i0", "label": "1", "labl": "1"}], "0.labl"),
    (
        schemas.LabelSubmit,
        "POST",
        "/assignments/{assignment}/label",
        {"label": "1", "lable": "1"},
        "lable",
    ),
]


def _strict_models() -> set[type[schemas.StrictRequest]]:
    """Every request model of the service that forbids unknown fields."""
    found: set[type[schemas.StrictRequest]] = set()
    todo = list(schemas.StrictRequest.__subclasses__())
    while todo:
        model = todo.pop()
        found.add(model)
        todo.extend(model.__subclasses__())
    return found


def test_every_strict_request_model_is_covered() -> None:
    assert {case[0] for case in CASES} == _strict_models()


@pytest.mark.parametrize("case", CASES, ids=[case[0].__name__ for case in CASES])
def test_an_unknown_field_is_named_with_the_allowed_ones(
    tmp_path: Path, case: tuple[type[schemas.StrictRequest], str, str, Any, str]
) -> None:
    model, method, path, body, unknown = case
    api = Api(tmp_path)
    created = api.create(control={"items": [{"item": "i0", "label": "1"}], "first_k": 1})
    cid, boss = created["campaign_id"], created["requester_key"]
    key = boss
    if "{assignment}" in path:
        key = api.worker(cid, boss, "w")
        work = api.call("POST", f"/v1/campaigns/{cid}/assignments", key)
        assert work.status_code == 200, work.text
        path = path.replace("{assignment}", work.json()["assignment_id"])
    base = "/v1/campaigns" if model in (schemas.CampaignCreate, schemas.ControlCreate) else None
    url = base or f"/v1/campaigns/{cid}{path}"
    sender = OPERATOR if base else key
    detail = api.refused(method, url, sender, 422, json=body)
    allowed = ", ".join(sorted(model.model_fields))
    assert detail == f"unknown field '{unknown}'; allowed: {allowed}", detail


def test_the_unknown_field_comes_first_with_the_other_problems_named(tmp_path: Path) -> None:
    """A typo of a required field also leaves it missing: the typo, the cause, is first."""
    api = Api(tmp_path)
    detail = api.refused("POST", "/v1/campaigns", OPERATOR, 422, json={"items": ["a"], "budgte": 3})
    assert detail.startswith("unknown field 'budgte'; allowed: budget, classes, "), detail
    assert detail.endswith(" (and 1 more: budget)"), detail
