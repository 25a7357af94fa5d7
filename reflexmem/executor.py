"""The one tool executor every tool call goes through (SPEC 6).

Agents, reflectors and flows never call a tool handler directly. A single choke point
is what makes the guarantees checkable: the caller's identity must allow both the tool
and every effect it declares, arguments are validated before anything runs, a repeated
idempotency key replays the first result instead of acting twice, a rate limit bounds
runaway loops, and every attempt, refused ones included, lands in the audit list. A
model that asks to place an order is thus refused and recorded, never obeyed.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reflexmem.ledger.enums import Direction


class Effect(StrEnum):
    """What a tool may change in the world; identities are granted effects, not just names."""

    READ = "read"
    WRITE_MEMORY = "write_memory"
    MOVE_FUNDS = "move_funds"


Outcome = Literal["ok", "refused", "failed"]
ArgsT = TypeVar("ArgsT", bound=BaseModel)


class RetryableToolError(Exception):
    """Raised by a handler whose failure is transient and safe to retry."""


@dataclass(frozen=True)
class Tool(Generic[ArgsT]):
    """A registered tool: its declared effects, argument schema, handler and checks.

    `max_attempts` bounds retries of `RetryableToolError`. `verify`, when given, checks
    the post-condition on the arguments and the handler's result; a failed check makes
    the call `failed` and is not retried, because the effect may already have happened.
    """

    name: str
    effects: frozenset[Effect]
    args_model: type[ArgsT]
    handler: Callable[[ArgsT], object]
    verify: Callable[[ArgsT, object], bool] | None = None
    max_attempts: int = 1

    def __post_init__(self) -> None:
        if not self.effects:
            raise ValueError(f"tool {self.name!r} must declare its effects")
        if self.max_attempts < 1:
            raise ValueError(f"tool {self.name!r}: max_attempts must be >= 1")


@dataclass(frozen=True)
class Caller:
    """An identity: which tools it may call and which effects it may cause."""

    name: str
    tools: frozenset[str]
    effects: frozenset[Effect]


@dataclass(frozen=True)
class RateLimit:
    """At most `max_calls` executions per caller within any `per_seconds` window."""

    max_calls: int
    per_seconds: float


@dataclass(frozen=True)
class AuditRecord:
    """One attempt to call a tool, whatever became of it."""

    at: datetime
    caller: str
    tool: str
    effects: tuple[str, ...]
    arguments: dict[str, Any]
    outcome: Outcome
    reason: str
    attempts: int = 0
    idempotency_key: str | None = None


@dataclass(frozen=True)
class ToolResult:
    """What the caller gets back; `value` is only meaningful when `outcome == "ok"`."""

    outcome: Outcome
    value: object = None
    reason: str = ""
    attempts: int = 0
    replayed: bool = False

    @property
    def ok(self) -> bool:
        """Whether the tool ran (or was replayed) successfully."""
        return self.outcome == "ok"


@dataclass
class _Replay:
    arguments: dict[str, Any]
    value: object


def _plain(arguments: Mapping[str, object]) -> dict[str, Any]:
    """Copy the arguments, so a caller mutating its dict later cannot rewrite the audit."""
    return {str(k): v for k, v in arguments.items()}


@dataclass
class ToolExecutor:
    """Registry of tools plus the checks, retries and audit around every call."""

    tools: dict[str, Tool[Any]] = field(default_factory=dict)
    rate_limit: RateLimit | None = None
    backoff_s: float = 0.05
    max_backoff_s: float = 2.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    audit: list[AuditRecord] = field(default_factory=list)
    _replays: dict[tuple[str, str], _Replay] = field(default_factory=dict, repr=False)
    _recent: dict[str, deque[float]] = field(default_factory=dict, repr=False)

    @classmethod
    def with_tools(cls, tools: Iterable[Tool[Any]], **options: Any) -> ToolExecutor:
        """Build an executor with `tools` registered."""
        executor = cls(**options)
        for tool in tools:
            executor.register(tool)
        return executor

    def register(self, tool: Tool[Any]) -> None:
        """Add a tool; a second tool under the same name is an error, never a replacement."""
        if tool.name in self.tools:
            raise ValueError(f"tool {tool.name!r} is already registered")
        self.tools[tool.name] = tool

    def _record(
        self,
        caller: Caller,
        name: str,
        effects: Iterable[Effect],
        arguments: dict[str, Any],
        outcome: Outcome,
        reason: str,
        attempts: int = 0,
        key: str | None = None,
    ) -> ToolResult:
        self.audit.append(
            AuditRecord(
                at=self.now(),
                caller=caller.name,
                tool=name,
                effects=tuple(sorted(str(e) for e in effects)),
                arguments=arguments,
                outcome=outcome,
                reason=reason,
                attempts=attempts,
                idempotency_key=key,
            )
        )
        return ToolResult(outcome=outcome, reason=reason, attempts=attempts)

    def _rate_limited(self, caller: Caller) -> bool:
        if self.rate_limit is None:
            return False
        now = self.clock()
        recent = self._recent.setdefault(caller.name, deque())
        while recent and now - recent[0] >= self.rate_limit.per_seconds:
            recent.popleft()
        if len(recent) >= self.rate_limit.max_calls:
            return True
        recent.append(now)
        return False

    def call(
        self,
        caller: Caller,
        name: str,
        arguments: Mapping[str, object],
        *,
        idempotency_key: str | None = None,
    ) -> ToolResult:
        """Run tool `name` for `caller` if every check passes; always leaves an audit record."""
        raw = _plain(arguments)
        key = idempotency_key
        tool = self.tools.get(name)
        if tool is None:
            return self._record(caller, name, (), raw, "refused", "unknown tool", key=key)
        if name not in caller.tools:
            reason = f"tool {name!r} is not on {caller.name!r}'s allow-list"
            return self._record(caller, name, tool.effects, raw, "refused", reason, key=key)
        denied = tool.effects - caller.effects
        if denied:
            names = ", ".join(sorted(str(e) for e in denied))
            reason = f"effect(s) {names} not allowed for {caller.name!r}"
            return self._record(caller, name, tool.effects, raw, "refused", reason, key=key)
        try:
            args = tool.args_model.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "arguments"
            reason = f"invalid arguments: {where}: {first['msg']}"
            return self._record(caller, name, tool.effects, raw, "refused", reason, key=key)
        clean = args.model_dump(mode="json")
        if key is not None and (name, key) in self._replays:
            first_call = self._replays[(name, key)]
            if first_call.arguments != clean:
                reason = "idempotency key reused with different arguments"
                return self._record(caller, name, tool.effects, clean, "refused", reason, key=key)
            self._record(caller, name, tool.effects, clean, "ok", "idempotent replay", key=key)
            return ToolResult("ok", first_call.value, "idempotent replay", 0, replayed=True)
        if self._rate_limited(caller):
            return self._record(
                caller, name, tool.effects, clean, "refused", "rate limited", key=key
            )
        return self._run(caller, tool, args, clean, key)

    def _run(
        self,
        caller: Caller,
        tool: Tool[Any],
        args: BaseModel,
        clean: dict[str, Any],
        key: str | None,
    ) -> ToolResult:
        attempt = 0
        while True:
            attempt += 1
            try:
                value = tool.handler(args)
            except RetryableToolError as exc:
                if attempt >= tool.max_attempts:
                    reason = f"retryable error after {attempt} attempt(s): {exc}"
                    return self._record(
                        caller, tool.name, tool.effects, clean, "failed", reason, attempt, key
                    )
                self.sleep(min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s))
                continue
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                return self._record(
                    caller, tool.name, tool.effects, clean, "failed", reason, attempt, key
                )
            break
        if tool.verify is not None and not tool.verify(args, value):
            reason = "post-condition not met"
            return self._record(
                caller, tool.name, tool.effects, clean, "failed", reason, attempt, key
            )
        if key is not None:
            self._replays[(tool.name, key)] = _Replay(clean, value)
        self._record(caller, tool.name, tool.effects, clean, "ok", "executed", attempt, key)
        return ToolResult("ok", value, "executed", attempt)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlaceOrderArgs(_Args):
    """A new order; a limit price of `None` means a market order."""

    symbol: str = Field(min_length=1)
    side: Direction
    quantity: float = Field(gt=0)
    limit_price: float | None = Field(default=None, gt=0)


class ModifyOrderArgs(_Args):
    """A change to a resting order's size or limit."""

    order_id: str = Field(min_length=1)
    quantity: float | None = Field(default=None, gt=0)
    limit_price: float | None = Field(default=None, gt=0)


class CancelOrderArgs(_Args):
    """Cancel a resting order."""

    order_id: str = Field(min_length=1)


ORDER_TOOLS = frozenset({"place_order", "modify_order", "cancel_order"})


def order_tools(
    *,
    place: Callable[[PlaceOrderArgs], object],
    modify: Callable[[ModifyOrderArgs], object],
    cancel: Callable[[CancelOrderArgs], object],
) -> tuple[Tool[Any], ...]:
    """Wrap broker handlers supplied by the caller as the fund-moving order tools."""
    funds = frozenset({Effect.MOVE_FUNDS})
    return (
        Tool("place_order", funds, PlaceOrderArgs, place),
        Tool("modify_order", funds, ModifyOrderArgs, modify),
        Tool("cancel_order", funds, CancelOrderArgs, cancel),
    )


REFLECTOR = Caller(name="reflector", tools=frozenset(), effects=frozenset({Effect.READ}))
"""Reflection judges past cases; it may read, and no tool on its list can move funds."""
