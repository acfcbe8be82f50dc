"""FastAPI dependencies: the process's :class:`~crowdbudget.service.host.Service` and who
is calling (the operator, a campaign's requester, one of its workers).

Keys travel in the ``Authorization: Bearer <key>`` header. A missing or malformed header
gets 401, a key without the access the route needs 403; neither changes anything. The key
checks are coroutines: FastAPI runs a plain ``def`` dependency in the thread pool, one extra
hop per request, and a cached key needs none
(:meth:`~crowdbudget.service.credentials.Credentials.who_async`).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from crowdbudget.service.credentials import ANYONE, hash_key
from crowdbudget.service.host import Service

#: the ``Authorization`` header, as a route parameter
Authorization = Annotated[str | None, Header()]


def get_service(request: Request) -> Service:
    """The :class:`Service` of the application serving ``request``."""
    service: Service = request.app.state.service
    return service


ServiceDep = Annotated[Service, Depends(get_service)]


def bearer(authorization: str | None) -> str:
    """The key of an ``Authorization: Bearer <key>`` header; 401 without one."""
    if not authorization:
        raise HTTPException(401, "missing key: send 'Authorization: Bearer <key>'")
    scheme, _, key = authorization.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        raise HTTPException(401, "malformed Authorization header; expected 'Bearer <key>'")
    return key.strip()


async def operator(service: ServiceDep, authorization: Authorization = None) -> str:
    """Who creates: the operator key's SHA-256 (:data:`ANYONE` on a server without one)."""
    if service.settings.operator_key is None:
        return ANYONE  # no operator key: serve binds to loopback only (crowdbudget serve)
    key = bearer(authorization)
    if not service.keys.is_operator(key):
        raise HTTPException(403, "this key is not the operator key of this server")
    return hash_key(key)


async def requester(
    campaign_id: str, service: ServiceDep, authorization: Authorization = None
) -> None:
    """Only the campaign's requester key passes."""
    found = await service.keys.who_async(campaign_id, bearer(authorization))
    if found is None or found[0] != "requester":
        raise HTTPException(403, "this key is not the requester key of this campaign")


async def requester_or_operator(
    campaign_id: str, service: ServiceDep, authorization: Authorization = None
) -> None:
    """The campaign's requester key or the operator key passes."""
    key = bearer(authorization)
    if service.keys.is_operator(key):
        return
    found = await service.keys.who_async(campaign_id, key)
    if found is None or found[0] != "requester":
        raise HTTPException(403, "this key is neither the requester key nor the operator key")


async def worker(campaign_id: str, service: ServiceDep, authorization: Authorization = None) -> str:
    """Only a worker token of the campaign passes; the worker's id."""
    found = await service.keys.who_async(campaign_id, bearer(authorization))
    if found is None or found[0] != "worker" or found[1] is None:
        raise HTTPException(403, "this key is not a worker token of this campaign")
    return found[1]


async def anyone(
    campaign_id: str, service: ServiceDep, authorization: Authorization = None
) -> tuple[str, str | None]:
    """Any key of the campaign passes: ``(role, worker id or None)``."""
    found = await service.keys.who_async(campaign_id, bearer(authorization))
    if found is None:
        raise HTTPException(403, "this key gives no access to this campaign")
    return found


OperatorDep = Annotated[str, Depends(operator)]
RequesterDep = Annotated[None, Depends(requester)]
RequesterOrOperatorDep = Annotated[None, Depends(requester_or_operator)]
WorkerDep = Annotated[str, Depends(worker)]
AnyoneDep = Annotated[tuple[str, str | None], Depends(anyone)]
