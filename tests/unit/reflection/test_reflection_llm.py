"""The LLM reflector against a scripted model: answers, retries, transport, the schema."""

from __future__ import annotations

import json
import socket

import pytest
from pydantic import ValidationError

from reflexmem.ledger.enums import CaseState, OutcomeClass
from reflexmem.reflection.llm import Answer, OpenAIReflector
from reflexmem.reflection.types import ReflectionInput, TokenUsage
from tests.unit.reflection.llm_server import (
    LEAKED_AT,
    MALFORMED,
    PRICE_REF,
    VALID,
    Reply,
    Serve,
    completion,
    config,
)
from tests.unit.reflection.reflection_helpers import MakeCase


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
