"""Helpers shared by the REFLEX unit tests."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.skills import SkillSpec
from reflexmem.reflex.snapshot import PinnedSkill, SkillSnapshot

MakeSpec = Callable[..., SkillSpec]


def snapshot_of(*pinned: tuple[SkillSpec, SkillState, float | None]) -> SkillSnapshot:
    return SkillSnapshot(
        tuple(PinnedSkill(spec, state, fraction) for spec, state, fraction in pinned),
        datetime(2026, 1, 5, tzinfo=UTC),
    )


def completion(content: object, **message: object) -> dict[str, object]:
    """One chat-completions body whose message content is `content` (JSON-encoded)."""
    text = content if isinstance(content, str) else json.dumps(content)
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, **message}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


class ChatServer:
    """A real OpenAI-compatible endpoint on 127.0.0.1 replaying a script of bodies."""

    def __init__(self, *bodies: dict[str, object]) -> None:
        self.bodies = list(bodies)
        self.requests: list[dict[str, Any]] = []  # parsed JSON bodies
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                state.requests.append(json.loads(self.rfile.read(length)))
                body = state.bodies[min(len(state.requests), len(state.bodies)) - 1]
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
