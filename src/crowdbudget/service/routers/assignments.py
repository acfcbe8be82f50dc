"""Assignments: the label round trip (a worker asks for work, answers it), the pending
list, cancel, one assignment, push mode, and labels imported from elsewhere.

The round trip's two routes carry almost all the traffic: :func:`add_round_trip` adds them
to the application first (routes are matched in order), bound by hand instead of through
FastAPI's per-request machinery.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Annotated, Any

import pandas as pd
from fastapi import APIRouter, FastAPI, HTTPException, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.routing import request_response

from crowdbudget.campaign import PendingAssignment
from crowdbudget.exceptions import InvalidParameterError
from crowdbudget.service import expensive
from crowdbudget.service.dependencies import (
    AnyoneDep,
    RequesterDep,
    ServiceDep,
    WorkerDep,
    get_service,
    worker,
)
from crowdbudget.service.schemas import (
    AssignmentOut,
    LabelSubmit,
    RequestT,
    TeamPush,
    assignment_out,
)

router = APIRouter()

#: the header of a 204 "no work" answer that says why
NO_WORK_REASON = "X-No-Work-Reason"


def _assignment_json(a: PendingAssignment, status_code: int = 200) -> JSONResponse:
    """The :class:`AssignmentOut` body built directly (the hot endpoints skip FastAPI's
    pydantic validation and serialization of the response; the schema stays declared)."""
    return JSONResponse(
        {
            "assignment_id": a.assignment_id,
            "item_id": a.item_id,
            "worker_id": a.worker_id,
            "price": a.price,
            "expires_at": a.expires_at,
            "status": a.status,
            "label": a.label,
        },
        status_code=status_code,
    )


async def next_assignment(campaign_id: str, worker_id: WorkerDep, service: ServiceDep) -> Response:
    """The next item for the calling worker, or 204 when there is none, with the reason
    in the header ``X-No-Work-Reason`` when the campaign knows it (``blocked``: the worker
    is blocked; ``budget``, ``capacity``, ``done``, ``policy``, ``declined``). A worker who
    holds as many unanswered assignments as the campaign allows gets the oldest of them
    again (a response lost on the way is not lost work)."""
    assignment, reason = await expensive.next_assignment(service, campaign_id, worker_id)
    if assignment is None:
        headers = {} if reason is None else {NO_WORK_REASON: reason}
        return Response(status_code=204, headers=headers)
    return _assignment_json(assignment)


async def submit_label(
    campaign_id: str,
    assignment_id: str,
    body: LabelSubmit,
    worker_id: WorkerDep,
    service: ServiceDep,
) -> Response:
    """Answer one's own assignment (idempotent for the same label)."""
    service.limits.check_label(body.label)
    assignment = await service.run_async(
        campaign_id, lambda c: c.record_label(assignment_id, body.label, worker_id=worker_id)
    )
    return _assignment_json(assignment)


async def _json_body(request: Request, model: type[RequestT]) -> RequestT:
    """The request body validated into ``model``, errors reported as FastAPI reports them
    (422 through the app's :class:`RequestValidationError` handler)."""
    try:
        return model.model_validate_json(await request.body())
    except ValidationError as error:
        problems = [
            {**problem, "loc": ("body", *problem.get("loc", ()))} for problem in error.errors()
        ]
        raise RequestValidationError(problems) from None


async def _next_assignment_direct(request: Request) -> Response:
    campaign_id = request.path_params["campaign_id"]
    service = get_service(request)
    worker_id = await worker(campaign_id, service, request.headers.get("authorization"))
    return await next_assignment(campaign_id, worker_id, service)


async def _submit_label_direct(request: Request) -> Response:
    campaign_id = request.path_params["campaign_id"]
    service = get_service(request)
    worker_id = await worker(campaign_id, service, request.headers.get("authorization"))
    body = await _json_body(request, LabelSubmit)
    assignment_id = request.path_params["assignment_id"]
    return await submit_label(campaign_id, assignment_id, body, worker_id, service)


def add_round_trip(app: FastAPI) -> None:
    """Add the round trip's two routes to ``app``, served by handlers that bind the
    arguments themselves and call :func:`next_assignment` / :func:`submit_label`. FastAPI
    still documents the routes from those functions' signatures (the OpenAPI schema is the
    same); only its generic per-request machinery (dependency solver, body model
    validation) is skipped, a sixth of the server's CPU per round trip
    (docs/decisions.md)."""
    app.add_api_route(
        "/v1/campaigns/{campaign_id}/assignments",
        next_assignment,
        methods=["POST"],
        response_model=AssignmentOut,
        responses={204: {"description": "no work for this worker now"}},
    )
    app.add_api_route(
        "/v1/campaigns/{campaign_id}/assignments/{assignment_id}/label",
        submit_label,
        methods=["POST"],
        response_model=AssignmentOut,
    )
    handlers: dict[Callable[..., Any], Callable[[Request], Any]] = {
        next_assignment: _next_assignment_direct,
        submit_label: _submit_label_direct,
    }
    for route in app.router.routes:
        if isinstance(route, APIRoute) and route.endpoint in handlers:
            route.app = request_response(handlers.pop(route.endpoint))
    if handlers:
        raise LookupError(f"no route for {', '.join(f.__name__ for f in handlers)}")


@router.get("/v1/campaigns/{campaign_id}/assignments", response_model=list[AssignmentOut])
def pending_assignments(
    campaign_id: str,
    _: RequesterDep,
    service: ServiceDep,
    worker_id: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> list[AssignmentOut]:
    """The unanswered assignments (of one worker, or all, oldest first per worker; at
    most ``limit``); cancel any with ``POST …/assignments/{id}/cancel``."""
    pending = service.run(campaign_id, lambda c: c.pending_assignments(worker_id), read=True)
    return [assignment_out(a) for a in pending[:limit]]


@router.post("/v1/campaigns/{campaign_id}/assignments/{assignment_id}/cancel", status_code=204)
async def cancel(
    campaign_id: str, assignment_id: str, who: AnyoneDep, service: ServiceDep
) -> Response:
    role, worker_id = who
    await service.run_async(
        campaign_id,
        lambda c: c.cancel_assignment(
            assignment_id, worker_id=worker_id if role == "worker" else None
        ),
    )
    return Response(status_code=204)


@router.get("/v1/campaigns/{campaign_id}/assignments/{assignment_id}", response_model=AssignmentOut)
def get_assignment(
    campaign_id: str, assignment_id: str, who: AnyoneDep, service: ServiceDep
) -> AssignmentOut:
    role, worker_id = who
    assignment = service.run(campaign_id, lambda c: c.assignment(assignment_id), read=True)
    if role == "worker" and assignment.worker_id != worker_id:
        raise HTTPException(403, "this assignment belongs to another worker")
    return assignment_out(assignment)


@router.post("/v1/campaigns/{campaign_id}/push", response_model=list[AssignmentOut])
def push(
    campaign_id: str, body: TeamPush, _: RequesterDep, service: ServiceDep
) -> list[AssignmentOut]:
    """Push mode. With ``count`` (a campaign created with ``mode: push``): up to that many
    assignments whose workers the policy chose; the requester dispatches each to its
    worker. With ``worker_ids`` (a managed team, any campaign): one assignment per listed
    worker, in turn, while work is available (workers with nothing left, or holding as
    many unanswered assignments as the campaign allows, are skipped)."""
    if (body.worker_ids is None) == (body.count is None):
        raise InvalidParameterError(
            "give either 'count' (the policy picks the workers) or 'worker_ids'"
        )
    if body.count is not None:
        count = body.count
        assignments = service.run(campaign_id, lambda c: c.push_assignments(count))
    else:
        team = body.worker_ids or []
        service.limits.check_ids(team, "worker")
        assignments = service.run(campaign_id, lambda c: c.next_assignments(team))
    return [assignment_out(a) for a in assignments]


@router.post("/v1/campaigns/{campaign_id}/labels/import")
async def import_labels(
    campaign_id: str, request: Request, _: RequesterDep, service: ServiceDep
) -> dict[str, int]:
    """Labels collected elsewhere, as crowd-kit's CSV ``task,worker,label`` in the body;
    they inform the posterior and the results and cost nothing from the budget."""
    body = (await request.body()).decode("utf-8", errors="replace")
    try:
        frame = pd.read_csv(io.StringIO(body), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError):
        raise HTTPException(422, "body is not a CSV with columns task,worker,label") from None
    frame.columns = [str(c).strip().lower() for c in frame.columns]
    longest = {c: frame[c].str.len().max() for c in ("worker", "label") if c in frame.columns}
    service.limits.check_imported(len(frame), longest)
    n = await run_in_threadpool(service.run, campaign_id, lambda c: c.import_labels(frame))
    return {"imported": n}
