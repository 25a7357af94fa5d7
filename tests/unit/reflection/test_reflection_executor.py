from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from reflexmem.executor import (
    ORDER_TOOLS,
    REFLECTOR,
    Caller,
    Effect,
    PlaceOrderArgs,
    RateLimit,
    RetryableToolError,
    Tool,
    ToolExecutor,
    order_tools,
)
from reflexmem.ledger.enums import Direction


class NoteArgs(BaseModel):
    text: str
    weight: float = 1.0


class Calls:
    """A handler that records every invocation, so tests can prove what never ran."""

    def __init__(self, result: object = "done", fail_times: int = 0) -> None:
        self.args: list[Any] = []
        self.result = result
        self.fail_times = fail_times

    def __call__(self, args: Any) -> object:
        self.args.append(args)
        if len(self.args) <= self.fail_times:
            raise RetryableToolError(f"transient #{len(self.args)}")
        return self.result


WRITER = Caller("writer", frozenset({"remember"}), frozenset({Effect.READ, Effect.WRITE_MEMORY}))
TRADER = Caller("trader", ORDER_TOOLS, frozenset({Effect.MOVE_FUNDS}))


def remember_tool(handler: Calls, **kwargs: Any) -> Tool[NoteArgs]:
    return Tool("remember", frozenset({Effect.WRITE_MEMORY}), NoteArgs, handler, **kwargs)


def test_allowed_call_runs_the_handler_once_and_is_audited_as_ok() -> None:
    handler = Calls()
    ex = ToolExecutor.with_tools([remember_tool(handler)])
    result = ex.call(WRITER, "remember", {"text": "x"})
    assert result.ok
    assert result.value == "done"
    assert handler.args == [NoteArgs(text="x")]
    (rec,) = ex.audit
    assert (rec.caller, rec.tool, rec.effects, rec.outcome) == (
        "writer",
        "remember",
        ("write_memory",),
        "ok",
    )
    assert rec.arguments == {"text": "x", "weight": 1.0}


def test_tool_missing_from_the_allow_list_is_refused_and_audited() -> None:
    handler = Calls()
    ex = ToolExecutor.with_tools([remember_tool(handler)])
    reader = Caller("reader", frozenset(), frozenset({Effect.WRITE_MEMORY}))
    result = ex.call(reader, "remember", {"text": "x"})
    assert result.outcome == "refused"
    assert "allow-list" in result.reason
    assert handler.args == []
    assert [(r.caller, r.outcome) for r in ex.audit] == [("reader", "refused")]


def test_tool_whose_effect_the_caller_lacks_is_refused() -> None:
    handler = Calls()
    ex = ToolExecutor.with_tools([remember_tool(handler)])
    named_but_read_only = Caller("ro", frozenset({"remember"}), frozenset({Effect.READ}))
    result = ex.call(named_but_read_only, "remember", {"text": "x"})
    assert result.outcome == "refused"
    assert "write_memory not allowed" in result.reason
    assert handler.args == []
    assert ex.audit[0].effects == ("write_memory",)


def test_unknown_tool_is_refused_and_audited() -> None:
    ex = ToolExecutor()
    result = ex.call(WRITER, "rm_rf", {"path": "/"})
    assert result.outcome == "refused"
    assert ex.audit[0].reason == "unknown tool"
    assert ex.audit[0].arguments == {"path": "/"}


@pytest.mark.parametrize(
    ("arguments", "where"),
    [({}, "text"), ({"text": "x", "weight": "heavy"}, "weight")],
)
def test_invalid_arguments_are_refused_before_the_handler_runs(
    arguments: dict[str, object], where: str
) -> None:
    handler = Calls()
    ex = ToolExecutor.with_tools([remember_tool(handler)])
    result = ex.call(WRITER, "remember", arguments)
    assert result.outcome == "refused"
    assert result.reason.startswith(f"invalid arguments: {where}")
    assert handler.args == []


def test_order_arguments_reject_unknown_fields_and_non_positive_quantities() -> None:
    handler = Calls()
    ex = ToolExecutor.with_tools(order_tools(place=handler, modify=Calls(), cancel=Calls()))
    extra = ex.call(TRADER, "place_order", {"symbol": "A", "side": "long", "quantity": 1, "x": 1})
    zero = ex.call(TRADER, "place_order", {"symbol": "A", "side": "long", "quantity": 0})
    assert extra.outcome == zero.outcome == "refused"
    assert handler.args == []


def test_repeated_idempotency_key_returns_the_first_result_without_rerunning() -> None:
    handler = Calls(result={"id": 7})
    ex = ToolExecutor.with_tools([remember_tool(handler)])
    first = ex.call(WRITER, "remember", {"text": "x"}, idempotency_key="k1")
    again = ex.call(WRITER, "remember", {"text": "x"}, idempotency_key="k1")
    assert len(handler.args) == 1
    assert again.value == first.value == {"id": 7}
    assert again.replayed
    assert not first.replayed
    assert [r.reason for r in ex.audit] == ["executed", "idempotent replay"]


def test_idempotency_key_reused_with_other_arguments_is_refused() -> None:
    handler = Calls()
    ex = ToolExecutor.with_tools([remember_tool(handler)])
    ex.call(WRITER, "remember", {"text": "x"}, idempotency_key="k1")
    clash = ex.call(WRITER, "remember", {"text": "y"}, idempotency_key="k1")
    assert clash.outcome == "refused"
    assert len(handler.args) == 1


def test_failed_call_does_not_pin_its_idempotency_key() -> None:
    handler = Calls(fail_times=1)
    ex = ToolExecutor.with_tools([remember_tool(handler)], sleep=lambda _: None)
    assert ex.call(WRITER, "remember", {"text": "x"}, idempotency_key="k").outcome == "failed"
    assert ex.call(WRITER, "remember", {"text": "x"}, idempotency_key="k").ok
    assert len(handler.args) == 2


def test_transient_errors_are_retried_with_exponential_backoff() -> None:
    sleeps: list[float] = []
    handler = Calls(fail_times=2)
    ex = ToolExecutor.with_tools(
        [remember_tool(handler, max_attempts=3)], sleep=sleeps.append, backoff_s=0.1
    )
    result = ex.call(WRITER, "remember", {"text": "x"})
    assert result.ok
    assert result.attempts == 3
    assert sleeps == [0.1, 0.2]
    assert ex.audit[-1].attempts == 3


def test_retries_are_bounded_and_end_in_a_failed_audit_record() -> None:
    handler = Calls(fail_times=10)
    ex = ToolExecutor.with_tools([remember_tool(handler, max_attempts=3)], sleep=lambda _: None)
    result = ex.call(WRITER, "remember", {"text": "x"})
    assert result.outcome == "failed"
    assert len(handler.args) == 3
    assert ex.audit[-1].outcome == "failed"
    assert "after 3 attempt(s)" in ex.audit[-1].reason


def test_non_transient_errors_are_not_retried() -> None:
    def boom(_: NoteArgs) -> object:
        calls.append(1)
        raise RuntimeError("disk full")

    calls: list[int] = []
    ex = ToolExecutor.with_tools(
        [Tool("remember", frozenset({Effect.WRITE_MEMORY}), NoteArgs, boom, max_attempts=5)]
    )
    result = ex.call(WRITER, "remember", {"text": "x"})
    assert result.outcome == "failed"
    assert result.reason == "RuntimeError: disk full"
    assert calls == [1]


def test_rate_limit_refuses_calls_beyond_the_window_until_it_slides() -> None:
    now = [0.0]
    handler = Calls()
    ex = ToolExecutor.with_tools(
        [remember_tool(handler)], rate_limit=RateLimit(2, 10.0), clock=lambda: now[0]
    )
    outcomes = [ex.call(WRITER, "remember", {"text": str(i)}).outcome for i in range(3)]
    assert outcomes == ["ok", "ok", "refused"]
    assert ex.audit[-1].reason == "rate limited"
    now[0] = 10.0
    assert ex.call(WRITER, "remember", {"text": "later"}).ok
    assert len(handler.args) == 3


def test_failed_post_condition_makes_the_call_failed() -> None:
    handler = Calls(result={"stored": False})
    tool = remember_tool(handler, verify=lambda _args, result: result == {"stored": True})
    ex = ToolExecutor.with_tools([tool])
    result = ex.call(WRITER, "remember", {"text": "x"})
    assert result.outcome == "failed"
    assert result.reason == "post-condition not met"


def test_registering_a_tool_name_twice_is_an_error() -> None:
    ex = ToolExecutor.with_tools([remember_tool(Calls())])
    with pytest.raises(ValueError, match="already registered"):
        ex.register(remember_tool(Calls()))


ORDER_ARGS: dict[str, dict[str, object]] = {
    "place_order": {"symbol": "AAPL", "side": "long", "quantity": 10},
    "modify_order": {"order_id": "o-1", "quantity": 5},
    "cancel_order": {"order_id": "o-1"},
}


def test_order_tools_move_funds_and_a_trading_identity_may_use_them() -> None:
    handlers = {"place": Calls(), "modify": Calls(), "cancel": Calls()}
    ex = ToolExecutor.with_tools(order_tools(**handlers))
    assert {t.name: t.effects for t in ex.tools.values()} == {
        name: frozenset({Effect.MOVE_FUNDS}) for name in ORDER_TOOLS
    }
    for name, args in ORDER_ARGS.items():
        assert ex.call(TRADER, name, args).ok
    assert handlers["place"].args == [
        PlaceOrderArgs(symbol="AAPL", side=Direction.LONG, quantity=10)
    ]


@pytest.mark.parametrize("tool", sorted(ORDER_ARGS))
def test_the_reflector_cannot_place_modify_or_cancel_an_order(tool: str) -> None:
    handlers = {"place": Calls(), "modify": Calls(), "cancel": Calls()}
    ex = ToolExecutor.with_tools(order_tools(**handlers))
    result = ex.call(REFLECTOR, tool, ORDER_ARGS[tool])
    assert result.outcome == "refused"
    assert all(h.args == [] for h in handlers.values())
    (rec,) = ex.audit
    assert (rec.caller, rec.tool, rec.effects, rec.outcome) == (
        "reflector",
        tool,
        ("move_funds",),
        "refused",
    )


def test_the_reflector_profile_grants_no_fund_moving_tool_or_effect() -> None:
    assert not (REFLECTOR.tools & ORDER_TOOLS)
    assert Effect.MOVE_FUNDS not in REFLECTOR.effects
