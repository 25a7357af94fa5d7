"""An LLM answer that asks to act (place, modify or cancel an order) reaches the executor.

Whatever the spelling (an `action` field, native tool calls, `actions`, `tool_call`,
`tool`), the request goes to the tool executor, which refuses it for the reflector
identity: no order handler runs, and the attempt is audited.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from reflexmem.executor import ORDER_TOOLS, ToolExecutor, order_tools
from reflexmem.ledger.enums import OutcomeClass
from reflexmem.reflection.llm import OpenAIReflector
from reflexmem.reflection.types import ReflectionInput
from tests.unit.reflection.llm_server import PRICE_REF, VALID, Reply, Serve, completion, config


class OrderHandlers:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def handler(self, name: str) -> Callable[[object], None]:
        return lambda args: self.calls.append((name, args))


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
