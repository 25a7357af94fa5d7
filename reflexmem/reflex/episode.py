"""One episode end to end: route, act through the common executor, record the experience.

`act` turns a `Routing` into an `ExperienceRecord`. A decided skill's action is the only
thing that touches the world, and only through `ToolExecutor.call` under the skill's
own identity (its tools, effects and argument contract), with its retry limit and
idempotency key, after a budget check. The executor's answer is mapped to the contract:

| executor result | episode |
|---|---|
| executed / replayed, post-conditions hold | success (failure `policy` if the answer was wrong) |
| identity lacks the tool or an effect | hold `missing_permission` |
| rate limited, key in progress | hold `rate_limited` / `in_progress` |
| arguments refused | failure `input_interpretation` |
| key reused with other arguments | failure `policy` |
| handler error, retries exhausted, unknown tool | failure `execution` |
| post-condition failed (tool verifier or skill post-condition) | failure `verification` |

`record_episode` writes the record, its review causes and the executor's audit of the
episode in the caller's transaction; `run_episode` is the three steps in order.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.executor import PERMISSION_CODES, AuditRecord, CallCode, ToolExecutor, ToolResult
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.reflex_enums import EpisodeStatus, FailureKind
from reflexmem.reflex.deliberate import Deliberator
from reflexmem.reflex.experience import ExperienceRecord, write_experiences
from reflexmem.reflex.review import enqueue_all
from reflexmem.reflex.router import Routing, Task, route
from reflexmem.reflex.snapshot import SkillSnapshot

_HOLDS = {CallCode.RATE_LIMITED: "rate_limited", CallCode.IN_PROGRESS: "in_progress"}
_FAILS = {
    CallCode.INVALID_ARGUMENTS: FailureKind.INPUT_INTERPRETATION,
    CallCode.IDEMPOTENCY_CONFLICT: FailureKind.POLICY,
    CallCode.UNKNOWN_TOOL: FailureKind.EXECUTION,
    CallCode.HANDLER_ERROR: FailureKind.EXECUTION,
    CallCode.RETRIES_EXHAUSTED: FailureKind.EXECUTION,
    CallCode.POSTCONDITION_FAILED: FailureKind.VERIFICATION,
}


@dataclass(frozen=True)
class EpisodeResult:
    """The record of one episode, how it was routed, and what the executor audited."""

    record: ExperienceRecord
    routing: Routing
    audit: tuple[AuditRecord, ...]


def _post_condition_failures(
    checks: Sequence[Mapping[str, Any]], value: object, arguments: Mapping[str, Any]
) -> list[str]:
    failed: list[str] = []
    found = value if isinstance(value, Mapping) else {}
    for check in checks:
        key = str(check["result"])
        want = (
            arguments.get(str(check["equals_argument"]))
            if "equals_argument" in check
            else (check.get("equals"))
        )
        if found.get(key) != want:
            failed.append(f"result.{key} is {found.get(key)!r}, expected {want!r}")
    return failed


def _json(value: object) -> Any:
    return json.loads(json.dumps(value, default=str))


def act(
    routing: Routing,
    executor: ToolExecutor,
    *,
    cost_per_1k_tokens: float = 0.0,
    audit_from: int | None = None,
) -> EpisodeResult:
    """Execute the routed action (if any) and build the episode's experience record.

    The episode's audit is `executor.audit` from `audit_from` on (default: from now), so
    a caller that routed with a deliberator sharing this executor passes the position
    before routing and the refused tool requests of the model are recorded too.
    """
    task, skill = routing.task, routing.skill
    audit_from = len(executor.audit) if audit_from is None else audit_from
    status, reason, kind = routing.status, routing.status_reason, None
    result: dict[str, Any] = {"choice": routing.choice}
    if routing.missing:
        result["missing"] = list(routing.missing)
    call: ToolResult | None = None
    tool_cost = 0.0
    verifier: str | None = None
    effects: list[str] | None = None
    if status is None and routing.tool is not None and skill is not None:
        tool = executor.tools.get(routing.tool)
        attempts_allowed = skill.spec.retry_limit + 1
        worst = (tool.cost if tool is not None else 0.0) * attempts_allowed
        budget = skill.spec.max_cost
        if budget is not None and worst > budget:
            status, reason = EpisodeStatus.HOLD, "over_budget"
            result["budget"] = {"worst_case_cost": worst, "max_cost": budget}
        else:
            call = executor.call(
                skill.spec.caller(),
                routing.tool,
                routing.arguments or {},
                idempotency_key=routing.idempotency_key,
                max_attempts=attempts_allowed,
            )
            effects = list(call.effects)
            verifier = call.verifier_version
            tool_cost = (tool.cost if tool is not None else 0.0) * call.attempts
            result.update(
                outcome=call.outcome,
                code=str(call.code),
                reason=call.reason,
                value=_json(call.value),
                replayed=call.replayed,
                verified=call.verified,
            )
            status, reason, kind = _map_call(call)
            if status == EpisodeStatus.SUCCESS:
                broken = _post_condition_failures(
                    skill.spec.post_conditions, call.value, routing.arguments or {}
                )
                if broken:
                    status, reason, kind = (
                        EpisodeStatus.FAILURE,
                        "post_condition",
                        (FailureKind.VERIFICATION),
                    )
                    result["post_conditions"] = broken
                    verifier = f"{verifier or 'none'}+{skill.key}"
    elif status is None:
        status = EpisodeStatus.SUCCESS
    feedback = None
    if task.expected is not None:
        correct = routing.choice == task.expected
        feedback = {"expected": task.expected, "correct": correct, "source": "independent"}
        if status == EpisodeStatus.SUCCESS and not correct:
            status, reason, kind = EpisodeStatus.FAILURE, "wrong_choice", FailureKind.POLICY
    delib = routing.deliberation
    tokens = delib.usage.total_tokens if delib is not None and delib.usage is not None else 0
    if delib is not None:
        result["model_errors"] = list(delib.errors)
        result["refused_requests"] = list(delib.refused_requests)
    model_cost = tokens / 1000.0 * cost_per_1k_tokens
    record = ExperienceRecord(
        episode_id=task.episode_id,
        agent_id=task.agent_id,
        parent_id=task.parent_id,
        root_id=task.root_id,
        decision_id=task.decision_id,
        structure_id=task.structure_id,
        structure_version=task.structure_version,
        module_id=task.module_id,
        edge_id=task.edge_id,
        goal=task.goal or None,
        observation=_json(dict(task.observation)),
        source_ref=task.source_ref,
        task_family=task.task_family,
        environment_version=task.environment_version,
        layer=routing.layer,
        skill_id=skill.spec.skill_id if skill is not None else None,
        skill_version=skill.spec.version if skill is not None else None,
        model_version=delib.model_version if delib is not None else None,
        arguments=_json(routing.arguments) if routing.arguments is not None else None,
        rationale=routing.rationale or None,
        confidence=routing.confidence,
        escalations=[s.as_json() for s in routing.trail],
        tool=routing.tool if call is not None else None,
        allowed_effects=effects,
        idempotency_key=routing.idempotency_key if call is not None else None,
        result=result,
        verifier_version=verifier,
        status=status,
        status_reason=reason if status != EpisodeStatus.SUCCESS else None,
        failure_kind=kind,
        feedback=feedback,
        cost=tool_cost + model_cost,
        cost_detail={"tool": tool_cost, "model": model_cost, "model_tokens": float(tokens)},
        latency_ms=call.latency_ms if call is not None else 0.0,
        retries=max(0, call.attempts - 1) if call is not None else 0,
        recorded_at=task.at,
    )
    return EpisodeResult(record, routing, tuple(executor.audit[audit_from:]))


def _map_call(call: ToolResult) -> tuple[EpisodeStatus, str | None, FailureKind | None]:
    if call.ok:
        return EpisodeStatus.SUCCESS, None, None
    if call.code in PERMISSION_CODES:
        return EpisodeStatus.HOLD, "missing_permission", None
    if call.code in _HOLDS:
        return EpisodeStatus.HOLD, _HOLDS[call.code], None
    return EpisodeStatus.FAILURE, str(call.code), _FAILS.get(call.code, FailureKind.EXECUTION)


def _audit_frame(records: Sequence[AuditRecord], batch_id: str, role: str | None) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "batch_id": [batch_id] * len(records),
            "role_id": [role] * len(records),
            "at": [r.at for r in records],
            "caller": [r.caller for r in records],
            "tool": [r.tool for r in records],
            "effects": [json.dumps(list(r.effects)) for r in records],
            "arguments": [json.dumps(r.arguments, default=str) for r in records],
            "outcome": [r.outcome for r in records],
            "reason": [r.reason for r in records],
            "attempts": [r.attempts for r in records],
            "idempotency_key": [r.idempotency_key for r in records],
        },
        schema_overrides={"role_id": pl.String, "idempotency_key": pl.String},
    )


def record_episode(conn: sa.Connection, result: EpisodeResult) -> None:
    """Write the episode, its review causes and its executor audit (caller's transaction)."""
    write_experiences(conn, [result.record])
    enqueue_all(conn, result.routing.reviews, result.record.episode_id)
    if result.audit:
        skill = result.routing.skill
        role = skill.spec.owner if skill is not None else None
        bulk_insert(
            conn, "executor_audit", _audit_frame(result.audit, result.record.episode_id, role)
        )


def run_episode(
    conn: sa.Connection,
    task: Task,
    snapshot: SkillSnapshot,
    executor: ToolExecutor,
    *,
    deliberator: Deliberator | None = None,
) -> EpisodeResult:
    """Route `task` on the pinned `snapshot`, act, and record it all."""
    start = len(executor.audit)
    result = act(route(task, snapshot, deliberator=deliberator), executor, audit_from=start)
    record_episode(conn, result)
    return result
