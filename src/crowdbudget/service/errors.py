"""Error answers: always JSON ``{"detail": "<one line>"}`` (:func:`clip_detail`: never more
than a short prefix of the input), with the status each kind of error means."""

from __future__ import annotations

import math
import types
import typing
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from crowdbudget.campaign import AssignmentError, ConcurrentWriteError, UnknownAssignmentError
from crowdbudget.exceptions import CrowdBudgetError
from crowdbudget.service.guards import clip_detail
from crowdbudget.service.setup_probe import ComputeBusyError, ComputeTimeoutError


def _field(problem: dict[str, object]) -> str:
    """The field a validation problem is about, dotted (``workers.0.worker_id``), without the
    ``body`` root (an unknown key is the client's own name: the detail is clipped)."""
    loc = problem.get("loc", ())
    parts = loc if isinstance(loc, (list, tuple)) else ()
    return ".".join(str(part) for part in parts if part != "body")


def _arms(annotation: Any) -> tuple[Any, ...]:
    """The types ``annotation`` may be: the arms of a union (``X | None``), the type under
    ``Annotated[...]``, else ``annotation`` itself."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _arms(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return tuple(arm for arg in typing.get_args(annotation) for arm in _arms(arg))
    return (annotation,)


def _step(annotation: Any, key: object) -> Any:
    """The type at ``key`` (an index into a list, a field of a model) of a value typed
    ``annotation``; ``None`` when none of its arms has that key."""
    for arm in _arms(annotation):
        if isinstance(key, int) and typing.get_origin(arm) is list:
            return typing.get_args(arm)[0]
        if isinstance(arm, type) and issubclass(arm, BaseModel) and key in arm.model_fields:
            # the hints, not model_fields' annotations: a model declared further down the
            # module is a forward reference there until pydantic resolves it for itself
            return typing.get_type_hints(arm)[str(key)]
    return None


def _allowed_fields(request: Request, loc: tuple[object, ...]) -> list[str]:
    """The fields of the request model that refused an unknown key at ``loc`` (``body``,
    the path to that model, the key): the route's body type walked along the path;
    empty when it cannot be found."""
    body_field = getattr(request.scope.get("route"), "body_field", None)
    current: Any = getattr(getattr(body_field, "field_info", None), "annotation", None)
    for key in loc[1:-1]:
        current = _step(current, key)
    models = [arm for arm in _arms(current) if isinstance(arm, type)]
    for model in models:
        if issubclass(model, BaseModel):
            return sorted(model.model_fields)
    return []


def _describe(request: Request, problem: dict[str, Any]) -> str:
    """One problem on one line: an unknown field with the fields its model allows (a typo
    such as ``polcy`` is fixed by reading the list), any other as pydantic words it."""
    if problem.get("type") != "extra_forbidden":
        return f"{_field(problem) or 'body'}: {problem.get('msg', 'invalid')}"
    loc = problem.get("loc", ())
    allowed = _allowed_fields(request, tuple(loc) if isinstance(loc, (list, tuple)) else ())
    listed = f"; allowed: {', '.join(allowed)}" if allowed else ""
    return f"unknown field '{_field(problem)}'{listed}"


async def invalid_request(request: Request, error: RequestValidationError) -> JSONResponse:
    """422 naming the first bad field and what is allowed (the input itself is not echoed:
    it may not even be valid JSON, e.g. NaN). An unknown field comes first, with the
    fields its model allows (a misspelt field name often also leaves a required one
    missing: the typo is the cause)."""
    problems = sorted(error.errors(), key=lambda problem: problem.get("type") != "extra_forbidden")
    first = problems[0] if problems else {"loc": (), "msg": "invalid request"}
    others = [_field(problem) for problem in problems[1:]]
    more = ""
    if others:
        named = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        more = f" (and {len(others)} more: {named})"
    return JSONResponse({"detail": clip_detail(_describe(request, first) + more)}, status_code=422)


async def crowdbudget_error(_: Request, error: CrowdBudgetError) -> JSONResponse:
    """503 (with ``Retry-After`` when the compute pool is busy) for expensive work refused or
    stopped; 404 an unknown assignment; 409 an assignment that cannot take the request or a
    write lost to another process; 422 any other refusal."""
    if isinstance(error, ComputeBusyError):
        return JSONResponse(
            {"detail": clip_detail(str(error))},
            status_code=503,
            headers={"retry-after": str(math.ceil(error.retry_after))},
        )
    if isinstance(error, ComputeTimeoutError):
        return JSONResponse({"detail": clip_detail(str(error))}, status_code=503)
    if isinstance(error, UnknownAssignmentError):
        status = 404
    elif isinstance(error, AssignmentError | ConcurrentWriteError):
        status = 409
    else:
        status = 422
    return JSONResponse({"detail": clip_detail(str(error))}, status_code=status)


async def http_error(_: Request, error: StarletteHTTPException) -> JSONResponse:
    """The route's own status and headers, the detail on one line."""
    return JSONResponse(
        {"detail": clip_detail(str(error.detail))},
        status_code=error.status_code,
        headers=getattr(error, "headers", None),
    )


async def server_error(_: Request, error: Exception) -> JSONResponse:
    """A fault of the server: JSON like every other answer, and nothing about the internals
    (the traceback goes to the server's log)."""
    return JSONResponse({"detail": "internal server error"}, status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` as above."""
    app.add_exception_handler(RequestValidationError, invalid_request)  # type: ignore[arg-type]
    app.add_exception_handler(CrowdBudgetError, crowdbudget_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, server_error)
