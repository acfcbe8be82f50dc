"""A campaign's gold labels (true classes for a sample of its items) and the calibration
of its verdict on them. Gold measures the verdict and nothing else: the policy and the
verdict never read it, so it changes no assignment and no result."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response

from crowdbudget.service import expensive
from crowdbudget.service.dependencies import RequesterDep, ServiceDep
from crowdbudget.service.routers.results import VerdictQuery, encoded
from crowdbudget.service.schemas import GoldLabel

router = APIRouter()

#: the encoded answer of a campaign without gold (Campaign.calibration's None)
_NULL = b"null"


@router.put("/v1/campaigns/{campaign_id}/gold", status_code=204)
def put_gold(
    campaign_id: str, body: list[GoldLabel], _: RequesterDep, service: ServiceDep
) -> Response:
    """Replace the campaign's gold labels: true classes for a sample of its items (at
    most one row per item). They measure the verdict (``GET …/calibration``, the
    dashboard) and nothing else: the policy and the verdict never read them, so they
    change no assignment and no result. Stored as a ``gold_set`` event; the same gold
    again stores nothing."""
    service.limits.check_gold(body)
    rows = [(row.item, row.label) for row in body]
    # caught up first (read=True) although it writes: "the same gold again stores
    # nothing" must compare with the stored gold, not a stale copy's
    service.run(campaign_id, lambda c: c.set_gold(rows), read=True)
    return Response(status_code=204)


@router.get("/v1/campaigns/{campaign_id}/gold", response_model=list[GoldLabel])
def get_gold(campaign_id: str, _: RequesterDep, service: ServiceDep) -> list[GoldLabel]:
    """The gold labels, in item order (an empty list: none)."""
    gold = service.run(campaign_id, lambda c: c.gold(), read=True)
    return [GoldLabel(item=item, label=label) for item, label in gold.items()]


@router.delete("/v1/campaigns/{campaign_id}/gold", status_code=204)
def delete_gold(campaign_id: str, _: RequesterDep, service: ServiceDep) -> Response:
    """Remove the gold labels (a ``gold_removed`` event; without gold, nothing)."""
    service.run(campaign_id, lambda c: c.remove_gold(), read=True)  # as put_gold
    return Response(status_code=204)


@router.get("/v1/campaigns/{campaign_id}/calibration", response_model=dict[str, Any])
async def calibration(
    campaign_id: str,
    request: Request,
    _: RequesterDep,
    service: ServiceDep,
    verdict: VerdictQuery = None,
) -> Response:
    """Accuracy and calibration of the verdict's probabilities (those ``…/results``
    reports; ``verdict``: another verdict) on the gold items with at least one label:
    ``n_gold``, ``n_scored``, ``accuracy``, ``confidence`` (mean), ``ece``,
    ``ece_mass``, ``nll``, ``brier`` and the reliability diagram's ``bins`` (10
    equal-width bins of the confidence: ``count``, mean ``confidence``, ``accuracy``).
    404 while the campaign has no gold. Computed once per event count and query; the
    verdict is fitted as for ``…/results``."""
    service.limits.check_verdict(verdict)
    answer = await expensive.fitted_read(
        service,
        request,
        campaign_id,
        "calibration",
        (verdict,),
        # without gold there is nothing to calibrate: no fit (the answer is a 404)
        lambda c: c.verdict_fit_input(verdict) if c.gold() else None,
        lambda c, fitted: encoded(c.calibration(verdict, fitted=fitted)),
    )
    if answer == _NULL:
        raise HTTPException(
            404,
            f"campaign {campaign_id} has no gold labels; upload them with "
            f"PUT /v1/campaigns/{campaign_id}/gold",
        )
    return Response(answer, media_type="application/json")
