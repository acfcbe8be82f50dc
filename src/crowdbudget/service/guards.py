"""What stands between the network and the routes: the request rate per key, the body's
media type and size, security headers, and error bodies that are always JSON and never echo a
large input back.

:class:`RequestGuard` is one pure ASGI middleware (no per-request objects beyond two small
closures, so the label round trip stays as cheap as it was). In order, before the request
reaches a route (so a refused request changes nothing):

1. a key (``Authorization`` header) over its request rate is answered 429 with
   ``Retry-After`` (:class:`KeyRateLimiter`, a token bucket per key);
2. a body whose declared length is over the limit is answered 413 before it is read;
3. a body whose ``Content-Type`` is not the route's media type (``application/json``, or
   ``text/csv`` for the CSV routes) is answered 415 before it is read; a body without a
   ``Content-Type`` is refused the same way (no sniffing);
4. a body without a declared length (chunked) is counted as it arrives and cut off at the
   limit with the same 413.

Every response carries ``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer``
and ``X-Frame-Options: DENY``; pages add their own Content-Security-Policy.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
from collections import OrderedDict
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

#: keys whose request rate is tracked at once; the least recently seen bucket is dropped
#: beyond it (a dropped key starts again with a full bucket: forgetting only ever lets a key
#: through, and holding a bucket per random key an attacker invents would grow without bound)
MAX_RATE_BUCKETS = 10_000

#: the methods whose body a route reads (any other body is never read)
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})

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


async def _send_json(
    send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
                *_SECURITY_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class KeyRateLimiter:
    """A token bucket per key: ``burst`` requests at once, then ``rate`` per second.

    :meth:`take` is called from the event loop only (one thread), so it needs no lock. Keys
    are held as SHA-256 digests (32 bytes whatever the header's length), at most
    :data:`MAX_RATE_BUCKETS` of them (least recently seen dropped). ``clock``: seconds,
    monotonic."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = float(rate)
        self.burst = float(burst)
        self.clock = clock
        # digest -> [tokens left, when they were counted]
        self._buckets: OrderedDict[bytes, list[float]] = OrderedDict()

    def take(self, key: bytes) -> float:
        """Spend one request of ``key``'s bucket; returns 0.0 if allowed, else the seconds
        until the bucket holds a whole request again (nothing is spent then)."""
        digest = hashlib.sha256(key).digest()
        now = self.clock()
        bucket = self._buckets.get(digest)
        if bucket is None:
            bucket = [self.burst, now]
            self._buckets[digest] = bucket
            if len(self._buckets) > MAX_RATE_BUCKETS:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(digest)
            # refill for the time since the bucket was last counted, never past its size
            bucket[0] = min(self.burst, bucket[0] + (now - bucket[1]) * self.rate)
            bucket[1] = now
        if bucket[0] >= 1.0:
            bucket[0] -= 1.0
            return 0.0
        return (1.0 - bucket[0]) / self.rate


def _media_type(value: bytes) -> str:
    """``b"Application/JSON; charset=utf-8"`` -> ``"application/json"``."""
    return value.split(b";", 1)[0].strip().decode("latin-1").lower()


class RequestGuard:
    """ASGI middleware: a request rate per key; request bodies of at most ``max_body_bytes``
    and of the route's media type; security headers (see the module's docstring).

    ``csv_paths``: the paths whose body is ``text/csv``; every other body must be
    ``application/json``. ``rate_limiter``: None, no rate limit."""

    def __init__(
        self,
        app: ASGIApp,
        max_body_bytes: int,
        rate_limiter: KeyRateLimiter | None = None,
        csv_paths: re.Pattern[str] | None = None,
    ) -> None:
        self.app = app
        self.max_body_bytes = int(max_body_bytes)
        self.rate_limiter = rate_limiter
        self.csv_paths = csv_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        too_large = f"request body over the server's limit of {limit} bytes"
        declared = content_type = authorization = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                declared = value
            elif name == b"content-type":
                content_type = value
            elif name == b"authorization":
                authorization = value
            elif name == b"transfer-encoding":
                chunked = True
        if authorization is not None and self.rate_limiter is not None:
            wait = self.rate_limiter.take(authorization)
            if wait > 0.0:
                limiter = self.rate_limiter
                await _send_json(
                    send,
                    429,
                    f"too many requests with this key: this server allows {limiter.rate:g} per "
                    f"second (bursts of {limiter.burst:g}); retry after the Retry-After seconds",
                    # whole seconds (RFC 9110), rounded up so the retry finds a token
                    [(b"retry-after", str(max(1, math.ceil(wait))).encode())],
                )
                return
        length = 0
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await _send_json(send, 400, "malformed Content-Length header")
                return
            if length > limit:
                await _send_json(send, 413, too_large)
                return
        if scope["method"] in _BODY_METHODS and (length > 0 or chunked):
            csv = self.csv_paths is not None and self.csv_paths.fullmatch(scope["path"])
            expected = "text/csv" if csv else "application/json"
            given = None if content_type is None else _media_type(content_type)
            if given != expected:
                shown = "no Content-Type" if given is None else f"Content-Type {given[:60]!r}"
                await _send_json(
                    send, 415, f"this request's body must be {expected}; it was sent with {shown}"
                )
                return
        if declared is not None:
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
