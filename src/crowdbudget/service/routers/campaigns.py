"""Campaigns, their items and their keys: create and list (operator), change settings,
rotate the requester key, add items (JSON or CSV), issue, rotate and revoke worker tokens."""

from __future__ import annotations

import io
from typing import Annotated, Any

import pandas as pd
from fastapi import APIRouter, HTTPException, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from crowdbudget.campaign import Campaign
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.service import expensive
from crowdbudget.service.dependencies import (
    Authorization,
    OperatorDep,
    RequesterDep,
    RequesterOrOperatorDep,
    ServiceDep,
    bearer,
)
from crowdbudget.service.host import Service
from crowdbudget.service.schemas import (
    CampaignCreate,
    CampaignCreated,
    CampaignSettingsUpdate,
    ItemsAdd,
    RequesterKey,
    WorkerCreate,
    WorkerRevoked,
    WorkerToken,
)

router = APIRouter()


@router.post("/v1/campaigns", response_model=CampaignCreated, status_code=201)
def create_campaign(
    body: CampaignCreate, creator: OperatorDep, service: ServiceDep
) -> CampaignCreated:
    """Create a campaign (needs the operator key when the server has one); the response
    holds its requester key (shown once). The policy's set-up is tried first under the
    server's time limit; nothing is stored unless the whole configuration works and the
    server's campaign quotas (per server, per operator key) leave room."""
    config = service.limits.campaign_config(body)
    service.check_campaign_quota(creator)  # before the set-up's cost, and again after
    service.expensive.check_setup(config)
    campaign = service.create_campaign(config, creator)
    key = service.keys.add(campaign.campaign_id, "requester")
    return CampaignCreated(campaign_id=campaign.campaign_id, requester_key=key)


@router.get("/v1/campaigns", response_model=list[dict[str, Any]])
async def list_campaigns(
    request: Request,
    service: ServiceDep,
    authorization: Authorization = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Any:
    """With the operator key: every campaign's id (``limit``/``offset`` pages through
    them). With a requester key: the status of the campaigns it controls."""
    key = bearer(authorization)
    if service.keys.is_operator(key):
        ids = service.store.campaign_ids()[offset : offset + limit]
        return [{"campaign_id": cid} for cid in ids]
    ids = service.keys.campaigns_of(key)
    if not ids:
        raise HTTPException(403, "this key is neither the operator key nor a requester key")
    # each status as ``…/status`` answers it (its verdict fitted in a child, kept per count)
    answers = [await expensive.status_answer(service, request, cid) for cid in ids]
    return Response(b"[" + b",".join(answers) + b"]", media_type="application/json")


@router.patch("/v1/campaigns/{campaign_id}", status_code=204)
def update_settings(
    campaign_id: str, body: CampaignSettingsUpdate, _: RequesterDep, service: ServiceDep
) -> Response:
    """Change the time-to-live or the pending assignments a worker may hold (they apply
    to assignments handed out from now on)."""
    service.limits.check_settings_update(body)
    service.run(
        campaign_id,
        lambda c: c.update_settings(
            ttl=body.ttl, max_pending_per_worker=body.max_pending_per_worker
        ),
    )
    return Response(status_code=204)


@router.post("/v1/campaigns/{campaign_id}/requester-key", response_model=RequesterKey)
def rotate_requester_key(
    campaign_id: str, _: RequesterOrOperatorDep, service: ServiceDep
) -> RequesterKey:
    """A new requester key (shown once); every earlier requester key stops working."""
    service.campaign(campaign_id)
    key = service.keys.rotate_requester_key(campaign_id)
    return RequesterKey(campaign_id=campaign_id, requester_key=key)


@router.post("/v1/campaigns/{campaign_id}/items", status_code=204)
def add_items(campaign_id: str, body: ItemsAdd, _: RequesterDep, service: ServiceDep) -> Response:
    """Add items (with their contexts and features when the campaign has them)."""
    grow_campaign(service, campaign_id, body.items, body.contexts, body.features)
    return Response(status_code=204)


@router.post("/v1/campaigns/{campaign_id}/items/csv", status_code=204)
async def add_items_csv(
    campaign_id: str, request: Request, _: RequesterDep, service: ServiceDep
) -> Response:
    """Add items from a CSV body, for large feature matrices: a column ``item``, an
    optional integer column ``context``, and every other column a feature (in order)."""
    body = (await request.body()).decode("utf-8", errors="replace")
    try:
        frame = pd.read_csv(io.StringIO(body), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError):
        raise HTTPException(422, "body is not a CSV with a column 'item'") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if "item" not in frame.columns:
        raise InvalidParameterError("the CSV needs a column 'item' (then 'context', features)")
    items = frame["item"].tolist()
    contexts = None
    if "context" in frame.columns:
        try:
            contexts = [int(c) for c in frame["context"]]
        except ValueError:
            raise InvalidParameterError("column 'context' must hold integers >= 0") from None
    columns = [c for c in frame.columns if c not in ("item", "context")]
    features = None
    if columns:
        try:
            features = frame[columns].astype(float).to_numpy().tolist()
        except ValueError:
            raise InvalidParameterError(
                f"feature columns must hold numbers: {', '.join(columns[:5])}"
            ) from None
    await run_in_threadpool(grow_campaign, service, campaign_id, items, contexts, features)
    return Response(status_code=204)


def grow_campaign(
    service: Service,
    campaign_id: str,
    items: list[str],
    contexts: list[int] | None,
    features: list[list[float]] | None,
) -> None:
    """Add ``items`` (with their ``contexts`` and ``features`` when the campaign has them)
    within the server's limits: the set-up on the larger problem is tried first, outside
    the campaign's lock (:meth:`ExpensiveWork.check_setup`)."""
    service.limits.check_ids(items, "item")
    features = service.limits.checked_features(features)

    def grown(c: Campaign) -> dict[str, Any]:
        assert c.config is not None
        config = c.config.to_payload()
        config.pop("campaign_id")
        service.limits.check_item_quota(len(c.item_ids) + len(items))
        config.pop("control", None)  # the set-up on the larger problem needs no control
        grown = {**config, "items": [*c.item_ids, *items]}
        for name, have, given in (
            ("contexts", c._item_contexts, contexts),
            ("features", c._item_features, features),
        ):
            if (have is None) != (given is None):
                missing = "have" if have is not None else "have no"
                raise InvalidParameterError(f"this campaign's items {missing} {name}")
            if have is not None and given is not None:
                grown[name] = [*have, *given]
        return grown

    def add(c: Campaign) -> None:
        # checked again under the lock: another request may have added items meanwhile
        service.limits.check_item_quota(len(c.item_ids) + len(items))
        c.add_items(items, contexts=contexts, features=features)

    config = service.run(campaign_id, grown, read=True)
    service.expensive.check_setup(config)
    service.run(campaign_id, add)


@router.post("/v1/campaigns/{campaign_id}/workers", response_model=WorkerToken, status_code=201)
def add_worker(
    campaign_id: str, body: WorkerCreate, _: RequesterDep, service: ServiceDep
) -> WorkerToken:
    """Issue a token for a worker (a worker may hold several tokens); the worker joins
    the campaign (a ``workers_added`` event) if new to it."""
    service.limits.check_ids([body.worker_id], "worker")
    service.run(campaign_id, lambda c: c.add_workers([body.worker_id]))
    token = service.keys.add(campaign_id, "worker", body.worker_id)
    return WorkerToken(worker_id=body.worker_id, worker_token=token)


@router.post(
    "/v1/campaigns/{campaign_id}/workers/{worker_id}/rotate",
    response_model=WorkerToken,
    status_code=201,
)
def rotate_worker_token(
    campaign_id: str, worker_id: str, _: RequesterDep, service: ServiceDep
) -> WorkerToken:
    """A new token for the worker; their earlier tokens stop working (their pending
    assignments stay theirs)."""
    service.limits.check_ids([worker_id], "worker")
    service.campaign(campaign_id)
    service.keys.revoke(campaign_id, "worker", worker_id)
    token = service.keys.add(campaign_id, "worker", worker_id)
    return WorkerToken(worker_id=worker_id, worker_token=token)


@router.delete("/v1/campaigns/{campaign_id}/workers/{worker_id}", response_model=WorkerRevoked)
def revoke_worker(
    campaign_id: str, worker_id: str, _: RequesterDep, service: ServiceDep
) -> WorkerRevoked:
    """Revoke every token of the worker and cancel their pending assignments (the
    budget they held returns at once); their answered labels stay."""
    service.limits.check_ids([worker_id], "worker")
    service.campaign(campaign_id)
    revoked = service.keys.revoke(campaign_id, "worker", worker_id)

    def cancel_all(c: Campaign) -> int:
        pending = c.pending_assignments(worker_id)
        for a in pending:
            c.cancel_assignment(a.assignment_id)
        return len(pending)

    cancelled = service.run(campaign_id, cancel_all)
    return WorkerRevoked(
        worker_id=worker_id, revoked_tokens=revoked, cancelled_assignments=cancelled
    )
