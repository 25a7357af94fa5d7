"""A model's response is bounded in bytes and wall time before anything parses it.

A real HTTP server on 127.0.0.1 plays the hostile replies: a 20 MB body, a body whose
`Content-Length` announces gigabytes, a body trickled one byte at a time, headers that
never come. Each attempt must fail quickly with the limit it hit, never reading past
the byte limit and never taking much longer than the time limit.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from reflexmem.executor import ToolExecutor
from reflexmem.reflection.llm import LLMConfig, OpenAIReflector
from reflexmem.reflection.types import ReflectionInput

Handler = Callable[[BaseHTTPRequestHandler], None]


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], tuple[str, list[int]]]]:
    servers: list[ThreadingHTTPServer] = []

    def start(handle: Handler) -> tuple[str, list[int]]:
        hits: list[int] = []

        class H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                hits.append(1)
                with contextlib.suppress(OSError):  # the client hung up: that is the point
                    handle(self)

            def log_message(self, *_: object) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        httpd.daemon_threads = True
        threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(httpd)
        return f"http://127.0.0.1:{httpd.server_address[1]}/v1", hits

    yield start
    for httpd in servers:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def case(make_case: Any) -> ReflectionInput:
    case: ReflectionInput = make_case(realized_return=-0.06, signal=-0.6)
    return case


def _config(url: str, **kw: Any) -> LLMConfig:
    values: dict[str, Any] = {
        "base_url": url,
        "model": "m",
        "timeout_s": 1.0,
        "max_retries": 0,
        "backoff_s": 0.001,
        "max_response_bytes": 64 * 1024,
    }
    values.update(kw)
    return LLMConfig(**values)


def _huge(handler: BaseHTTPRequestHandler) -> None:
    """A 20 MB JSON body sent as fast as the socket takes it."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    handler.wfile.write(b'{"choices": [{"message": {"content": "')
    block = b"x" * 65536
    for _ in range(320):
        handler.wfile.write(block)
    handler.wfile.write(b'"}}]}')


def _declared(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(4 * 1024**3))
    handler.end_headers()
    handler.wfile.write(b"{")
    time.sleep(2)


def _trickle(handler: BaseHTTPRequestHandler) -> None:
    """A valid answer, one byte every 50 ms: each read succeeds, the whole never ends in time."""
    body = json.dumps({"choices": [{"message": {"content": '{"class": "variance"}'}}]})
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body) * 40))
    handler.end_headers()
    for ch in (body * 40).encode():
        handler.wfile.write(bytes([ch]))
        handler.wfile.flush()
        time.sleep(0.05)


def test_a_20mb_body_is_cut_off_at_the_byte_limit(serve: Any, case: ReflectionInput) -> None:
    url, hits = serve(_huge)
    with OpenAIReflector(_config(url, max_retries=2)) as reflector:
        tracemalloc.start()  # after the client exists (its TLS context is megabytes)
        start = time.monotonic()
        (r,) = reflector.reflect([case])
        took = time.monotonic() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert r.failed
    assert r.outcome_class is None
    assert r.lesson is None
    assert r.error is not None
    assert "exceeds the 65536-byte limit" in r.error
    assert len(hits) == 1  # an oversized answer is not asked for again
    assert took < 5.0
    assert peak < 4 * 1024**2, f"held {peak} bytes in memory for a 64 KiB limit"


def test_a_declared_oversized_body_is_refused_before_reading(
    serve: Any, case: ReflectionInput
) -> None:
    url, _ = serve(_declared)
    start = time.monotonic()
    with OpenAIReflector(_config(url)) as reflector:
        (r,) = reflector.reflect([case])
    assert r.failed
    assert r.error is not None
    assert "declares 4294967296 bytes" in r.error
    assert time.monotonic() - start < 1.5


def test_a_trickled_body_fails_at_the_time_limit(serve: Any, case: ReflectionInput) -> None:
    url, hits = serve(_trickle)
    start = time.monotonic()
    with OpenAIReflector(_config(url, timeout_s=0.6, max_retries=1)) as reflector:
        (r,) = reflector.reflect([case])
    took = time.monotonic() - start
    assert r.failed
    assert r.outcome_class is None
    assert r.error is not None
    assert "timeout" in r.error
    assert r.model_calls == 2
    assert len(hits) == 2
    # two attempts of at most 0.6 s each, plus scheduling slack: never the ~40 s the body takes
    assert took < 3.0, took


def test_the_limits_come_from_settings() -> None:
    from adapters.resources import reflection_setup
    from reflexmem.settings import LLMSettings

    setup = reflection_setup(
        LLMSettings(
            reflector="openai",
            base_url="http://127.0.0.1:9/v1",
            model="m",
            timeout_s=7.5,
            max_response_bytes=1234,
        )
    )
    reflector = setup.build(ToolExecutor())
    assert isinstance(reflector, OpenAIReflector)
    try:
        assert reflector.config.max_response_bytes == 1234
        assert reflector.config.timeout_s == 7.5
    finally:
        reflector.close()
