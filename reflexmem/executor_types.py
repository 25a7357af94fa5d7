"""The values the common executor trades in: effects, identities, tools, results, audit.

Also the contracts of the fund-moving order tools and the reflector's identity, which
must never reach them.

Split from `reflexmem.executor` (which re-exports all of them) so that the executor
module holds behaviour only. Everything here is immutable: an identity handed to a
layer cannot be widened by that layer, and an audit record cannot be rewritten later.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from reflexmem.ledger.enums import Direction


class Effect(StrEnum):
    """What a tool may change in the world; identities are granted effects, not just names."""

    READ = "read"
    WRITE_MEMORY = "write_memory"
    WRITE_FILES = "write_files"
    MOVE_FUNDS = "move_funds"


Outcome = Literal["ok", "refused", "failed"]
ArgsT = TypeVar("ArgsT", bound=BaseModel)


class CallCode(StrEnum):
    """Machine-readable reason of a call's outcome; layers map these to episode states."""

    EXECUTED = "executed"
    REPLAYED = "replayed"
    UNKNOWN_TOOL = "unknown_tool"
    NOT_ALLOWED = "not_allowed"
    EFFECT_DENIED = "effect_denied"
    INVALID_ARGUMENTS = "invalid_arguments"
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"
    IN_PROGRESS = "in_progress"
    RATE_LIMITED = "rate_limited"
    HANDLER_ERROR = "handler_error"
    RETRIES_EXHAUSTED = "retries_exhausted"
    POSTCONDITION_FAILED = "postcondition_failed"


PERMISSION_CODES = frozenset({CallCode.NOT_ALLOWED, CallCode.EFFECT_DENIED})
"""Refusals that mean "this identity may not": an answer is a hold, never a retry."""


class RetryableToolError(Exception):
    """Raised by a handler whose failure is transient and safe to retry."""


@dataclass(frozen=True)
class TokenBucket:
    """Rate control of one tool: at most `capacity` calls at once, refilled continuously."""

    capacity: float
    refill_per_s: float

    def __post_init__(self) -> None:
        if self.capacity < 1 or self.refill_per_s < 0:
            raise ValueError(f"invalid token bucket: {self!r}")


@dataclass(frozen=True)
class Tool(Generic[ArgsT]):
    """A registered tool: its declared effects, argument schema, handler and checks.

    `max_attempts` bounds retries of `RetryableToolError`. `verify`, when given, checks
    the post-condition on the arguments and the handler's result against something the
    executor can observe (a stored file's hash, a destination's contents); a failed
    check makes the call `failed` and is not retried, because the effect may already have
    happened. `verifier_version` names that check, so an episode records which one judged
    it. `rate` is the tool's token bucket; `cost` what one attempt costs (any unit the
    budget of the calling skill uses).
    """

    name: str
    effects: frozenset[Effect]
    args_model: type[ArgsT]
    handler: Callable[[ArgsT], object]
    verify: Callable[[ArgsT, object], bool] | None = None
    max_attempts: int = 1
    verifier_version: str | None = None
    rate: TokenBucket | None = None
    cost: float = 0.0

    def __post_init__(self) -> None:
        if not self.effects:
            raise ValueError(f"tool {self.name!r} must declare its effects")
        if self.max_attempts < 1:
            raise ValueError(f"tool {self.name!r}: max_attempts must be >= 1")
        if self.cost < 0:
            raise ValueError(f"tool {self.name!r}: cost must be >= 0")


@dataclass(frozen=True)
class Caller:
    """An identity: which tools it may call, which effects it may cause, with which arguments.

    `argument_schemas` maps a tool name to a JSON Schema the arguments must also satisfy
    for this identity (e.g. a skill that may only file documents into two folders); it
    narrows the tool's own argument model, it can never widen it.
    """

    name: str
    tools: frozenset[str]
    effects: frozenset[Effect]
    argument_schemas: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, hash=False)


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
    code: str = ""


@dataclass(frozen=True)
class ToolResult:
    """What the caller gets back; `value` is only meaningful when `outcome == "ok"`.

    `verified` is None when the tool has no post-condition check (or never ran), else
    whether it held; `verifier_version` names the check that judged it.
    """

    outcome: Outcome
    value: object = None
    reason: str = ""
    attempts: int = 0
    replayed: bool = False
    code: CallCode = CallCode.EXECUTED
    verified: bool | None = None
    verifier_version: str | None = None
    latency_ms: float = 0.0
    effects: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether the tool ran (or was replayed) successfully."""
        return self.outcome == "ok"


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
