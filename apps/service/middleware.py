"""ASGI middleware of the agent API: who may call, how much they may send, how often.

* `BearerAuth`: every request needs the bearer token (401 before routing, constant-time
  comparison), so without it nothing, not even whether a route exists, is disclosed.
* `RateLimit`: a token bucket per bearer token (`REFLEX_API_RATE_PER_S` refill,
  `REFLEX_API_RATE_BURST` capacity); a request finding the bucket empty gets 429 with
  `Retry-After`, before it reaches a handler or the store. One misbehaving agent loop
  cannot starve the others or fill the ledger.
* `BodyLimit`: a body over `REFLEX_API_MAX_BODY_BYTES` gets 413 before anything parses it.

Errors keep FastAPI's shape, `{"detail": [{"type", "loc", "msg"}]}`.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi.responses import JSONResponse

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class BearerAuth:
    """ASGI middleware: every HTTP request needs the bearer token, or it gets 401.

    It runs before routing, so without the token nothing (not even whether a route
    exists) is disclosed. Tokens are compared in constant time.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass an authorised request on; answer anything else 401."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        if hmac.compare_digest(given, self.expected):
            await self.app(scope, receive, send)
            return
        response = error(
            401, "unauthorized", ["header", "authorization"], "a valid bearer token is required"
        )
        response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)


def error(status: int, kind: str, loc: list[str], msg: str) -> JSONResponse:
    """An error in FastAPI's shape: one detail with its type, location and message."""
    return JSONResponse({"detail": [{"type": kind, "loc": loc, "msg": msg}]}, status_code=status)


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes gets 413 before anything parses it.

    A declared `Content-Length` over the limit is refused unread; a body sent in chunks
    (or with a false length) is read up to the limit and refused at the first byte past
    it, so at most `limit` bytes are ever held. Within the limit the body is handed on.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _too_large(self) -> JSONResponse:
        msg = f"the request body is larger than {self.limit} bytes (REFLEX_API_MAX_BODY_BYTES)"
        return error(413, "body_too_large", ["body"], msg)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse an oversized body; replay a fitting one to the app."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.limit:
            await self._too_large()(scope, receive, send)
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                await self._too_large()(scope, receive, send)
                return
            chunks.append(body)
            more = bool(message.get("more_body", False))
        pending = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> Message:
            return pending.pop() if pending else await receive()

        await self.app(scope, replay, send)


class RateLimit:
    """ASGI middleware: at most `rate` requests a second per bearer token, bursts to `burst`.

    A token bucket per caller (keyed by a hash of its `Authorization` header, never the
    token itself): it refills at `rate` per second up to `burst`; a request takes one
    and, when none is left, is answered 429 with `Retry-After` (whole seconds until one
    is back). `rate` 0 turns the limit off.
    """

    def __init__(self, app: ASGIApp, rate: float, burst: int) -> None:
        self.app, self.rate, self.burst = app, rate, max(1, burst)
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()

    def _take(self, key: str) -> float:
        """0 when a request may go now, else the seconds until it may."""
        now = time.monotonic()
        with self.lock:
            level, then = self.buckets.get(key, (float(self.burst), now))
            level = min(float(self.burst), level + (now - then) * self.rate)
            if level >= 1.0:
                self.buckets[key] = (level - 1.0, now)
                return 0.0
            self.buckets[key] = (level, now)
            return (1.0 - level) / self.rate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass a request within the rate; answer 429 otherwise."""
        if scope["type"] != "http" or self.rate <= 0:
            await self.app(scope, receive, send)
            return
        given = dict(scope.get("headers") or []).get(b"authorization", b"")
        wait = self._take(hashlib.sha256(given).hexdigest())
        if wait <= 0:
            await self.app(scope, receive, send)
            return
        msg = f"more than {self.rate:g} requests a second on this token (REFLEX_API_RATE_PER_S)"
        response = error(429, "rate_limited", ["header", "authorization"], msg)
        response.headers["Retry-After"] = str(max(1, math.ceil(wait)))
        await response(scope, receive, send)
