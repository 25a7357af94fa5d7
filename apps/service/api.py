"""`reflexmem api`: the agent tools over HTTP, so an agent never starts a CLI process.

A `reflexmem recall` process pays seconds of imports before it answers; a running
service answers in milliseconds. `create_app` builds a FastAPI app over `Resources`
whose endpoints call the tools of `apps/service/agent_tools.py` (each one operation) and
nothing else. Every request must carry `Authorization: Bearer <REFLEX_API_TOKEN>`
(401 otherwise, before any routing); the app refuses to be built without a token. A
body over `REFLEX_API_MAX_BODY_BYTES` (default 1 MiB) is answered 413 before it is
parsed, and a token sending more than `REFLEX_API_RATE_PER_S` requests a second gets 429
(`apps/service/middleware.py`). The
recall endpoint is registered only in active mode: in shadow mode it does not exist
(404), as the tool does not exist. Errors keep FastAPI's shape, `{"detail": [{"type",
"loc", "msg"}]}`, with `loc` naming the field at fault. See `docs/api.md`.

`LoopbackServer` runs the app with uvicorn in a thread on a free loopback port, for
the tests and `reflexmem bench recall --via api`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Annotated, Any

import anyio.to_thread
import sqlalchemy as sa
from fastapi import Body, FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from apps.service import agent_tools
from apps.service.agent_tools import RecallRequest, ToolFailure
from apps.service.middleware import BearerAuth, BodyLimit, RateLimit
from reflexmem.ingest.rows import RECORD_KINDS
from reflexmem.operations.resources import Resources
from reflexmem.settings import MemoryMode, Settings

Rows = dict[str, Any] | list[dict[str, Any]]


class ConsumeRequest(BaseModel):
    """Which decision consumes the preview."""

    decision_id: str = Field(min_length=1)


RETRY_AFTER_S = 1
"""What a 503 tells the client to wait before retrying a write."""


class WriteGate:
    """One writer at a time on an embedded (SQLite) store; others wait, then get 503.

    SQLite has one write lock per file. Under WAL a transaction that read first and then
    writes can fail at once with "database is locked" whatever the busy timeout, so the
    service's writers (records, preview consumption, and recall, which writes the recall
    log and the bandit's state) are serialised here, each waiting up to `wait_s` for its
    turn; a writer of another process (a cycle on the same file) can still take the lock
    between a read and a write, so a "locked" failure is retried, with backoff, within
    the same budget. Past it the answer is 503 with `Retry-After`, never 500; the
    transaction was rolled back, so nothing is half written. PostgreSQL takes row locks
    and needs no gate (`wait_s` None: no gate, no retry).
    """

    def __init__(self, wait_s: float | None) -> None:
        self.wait_s = wait_s
        self.lock = threading.Lock()

    def _busy(self) -> ToolFailure:
        return ToolFailure(
            503, f"the store is busy with other writes; retry in {RETRY_AFTER_S} s", (), "busy"
        )

    def run(self, call: Callable[[], Any]) -> Any:
        """`call()` in its turn, retried while the file is locked; 503 past the wait."""
        if self.wait_s is None:
            return call()
        deadline = time.monotonic() + self.wait_s
        if not self.lock.acquire(timeout=self.wait_s):
            raise self._busy()
        try:
            delay = 0.01
            while True:
                try:
                    return call()
                except sa.exc.OperationalError as exc:
                    if "database is locked" not in str(exc.orig):
                        raise
                    if time.monotonic() + delay > deadline:
                        raise self._busy() from exc
                    time.sleep(delay * (1.0 + random.random()))
                    delay = min(delay * 2.0, 0.5)
        finally:
            self.lock.release()


def _failure(exc: ToolFailure, prefix: tuple[str | int, ...]) -> JSONResponse:
    detail = {"type": exc.code, "loc": [*prefix, *exc.loc], "msg": exc.message}
    headers = {"Retry-After": str(RETRY_AFTER_S)} if exc.status == 503 else None
    return JSONResponse({"detail": [detail]}, status_code=exc.status, headers=headers)


def _record_route(app: FastAPI, res: Resources, kind: str, gate: WriteGate) -> None:
    def record(body: Annotated[Rows, Body()]) -> Any:
        single = isinstance(body, dict)
        rows = [body] if isinstance(body, dict) else body
        try:
            return gate.run(lambda: agent_tools.record(res, kind, rows))
        except ToolFailure as exc:
            if single and exc.loc and exc.loc[0] == 0:
                exc.loc = exc.loc[1:]
            return _failure(exc, ("body",))

    record.__doc__ = agent_tools.describe(kind) + (
        " The body is one object, or a list of objects (one transaction)."
    )
    app.post(f"/v1/{kind}", name=f"record_{kind}", tags=["record"])(record)


def app_from_settings() -> FastAPI:
    """The app of one server process from the environment's settings (`api --workers`)."""
    from adapters.resources import build_resources
    from reflexmem.settings import runtime_mode

    settings = Settings()
    return create_app(build_resources(settings), settings, mode=runtime_mode())


def _thread_limit(threads: int) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """A lifespan that caps the worker threads the (synchronous) endpoints run on."""

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = threads
        yield

    return lifespan


def create_app(res: Resources, settings: Settings, mode: MemoryMode | None = None) -> FastAPI:
    """The agent API over `res`; `mode` (default: the settings') decides if recall exists.

    Raises `ValueError` when the settings hold no API token: the service never runs open.
    """
    token = settings.api_token.get_secret_value() if settings.api_token is not None else ""
    if not token.strip():
        raise ValueError("REFLEX_API_TOKEN is required: the agent API never runs without a token")
    mode = settings.role_memory_mode if mode is None else mode
    app = FastAPI(
        lifespan=_thread_limit(settings.api_threads),
        title="Reflex Memory agent API",
        description="Record decisions, previews, executions and fills; consume a preview "
        "once; recall in active mode. No endpoint moves funds.",
        version="1",
    )
    tools = [f"record_{kind}" for kind in RECORD_KINDS] + ["consume_preview"]
    if mode is MemoryMode.ACTIVE:
        tools.append("recall")

    @app.get("/v1/health", tags=["service"])
    async def health() -> dict[str, Any]:
        """The service is up; its frozen mode, the tools it offers, requests worked at once."""
        threads = anyio.to_thread.current_default_thread_limiter().total_tokens
        return {"status": "ok", "mode": mode.value, "tools": tools, "threads": threads}

    embedded = res.engine.dialect.name == "sqlite"
    gate = WriteGate(settings.api_write_wait_s if embedded else None)
    for kind in RECORD_KINDS:
        _record_route(app, res, kind, gate)

    @app.post("/v1/previews/{preview_id}/consume", tags=["previews"])
    def consume_preview(preview_id: str, body: ConsumeRequest) -> Any:
        """Consume a preview for a decision exactly once: 409 on a second consumption."""
        try:
            return gate.run(lambda: agent_tools.consume(res, preview_id, body.decision_id))
        except ToolFailure as exc:
            prefix = ("path",) if exc.loc == ("preview_id",) else ("body",)
            return _failure(exc, prefix)

    if mode is MemoryMode.ACTIVE:

        @app.post("/v1/recall", tags=["recall"])
        def recall(body: RecallRequest) -> Any:
            """Recall lessons, patterns and rules of one role under every constraint."""
            try:  # recall writes its log and the bandit's state: it is a writer too
                return gate.run(lambda: agent_tools.recall(res, mode, body))
            except ToolFailure as exc:
                return _failure(exc, ("body",))

    app.add_middleware(BodyLimit, limit=settings.api_max_body_bytes)
    app.add_middleware(RateLimit, rate=settings.api_rate_per_s, burst=settings.api_rate_burst)
    app.add_middleware(BearerAuth, token=token)  # added last: runs first
    return app


class LoopbackServer:
    """Serve an app with uvicorn in a background thread on a free loopback port.

    `with LoopbackServer(app) as base_url:` starts it (waiting until it listens) and
    stops it on exit, also when the block fails.
    """

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", startup_s: float = 30.0) -> None:
        import uvicorn

        # Port 0: the OS picks a free port as uvicorn binds, so no other process can
        # take it between choosing and listening; the port is read back once started.
        self.host, self.port, self.startup_s = host, 0, startup_s
        config = uvicorn.Config(app, host=host, port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="reflex-api", daemon=True)

    @property
    def base_url(self) -> str:
        """Where the app answers."""
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> str:
        """Start, wait until it listens, return the base URL."""
        self.thread.start()
        deadline = time.monotonic() + self.startup_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the API did not start on {self.base_url}")
            time.sleep(0.02)
        self.port = int(self.server.servers[0].sockets[0].getsockname()[1])
        return self.base_url

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for its thread."""
        self.server.should_exit = True
        if self.thread.is_alive():
            self.thread.join(timeout=self.startup_s)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server."""
        self.stop()
