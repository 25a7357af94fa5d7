"""The one tool executor every tool call goes through (docs/design.md §7).

Agents, reflectors, the REFLEX layers and flows never call a tool handler directly. A
single choke point is what makes the guarantees checkable: the caller's identity must
allow the tool, every effect it declares and (when the identity says so) the argument
values; arguments are validated before anything runs; a repeated idempotency key
replays the first result instead of acting twice (across processes, with the ledger
store of `reflexmem.executor_ledger`); a token bucket per tool, shared by every worker
on the same ledger, bounds the call rate; transient failures are retried a bounded
number of times with exponential backoff; the post-condition is verified against what
the executor can observe, and the verifier's version comes back with the result; and
every attempt, refused ones included, lands in the audit list. A model that asks to
place an order is thus refused and recorded, never obeyed.

The value types live in `reflexmem.executor_types` and are re-exported here.
"""

from __future__ import annotations

import functools
import json
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ValidationError

from reflexmem.executor_stores import (
    Claim,
    IdempotencyStore,
    MemoryIdempotency,
    MemoryRateStore,
    RateStore,
)
from reflexmem.executor_types import (
    ORDER_TOOLS,
    PERMISSION_CODES,
    REFLECTOR,
    ArgsT,
    AuditRecord,
    CallCode,
    Caller,
    CancelOrderArgs,
    Effect,
    ModifyOrderArgs,
    Outcome,
    PlaceOrderArgs,
    RateLimit,
    RetryableToolError,
    TokenBucket,
    Tool,
    ToolResult,
    order_tools,
)

__all__ = [
    "ORDER_TOOLS",
    "PERMISSION_CODES",
    "REFLECTOR",
    "ArgsT",
    "AuditRecord",
    "CallCode",
    "Caller",
    "CancelOrderArgs",
    "Effect",
    "ModifyOrderArgs",
    "Outcome",
    "PlaceOrderArgs",
    "RateLimit",
    "RetryableToolError",
    "TokenBucket",
    "Tool",
    "ToolExecutor",
    "ToolResult",
    "order_tools",
]


def _plain(arguments: Mapping[str, object]) -> dict[str, Any]:
    """Copy the arguments, so a caller mutating its dict later cannot rewrite the audit."""
    return {str(k): v for k, v in arguments.items()}


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json))


def _contract_violation(schema: Mapping[str, Any], arguments: dict[str, Any]) -> str | None:
    """The first way `arguments` break a caller's JSON Schema for a tool, or None."""
    validator = _validator(json.dumps(schema, sort_keys=True, default=str))
    error = next(iter(sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))), None)
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path) or "arguments"
    return f"{where}: {error.message}"


@dataclass
class ToolExecutor:
    """Registry of tools plus the checks, retries, idempotency, rate and audit of every call.

    `idempotency` and `rates` default to in-process stores; pass the ledger-backed ones to
    share keys and buckets between processes. A call that finds its tool's bucket empty
    waits for a token when that takes at most `max_rate_wait_s`, else it is refused.
    """

    tools: dict[str, Tool[Any]] = field(default_factory=dict)
    rate_limit: RateLimit | None = None
    backoff_s: float = 0.05
    max_backoff_s: float = 2.0
    max_rate_wait_s: float = 1.0
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    now: Callable[[], datetime] = field(default=lambda: datetime.now(UTC))
    idempotency: IdempotencyStore = field(default_factory=MemoryIdempotency)
    rates: RateStore = field(default_factory=MemoryRateStore)
    audit: list[AuditRecord] = field(default_factory=list)
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
        code: CallCode,
        reason: str,
        attempts: int = 0,
        key: str | None = None,
        **result: Any,
    ) -> ToolResult:
        names = tuple(sorted(str(e) for e in effects))
        self.audit.append(
            AuditRecord(
                at=self.now(),
                caller=caller.name,
                tool=name,
                effects=names,
                arguments=arguments,
                outcome=outcome,
                reason=reason,
                attempts=attempts,
                idempotency_key=key,
                code=str(code),
            )
        )
        return ToolResult(
            outcome=outcome, reason=reason, attempts=attempts, code=code, effects=names, **result
        )

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

    def _bucket_refused(self, tool: Tool[Any]) -> bool:
        """Take a token of the tool's bucket, waiting once if that is short enough."""
        if tool.rate is None:
            return False
        wait = self.rates.take(tool.name, tool.rate, self.wall())
        if wait == 0.0:
            return False
        if wait > self.max_rate_wait_s:
            return True
        self.sleep(wait)
        return self.rates.take(tool.name, tool.rate, self.wall()) != 0.0

    def _check(
        self, caller: Caller, name: str, raw: dict[str, Any], key: str | None
    ) -> tuple[Tool[Any], BaseModel, dict[str, Any]] | ToolResult:
        """Permission and argument checks; a `ToolResult` means the call is refused."""
        tool = self.tools.get(name)
        if tool is None:
            return self._record(
                caller, name, (), raw, "refused", CallCode.UNKNOWN_TOOL, "unknown tool", key=key
            )
        refuse = functools.partial(
            self._record, caller, name, tool.effects, raw, "refused", key=key
        )
        if name not in caller.tools:
            reason = f"tool {name!r} is not on {caller.name!r}'s allow-list"
            return refuse(CallCode.NOT_ALLOWED, reason)
        denied = tool.effects - caller.effects
        if denied:
            names = ", ".join(sorted(str(e) for e in denied))
            return refuse(
                CallCode.EFFECT_DENIED, f"effect(s) {names} not allowed for {caller.name!r}"
            )
        try:
            args = tool.args_model.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "arguments"
            return refuse(CallCode.INVALID_ARGUMENTS, f"invalid arguments: {where}: {first['msg']}")
        clean = args.model_dump(mode="json")
        schema = caller.argument_schemas.get(name)
        violation = None if schema is None else _contract_violation(schema, clean)
        if violation is not None:
            reason = f"invalid arguments: outside {caller.name!r}'s contract: {violation}"
            return refuse(CallCode.INVALID_ARGUMENTS, reason)
        return tool, args, clean

    def call(
        self,
        caller: Caller,
        name: str,
        arguments: Mapping[str, object],
        *,
        idempotency_key: str | None = None,
        max_attempts: int | None = None,
    ) -> ToolResult:
        """Run tool `name` for `caller` if every check passes; always leaves an audit record.

        `max_attempts` lowers the tool's own bound (a skill's retry limit); it never
        raises it.
        """
        raw = _plain(arguments)
        key = idempotency_key
        checked = self._check(caller, name, raw, key)
        if isinstance(checked, ToolResult):
            return checked
        tool, args, clean = checked
        record = functools.partial(self._record, caller, name, tool.effects, clean, key=key)
        if key is not None:
            answered = self._answer_claim(
                self.idempotency.claim(name, key, clean, caller.name), tool, record
            )
            if answered is not None:
                return answered
        if self._rate_limited(caller) or self._bucket_refused(tool):
            if key is not None:
                self.idempotency.fail(name, key, "rate limited", 0)
            return record("refused", CallCode.RATE_LIMITED, "rate limited")
        limit = tool.max_attempts if max_attempts is None else min(max_attempts, tool.max_attempts)
        return self._run(caller, tool, args, clean, key, max(1, limit))

    @staticmethod
    def _answer_claim(
        claim: Claim, tool: Tool[Any], record: Callable[..., ToolResult]
    ) -> ToolResult | None:
        """None when the call may run; else the replayed result or the refusal."""
        if claim.status == "claimed":
            return None
        shared: dict[str, Any] = {
            "replayed": True,
            "value": claim.value,
            "verifier_version": tool.verifier_version,
        }
        if claim.status == "replay":
            verified = True if tool.verify is not None else None
            return record(
                "ok",
                CallCode.REPLAYED,
                "idempotent replay",
                claim.attempts,
                verified=verified,
                **shared,
            )
        if claim.status == "unverified":
            return record(
                "failed",
                CallCode.POSTCONDITION_FAILED,
                claim.reason,
                claim.attempts,
                verified=False,
                **shared,
            )
        code = CallCode.IDEMPOTENCY_CONFLICT if claim.status == "conflict" else CallCode.IN_PROGRESS
        return record("refused", code, claim.reason)

    def _run(
        self,
        caller: Caller,
        tool: Tool[Any],
        args: BaseModel,
        clean: dict[str, Any],
        key: str | None,
        limit: int,
    ) -> ToolResult:
        record = functools.partial(self._record, caller, tool.name, tool.effects, clean, key=key)
        started = self.clock()
        attempt = 0
        while True:
            attempt += 1
            try:
                value = tool.handler(args)
            except RetryableToolError as exc:
                if attempt >= limit:
                    reason = f"retryable error after {attempt} attempt(s): {exc}"
                    return self._release(
                        record, key, tool, reason, attempt, started, CallCode.RETRIES_EXHAUSTED
                    )
                self.sleep(min(self.backoff_s * 2 ** (attempt - 1), self.max_backoff_s))
                continue
            except Exception as exc:
                reason = f"{type(exc).__name__}: {exc}"
                return self._release(
                    record, key, tool, reason, attempt, started, CallCode.HANDLER_ERROR
                )
            break
        latency = (self.clock() - started) * 1000.0
        common: dict[str, Any] = {
            "verifier_version": tool.verifier_version,
            "latency_ms": latency,
            "value": value,
        }
        if tool.verify is not None and not tool.verify(args, value):
            reason = "post-condition not met"
            if key is not None:
                self.idempotency.unverified(tool.name, key, value, reason, attempt)
            return record(
                "failed", CallCode.POSTCONDITION_FAILED, reason, attempt, verified=False, **common
            )
        if key is not None:
            self.idempotency.complete(tool.name, key, value, attempt)
        verified = True if tool.verify is not None else None
        return record("ok", CallCode.EXECUTED, "executed", attempt, verified=verified, **common)

    def _release(
        self,
        record: Callable[..., ToolResult],
        key: str | None,
        tool: Tool[Any],
        reason: str,
        attempts: int,
        started: float,
        code: CallCode,
    ) -> ToolResult:
        if key is not None:
            self.idempotency.fail(tool.name, key, reason, attempts)
        latency = (self.clock() - started) * 1000.0
        return record("failed", code, reason, attempts, latency_ms=latency)
