"""A scripted chat-completions endpoint on 127.0.0.1 and its canned replies.

Shared by the LLM reflector tests (`test_reflection_llm.py`: answers, retries and
transport; `test_reflection_llm_actions.py`: action requests reach the executor). Their
`serve` and `case` fixtures are in `conftest.py`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from reflexmem.reflection.llm import LLMConfig

DECIDED_AT = datetime(2024, 3, 4, 15, 30, tzinfo=UTC)  # what make_case uses (conftest)
PRICE_REF = f"price_history@{(DECIDED_AT - timedelta(hours=1)).isoformat()}"
LEAKED_AT = DECIDED_AT + timedelta(days=2)


@dataclass
class Reply:
    """One canned HTTP reply: a status, a body (dict -> JSON) and an optional stall."""

    body: dict[str, Any] | str
    status: int = 200
    stall: bool = False


def completion(content: object, *, usage: bool = True, **message: Any) -> dict[str, Any]:
    text = content if isinstance(content, str) or content is None else json.dumps(content)
    body: dict[str, Any] = {
        "id": "cmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, **message}}],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    return body


VALID = completion(
    {
        "class": "logic_error",
        "lesson": "Role momentum (trend_reversal_ignored): went long against its own "
        "price_history signal and lost.",
        "evidence": [PRICE_REF],
    }
)
MALFORMED = completion('{"class": "logic_error", "lesson": ')


@dataclass
class ModelServer:
    """A real chat-completions endpoint on 127.0.0.1 that plays a script of replies."""

    script: list[Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    url: str = ""

    def reply_for(self, n: int) -> Reply:
        return self.script[min(n, len(self.script) - 1)]


Serve = Callable[..., ModelServer]


@contextmanager
def model_servers() -> Iterator[Serve]:
    """Start a `ModelServer` per call of the yielded function; shut them all down on exit."""
    servers: list[tuple[ThreadingHTTPServer, ModelServer]] = []

    def start(*script: Reply) -> ModelServer:
        state = ModelServer(list(script))

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                payload = json.loads(self.rfile.read(length))
                state.paths.append(self.path)
                state.headers.append({k.lower(): v for k, v in self.headers.items()})
                state.requests.append(payload)
                reply = state.reply_for(len(state.requests) - 1)
                if reply.stall:
                    state.release.wait(5)
                    return
                raw = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                data = raw.encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

            def log_message(self, *_: object) -> None:
                pass

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
        state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        servers.append((httpd, state))
        return state

    try:
        yield start
    finally:
        for httpd, state in servers:
            state.release.set()
            httpd.shutdown()
            httpd.server_close()


def config(url: str, **overrides: Any) -> LLMConfig:
    values: dict[str, Any] = {
        "base_url": url,
        "model": "test-model",
        "api_key": "sk-test",
        "timeout_s": 2.0,
        "max_retries": 2,
        "backoff_s": 0.001,
    }
    values.update(overrides)
    return LLMConfig(**values)
