"""A campaign's control tasks and blocked workers (crowdbudget.campaign.control): items of
known answer served to workers by the control rule, the rule and blocking settings, the
workers blocked (by the rule or by hand) with their evidence, and whether the verdict drops
or keeps their labels. Every change is an event; a refused request stores nothing."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from crowdbudget.campaign import Campaign
from crowdbudget.service.dependencies import RequesterDep, ServiceDep
from crowdbudget.service.schemas import BlockRequest, ControlItem, ControlSettings

router = APIRouter()


@router.get("/v1/campaigns/{campaign_id}/control", response_model=dict[str, Any])
def get_control(campaign_id: str, _: RequesterDep, service: ServiceDep) -> dict[str, Any]:
    """The control tasks: ``settings`` (the rule, blocking, ``blocked_labels``, control
    answers and spend on them; null without control tasks), the control ``items`` (item
    order) and the ``blocked_workers`` with their evidence."""

    def read(c: Campaign) -> dict[str, Any]:
        items = [{"item": item, "label": label} for item, label in c.control_items().items()]
        return {
            "settings": c.control_status(),
            "items": items,
            "blocked_workers": c.blocked_workers(),
        }

    result: dict[str, Any] = service.run(campaign_id, read, read=True)
    return result


@router.post("/v1/campaigns/{campaign_id}/control/items", status_code=204)
def add_control_items(
    campaign_id: str, body: list[ControlItem], _: RequesterDep, service: ServiceDep
) -> Response:
    """Make items control items with their known answers (a ``control_items_added``
    event): they are served to workers by the control rule and their answers are evidence
    on each worker; labels they had already count as control answers. Refused whole (nothing
    stored): an empty list, an unknown item or class, an item twice, an item that is a
    control item with another answer. Items that are control items with the same answer
    store nothing (a retried request)."""
    service.limits.check_gold(body, "control")
    rows = [(row.item, row.label) for row in body]
    # caught up first (read=True) although it writes: "the same again stores nothing"
    # compares with the stored control items, not a stale copy's
    service.run(campaign_id, lambda c: c.add_control_items(rows), read=True)
    return Response(status_code=204)


@router.patch("/v1/campaigns/{campaign_id}/control", status_code=204)
def update_control(
    campaign_id: str, body: ControlSettings, _: RequesterDep, service: ServiceDep
) -> Response:
    """Change the control rule (``first_k``, ``rate``; ``rule``: ``fixed`` or ``value``,
    which needs a ``block_below``; ``horizon``), the blocking (``block_below``,
    null: no blocking by the rule; ``block_confidence``, ``min_answers``, ``prior``) and
    ``blocked_labels`` (``drop``: the verdict is fitted without the blocked workers'
    labels; ``keep``: with them). Only the fields given change, for tasks and answers from
    now on; a campaign without control tasks starts them. Checked whole before anything is
    stored."""
    given = body.given()
    given.pop("blocked_labels", None)
    blocked_labels = body.blocked_labels

    def change(c: Campaign) -> None:
        # both checked before either is stored (validate, then commit)
        c.check_control_update(given, blocked_labels)
        if given:
            c.update_control(**given)
        if blocked_labels is not None:
            c.set_blocked_labels(blocked_labels)

    service.run(campaign_id, change, read=True)
    return Response(status_code=204)


@router.get("/v1/campaigns/{campaign_id}/blocked-workers", response_model=list[dict[str, Any]])
def blocked_workers(campaign_id: str, _: RequesterDep, service: ServiceDep) -> Any:
    """The blocked workers in joining order, each with ``by`` (``rule`` or ``requester``),
    ``correct`` of ``answered`` control answers, ``level``, ``p_below`` (the posterior
    probability that their accuracy is below the level) and ``spent`` (the campaign's spend
    when it happened)."""
    return service.run(campaign_id, lambda c: c.blocked_workers(), read=True)


@router.put("/v1/campaigns/{campaign_id}/blocked-workers/{worker_id}", status_code=204)
def block_worker(
    campaign_id: str,
    worker_id: str,
    _: RequesterDep,
    service: ServiceDep,
    body: BlockRequest | None = None,
) -> Response:
    """Block a worker by hand (a ``worker_blocked`` event with their control answers as
    the evidence, and the requester's ``reason`` when the body gives one: one line of 1 to
    200 characters): they get no more work (pull: 204 with ``X-No-Work-Reason: blocked``;
    push: never chosen). Blocked already: nothing stored. 422, nothing stored, for a worker
    not in the campaign or a bad reason."""
    service.limits.check_ids([worker_id], "worker")
    reason = None if body is None else body.reason
    service.run(campaign_id, lambda c: c.block_worker(worker_id, reason=reason), read=True)
    return Response(status_code=204)


@router.delete("/v1/campaigns/{campaign_id}/blocked-workers/{worker_id}", status_code=204)
def unblock_worker(
    campaign_id: str, worker_id: str, _: RequesterDep, service: ServiceDep
) -> Response:
    """Lift a worker's block (a ``worker_unblocked`` event); the control rule blocks them
    no more (block them by hand again if needed). Not blocked: nothing stored."""
    service.limits.check_ids([worker_id], "worker")
    service.run(campaign_id, lambda c: c.unblock_worker(worker_id), read=True)
    return Response(status_code=204)
