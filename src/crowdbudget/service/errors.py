"""Error answers: always JSON ``{"detail": "<one line>"}`` (:func:`clip_detail`: never more
than a short prefix of the input), with the status each kind of error means."""

from __future__ import annotations

import math

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
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


async def invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
    """422 naming the first bad field and what is allowed (the input itself is not echoed:
    it may not even be valid JSON, e.g. NaN)."""
    problems = error.errors()
    first = problems[0] if problems else {"loc": (), "msg": "invalid request"}
    others = [_field(problem) for problem in problems[1:]]
    more = ""
    if others:
        named = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        more = f" (and {len(others)} more: {named})"
    detail = f"{_field(first) or 'body'}: {first.get('msg', 'invalid')}{more}"
    return JSONResponse({"detail": clip_detail(detail)}, status_code=422)


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
