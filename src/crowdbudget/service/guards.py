"""What stands between the network and the routes: the body-size limit, security headers,
and error bodies that are always JSON and never echo a large input back.

:class:`RequestGuard` is one pure ASGI middleware (no per-request objects beyond two small
closures, so the label round trip stays as cheap as it was): a body whose declared length is
over the limit is answered 413 before it is read; a body without a declared length (chunked)
is counted as it arrives and cut off at the limit with the same 413. Every response carries
``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and
``X-Frame-Options: DENY``; pages add their own Content-Security-Policy.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.exceptions import HTTPException

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: the longest error detail sent back (the input it names is cut well before this)
MAX_DETAIL_LENGTH = 500

_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


def clip_detail(detail: str) -> str:
    """An error detail cut to :data:`MAX_DETAIL_LENGTH` characters, on one line."""
    one_line = " ".join(str(detail).split())
    if len(one_line) <= MAX_DETAIL_LENGTH:
        return one_line
    return one_line[: MAX_DETAIL_LENGTH - 3] + "..."


class _BodyTooLarge(HTTPException):
    """Raised from ``receive`` once a chunked body passes the limit; an HTTPException so that
    a route reading its body (FastAPI wraps other errors of that read into a 400) answers
    413 through the app's usual handler."""


async def _send_json(send: Send, status: int, detail: str) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *_SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class RequestGuard:
    """ASGI middleware: request bodies of at most ``max_body_bytes``; security headers."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = int(max_body_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        too_large = f"request body over the server's limit of {limit} bytes"
        declared = None
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = value
                break
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await _send_json(send, 400, "malformed Content-Length header")
                return
            if length > limit:
                await _send_json(send, 413, too_large)
                return
            guarded_receive = receive  # the server delivers at most the declared length
        else:
            received = 0

            async def guarded_receive() -> Message:
                nonlocal received
                message = await receive()
                if message["type"] == "http.request":
                    received += len(message.get("body", b""))
                    if received > limit:
                        raise _BodyTooLarge(413, too_large)
                return message

        started = False

        async def send_with_headers(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message["headers"] = [*message.get("headers", []), *_SECURITY_HEADERS]
            await send(message)

        try:
            await self.app(scope, guarded_receive, send_with_headers)
        except _BodyTooLarge:
            if not started:
                await _send_json(send, 413, too_large)
