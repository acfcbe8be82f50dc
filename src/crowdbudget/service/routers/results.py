"""What a campaign has produced so far: its status, its results (final label and
confidence per item, from its verdict or another), and everything the dashboard draws.

Each answer is computed once per event count and query (the read cache); an aggregator
verdict is fitted in a child process under the server's deadline
(:mod:`crowdbudget.service.expensive`: 503 past it, or while the compute slots are busy,
with ``Retry-After``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from crowdbudget.campaign import Campaign
from crowdbudget.service import expensive
from crowdbudget.service.dependencies import RequesterDep, ServiceDep

router = APIRouter()

#: a ``verdict`` query parameter: ``posterior`` or an aggregator id with its parameters
VerdictQuery = Annotated[str | None, Query(min_length=1, max_length=200)]


def encoded(value: Any) -> bytes:
    """``value`` as the JSON body FastAPI would send for it."""
    return bytes(JSONResponse(jsonable_encoder(value)).body)


@router.get("/v1/campaigns/{campaign_id}/status", response_model=dict[str, Any])
async def status(
    campaign_id: str, request: Request, _: RequesterDep, service: ServiceDep
) -> Response:
    """Spending and progress: spent, committed, remaining, pending, labels, estimated
    accuracy (the campaign's verdict's), whether the policy stopped, control tasks and
    blocked workers (``Campaign.status``). Computed once per event count (overdue
    assignments are released first); an aggregator verdict is fitted as for
    ``…/results``."""
    answer = await expensive.status_answer(service, request, campaign_id)
    return Response(answer, media_type="application/json")


@router.get("/v1/campaigns/{campaign_id}/results", response_model=list[dict[str, Any]])
async def results(
    campaign_id: str,
    request: Request,
    _: RequesterDep,
    service: ServiceDep,
    verdict: VerdictQuery = None,
    floor: bool = False,
) -> Response:
    """Final label, confidence (the verdict's probability of that label) and number of
    labels per item, from the campaign's verdict or the ``verdict`` asked for
    (``posterior`` or an aggregator id such as ``ds``); ``floor=true``: confidences
    under the probability floor fitted on the campaign's gold sample (the ``floor``
    of ``…/calibration``; 422 while no gold item has a label). Computed once per event
    count and query; an aggregator verdict is fitted in a child process under the
    server's deadline (503 past it, or while the server's compute slots are busy:
    ``Retry-After``)."""
    service.limits.check_verdict(verdict)

    def compose(c: Campaign, fitted: Any) -> bytes:
        frame = c.results(verdict, floor=floor, fitted=fitted)
        # 15 digits, pandas' most: its default of 10 would print an EM confidence of
        # 1 - 1e-12 as 1.0 (the calibration endpoint reports full precision too)
        return str(frame.reset_index().to_json(orient="records", double_precision=15)).encode()

    answer = await expensive.fitted_read(
        service,
        request,
        campaign_id,
        "results",
        (verdict, floor),
        lambda c: c.verdict_fit_input(verdict),
        compose,
    )
    return Response(answer, media_type="application/json")


@router.get("/v1/campaigns/{campaign_id}/dashboard", response_model=dict[str, Any])
async def dashboard_data(
    campaign_id: str, request: Request, _: RequesterDep, service: ServiceDep
) -> Response:
    """Everything the dashboard draws (status, spend over time, labels per item,
    worker agreement, and with gold the ``calibration`` on it, as ``…/calibration``).
    Computed once per event count (the page polls it); the campaign's verdict is fitted
    as for ``…/results``."""
    answer = await expensive.fitted_read(
        service,
        request,
        campaign_id,
        "dashboard",
        (),
        expensive.dashboard_fit_input,
        lambda c, fitted: encoded(expensive.dashboard_data(c, fitted)),
        expire_first=True,
    )
    return Response(answer, media_type="application/json")
