from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import ValidationError

from reflexmem.executor import ORDER_TOOLS, ToolExecutor, order_tools
from reflexmem.ledger.enums import CaseState, OutcomeClass
from reflexmem.reflection.llm import Answer, LLMConfig, OpenAIReflector
from reflexmem.reflection.types import EvidenceItem, ReflectionInput, TokenUsage
from tests.unit.reflection.reflection_helpers import EvidenceFor, MakeCase

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


@pytest.fixture
def serve() -> Iterator[Serve]:
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

    yield start
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


@pytest.fixture
def case(make_case: MakeCase, evidence_for: EvidenceFor) -> ReflectionInput:
    leaked = EvidenceItem("technicals", LEAKED_AT, {"rsi": 90})
    return make_case(
        evidence=[*evidence_for("momentum"), leaked], realized_return=-0.06, signal=-0.6
    )


class OrderHandlers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def handler(self, name: str) -> Callable[[object], None]:
        return lambda args: self.calls.append((name, args))


def test_valid_answer_becomes_an_l3_reflection_with_usage(
    serve: Serve, case: ReflectionInput
) -> None:
    server = serve(Reply(VALID))
    with OpenAIReflector(config(server.url)) as reflector:
        (r,) = reflector.reflect([case])
    assert not r.failed
    assert r.outcome_class is OutcomeClass.LOGIC_ERROR
    assert r.lesson is not None
    assert r.lesson.startswith("Role momentum")
    assert [str(ref) for ref in r.evidence_used] == [PRICE_REF]
    assert r.layer == "L3"
    assert r.model_calls == 1
    assert r.usage == TokenUsage(100, 20, 120)
    assert r.case_state is CaseState.REFLECTED
    # the request is a proper chat-completions call
    assert server.paths == ["/v1/chat/completions"]
    assert server.headers[0]["authorization"] == "Bearer sk-test"
    sent = server.requests[0]
    assert sent["model"] == "test-model"
    assert sent["response_format"] == {"type": "json_object"}
    system, user = sent["messages"]
    assert system["role"] == "system"
    assert case.role.reflection_prompt in system["content"]
    # leaked evidence is withheld from the model: named, but not offered as a reference
    shown = json.loads(user["content"])
    assert next(e["ref"] for e in shown["evidence"]) == PRICE_REF
    assert all(e["as_of"] != LEAKED_AT.isoformat() for e in shown["evidence"])
    assert shown["withheld_after_decision"] == [
        {"kind": "technicals", "as_of": LEAKED_AT.isoformat()}
    ]


def test_malformed_json_then_valid_answer_succeeds_on_retry(
    serve: Serve, case: ReflectionInput
) -> None:
    server = serve(Reply(MALFORMED), Reply(VALID))
    with OpenAIReflector(config(server.url)) as reflector:
        (r,) = reflector.reflect([case])
    assert not r.failed
    assert r.outcome_class is OutcomeClass.LOGIC_ERROR
    assert r.model_calls == 2
    assert len(server.requests) == 2
    assert r.usage == TokenUsage(200, 40, 240)  # both attempts cost tokens
    assert any("malformed JSON" in reason for reason in r.reasons)


def test_always_malformed_answers_fail_without_class_or_lesson(
    serve: Serve, case: ReflectionInput
) -> None:
    server = serve(Reply(MALFORMED))
    sleeps: list[float] = []
    with OpenAIReflector(config(server.url, backoff_s=0.01), sleep=sleeps.append) as reflector:
        (r,) = reflector.reflect([case])
    assert r.failed
    assert r.outcome_class is None
    assert r.lesson is None
    assert r.evidence_used == ()
    assert r.case_state is CaseState.REFLECTION_FAILED
    assert r.error is not None
    assert "malformed JSON" in r.error
    assert r.model_calls == 3 == len(server.requests)
    assert sleeps == [0.01, 0.02]  # exponential backoff between the three attempts


def test_invented_evidence_reference_is_rejected(serve: Serve, case: ReflectionInput) -> None:
    invented = completion(
        {
            "class": "missing_data",
            "lesson": "Role momentum: decided without fresh technicals.",
            "evidence": [PRICE_REF, "analyst_note@2024-03-01T00:00:00+00:00"],
        }
    )
    server = serve(Reply(invented))
    with OpenAIReflector(config(server.url)) as reflector:
        (r,) = reflector.reflect([case])
    assert r.failed
    assert r.outcome_class is None
    assert r.error is not None
    assert "not in the input" in r.error
    assert "analyst_note" in r.error
    assert len(server.requests) == 3


def test_reference_to_withheld_leaked_evidence_is_rejected(
    serve: Serve, case: ReflectionInput
) -> None:
    leaked_ref = f"technicals@{LEAKED_AT.isoformat()}"
    answer = completion(
        {"class": "variance", "lesson": None, "evidence": [leaked_ref]},
    )
    server = serve(Reply(answer))
    with OpenAIReflector(config(server.url, max_retries=0)) as reflector:
        (r,) = reflector.reflect([case])
    assert r.failed
    assert r.error is not None
    assert leaked_ref in r.error


def test_slow_endpoint_fails_after_the_bounded_number_of_attempts(
    serve: Serve, case: ReflectionInput
) -> None:
    server = serve(Reply(VALID, stall=True))
    with OpenAIReflector(config(server.url, timeout_s=0.2, max_retries=2)) as reflector:
        (r,) = reflector.reflect([case])
    assert r.failed
    assert r.outcome_class is None
    assert r.lesson is None
    assert r.error is not None
    assert "timeout" in r.error
    assert r.model_calls == 3
    assert len(server.requests) == 3
    assert r.usage is None  # no response ever reported usage


def test_connection_refused_fails_after_bounded_retries(case: ReflectionInput) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # the port is closed now: every connect is refused
    with OpenAIReflector(config(f"http://127.0.0.1:{port}", max_retries=1)) as reflector:
        (r,) = reflector.reflect([case])
    assert r.failed
    assert r.error is not None
    assert "connection error" in r.error
    assert r.model_calls == 2


def test_http_500_then_valid_answer_succeeds(serve: Serve, case: ReflectionInput) -> None:
    server = serve(Reply({"error": "overloaded"}, status=500), Reply(VALID))
    with OpenAIReflector(config(server.url)) as reflector:
        (r,) = reflector.reflect([case])
    assert not r.failed
    assert r.outcome_class is OutcomeClass.LOGIC_ERROR
    assert r.model_calls == 2
    assert "HTTP 500" in r.reasons[1]


def test_client_errors_are_not_retried(serve: Serve, case: ReflectionInput) -> None:
    server = serve(Reply({"error": "bad key"}, status=401))
    with OpenAIReflector(config(server.url)) as reflector:
        (r,) = reflector.reflect([case])
    assert r.failed
    assert r.error is not None
    assert "HTTP 401" in r.error
    assert len(server.requests) == 1


def test_answer_asking_to_place_an_order_is_refused_by_the_executor(
    serve: Serve, case: ReflectionInput
) -> None:
    order = completion(
        {
            "class": "logic_error",
            "lesson": "Role momentum: buy more.",
            "evidence": [PRICE_REF],
            "action": "place_order",
            "symbol": "AAPL",
            "side": "long",
            "quantity": 100,
        }
    )
    server = serve(Reply(order))
    broker = OrderHandlers()
    executor = ToolExecutor.with_tools(
        order_tools(
            place=broker.handler("place"),
            modify=broker.handler("modify"),
            cancel=broker.handler("cancel"),
        )
    )
    with OpenAIReflector(config(server.url), executor=executor) as reflector:
        (r,) = reflector.reflect([case])
    assert broker.calls == []  # no order handler ever ran
    assert r.failed  # an answer that tries to act is not a verdict
    assert r.outcome_class is None
    assert r.lesson is None
    assert len(executor.audit) == 3  # one refused attempt per model answer
    for rec in executor.audit:
        assert (rec.caller, rec.tool, rec.effects, rec.outcome) == (
            "reflector",
            "place_order",
            ("move_funds",),
            "refused",
        )
        assert rec.arguments == {"symbol": "AAPL", "side": "long", "quantity": 100}
    assert "refused" in (r.error or "")


def test_native_tool_calls_go_to_the_executor_and_a_clean_retry_still_counts(
    serve: Serve, case: ReflectionInput
) -> None:
    calls = [
        {
            "id": f"call-{name}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps({"order_id": "o-1"})},
        }
        for name in sorted(ORDER_TOOLS)
    ]
    server = serve(Reply(completion(None, tool_calls=calls)), Reply(VALID))
    broker = OrderHandlers()
    executor = ToolExecutor.with_tools(
        order_tools(
            place=broker.handler("place"),
            modify=broker.handler("modify"),
            cancel=broker.handler("cancel"),
        )
    )
    with OpenAIReflector(config(server.url), executor=executor) as reflector:
        (r,) = reflector.reflect([case])
    assert broker.calls == []
    assert sorted(rec.tool for rec in executor.audit) == sorted(ORDER_TOOLS)
    assert {rec.outcome for rec in executor.audit} == {"refused"}
    assert not r.failed
    assert r.outcome_class is OutcomeClass.LOGIC_ERROR
    assert r.model_calls == 2


def test_a_batch_keeps_case_order_and_fails_cases_independently(
    serve: Serve, make_case: MakeCase, case: ReflectionInput
) -> None:
    server = serve(Reply(VALID), Reply(MALFORMED))
    other = make_case(case_id="case-2")
    with OpenAIReflector(config(server.url, max_retries=0)) as reflector:
        first, second = reflector.reflect([case, other])
    assert (first.case_id, first.failed) == ("case-1", False)
    assert (second.case_id, second.failed) == ("case-2", True)


REFS = {PRICE_REF: None}


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ({"class": "bad_luck", "lesson": None, "evidence": []}, "class"),
        ({"class": "variance", "lesson": "Do better.", "evidence": []}, "lesson null"),
        ({"class": "exogenous", "lesson": "x", "evidence": []}, "lesson null"),
        ({"class": "logic_error", "lesson": None, "evidence": []}, "requires a lesson"),
        ({"class": "missing_data", "lesson": "  ", "evidence": []}, "requires a lesson"),
        ({"class": "logic_error", "lesson": "x" * 301, "evidence": []}, "300"),
        ({"class": "variance", "evidence": []}, "lesson"),
        ({"class": "variance", "lesson": None, "evidence": [], "extra": 1}, "extra"),
    ],
)
def test_answer_schema_rejects_what_the_contract_forbids(
    answer: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        Answer.model_validate(answer, context={"refs": REFS})


@pytest.mark.parametrize("cls", ["exogenous", "variance"])
def test_answer_schema_accepts_unlearnable_classes_with_a_null_lesson(cls: str) -> None:
    answer = Answer.model_validate(
        {"class": cls, "lesson": None, "evidence": [PRICE_REF]}, context={"refs": REFS}
    )
    assert answer.outcome_class is OutcomeClass(cls)


@pytest.mark.parametrize(
    "extra",
    [
        {"actions": [{"name": "cancel_order", "arguments": {"order_id": "o-9"}}]},
        {"tool_call": {"name": "modify_order", "arguments": '{"order_id": "o-9"}'}},
        {"tool": "cancel_order", "arguments": {"order_id": "o-9"}},
    ],
)
def test_other_spellings_of_an_action_request_also_reach_the_executor(
    serve: Serve, case: ReflectionInput, extra: dict[str, object]
) -> None:
    answer = completion({"class": "variance", "lesson": None, "evidence": [], **extra})
    server = serve(Reply(answer))
    broker = OrderHandlers()
    executor = ToolExecutor.with_tools(
        order_tools(
            place=broker.handler("place"),
            modify=broker.handler("modify"),
            cancel=broker.handler("cancel"),
        )
    )
    with OpenAIReflector(config(server.url, max_retries=0), executor=executor) as reflector:
        (r,) = reflector.reflect([case])
    assert r.failed
    assert broker.calls == []
    (rec,) = executor.audit
    assert rec.outcome == "refused"
    assert rec.tool in ORDER_TOOLS
    assert rec.arguments == {"order_id": "o-9"}
