"""The agent-facing tools, written once for the HTTP API and the MCP server.

An agent runtime records what it decided and did (decisions, previews, executions,
fills), consumes a preview exactly once, and in active mode recalls what its role
learnt. Each tool here calls one operation (`reflexmem.operations.intake`, `.recall`)
and turns its report into plain JSON, or its refusal into a `ToolFailure` that carries
an HTTP status and the field at fault; `apps/service/api.py` and `apps/service/mcp_server.py` only
translate those to their protocol, so the two surfaces cannot drift apart.

No tool moves funds: executions and fills are records of what already happened in
the market, and nothing here places, routes or cancels an order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reflexmem.ingest.read import IngestError
from reflexmem.ingest.rows import RECORD_KINDS
from reflexmem.ingest.schemas import SCHEMAS
from reflexmem.ledger.enums import QuarantineReason
from reflexmem.ledger.sqlio import to_utc
from reflexmem.operations import intake
from reflexmem.operations import recall as recall_op
from reflexmem.operations.resources import Resources
from reflexmem.recall import RecallConstraints, RecallQueryError, RecallUnavailable, require_active
from reflexmem.settings import MemoryMode

Loc = tuple[str | int, ...]


class ToolFailure(Exception):
    """A refused call: the HTTP status it maps to, the field at fault, and why."""

    def __init__(self, status: int, message: str, loc: Loc = (), code: str = "refused") -> None:
        super().__init__(message)
        self.status, self.message, self.loc, self.code = status, message, loc, code

    def __str__(self) -> str:
        where = ".".join(str(p) for p in self.loc)
        return f"{where}: {self.message}" if where else self.message


class RecallRequest(BaseModel):
    """One recall: the exact role, the query text and the optional constraints."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(min_length=1, description="Exact role ID (as registered).")
    query: str = Field(description="What to recall (plain text; never SQL).")
    symbol: str | None = Field(default=None, description="Only cases on this symbol.")
    scenario: str | None = Field(default=None, description="Only cases in this scenario.")
    as_of: datetime | None = Field(
        default=None,
        description="Valid time (the cycle's clock; naive means UTC): only what was decided "
        "and had matured by then, as a live run at that clock would recall it.",
    )
    known_at: datetime | None = Field(
        default=None,
        description="Recorded time (wall clock; naive means UTC): only what had been written "
        "by then.",
    )
    decision_id: str | None = Field(
        default=None, description="The decision this recall informs (credits the policy)."
    )
    k: int | None = Field(default=None, ge=1, le=100, description="At most this many items.")
    policy: str | None = Field(
        default=None, description="A retrieval policy to use instead of the bandit's pick."
    )


def record(res: Resources, kind: str, rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Record rows of one kind (all or none); 422 naming row and field if any is bad."""
    if kind not in RECORD_KINDS:
        raise ToolFailure(404, f"nothing records {kind!r}; use {', '.join(RECORD_KINDS)}")
    try:
        report = intake.record(res, kind, rows)
    except IngestError as exc:
        loc: Loc = ()
        if exc.row is not None:
            loc += (exc.row - 1,)
        if exc.column is not None:
            loc += (exc.column,)
        raise ToolFailure(422, str(exc), loc, "invalid_row") from exc
    return {
        "kind": kind,
        "rows": len(rows),
        "added": report.added.get(kind, 0),
        "unchanged": report.unchanged_rows.get(kind, 0),
    }


_CONSUME_STATUS = {
    QuarantineReason.PREVIEW_DOUBLE_CONSUME.value: (409, ("preview_id",)),
    QuarantineReason.PREVIEW_MISSING.value: (404, ("preview_id",)),
    QuarantineReason.UNKNOWN_DECISION.value: (422, ("decision_id",)),
}


def consume(res: Resources, preview_id: str, decision_id: str) -> dict[str, Any]:
    """Consume a preview for a decision exactly once; a refusal is kept in quarantine.

    A second consumption is 409, an unknown preview 404, an unknown decision 422.
    """
    report = intake.consume(res, preview_id, decision_id)
    if not report.consumed:
        status, loc = _CONSUME_STATUS.get(report.code or "", (409, ()))
        raise ToolFailure(status, report.reason or "refused", loc, report.code or "refused")
    return {"preview_id": preview_id, "decision_id": decision_id, "consumed": True}


def recall(res: Resources, mode: MemoryMode, request: RecallRequest) -> dict[str, Any]:
    """Recall under every constraint in active mode; in shadow mode there is no recall."""
    try:
        require_active(mode)
    except RecallUnavailable as exc:
        raise ToolFailure(404, str(exc), (), "recall_unavailable") from exc
    when = None if request.as_of is None else to_utc(request.as_of)
    known = None if request.known_at is None else to_utc(request.known_at)
    try:
        res.registry.get(request.role)
    except KeyError as exc:
        raise ToolFailure(422, str(exc.args[0]), ("role",), "unknown_role") from exc
    constraints = RecallConstraints(
        role=request.role,
        symbol=request.symbol,
        scenario=request.scenario,
        as_of=when,
        known_at=known,
    )
    try:
        report = recall_op.recall(
            res,
            constraints,
            request.query,
            decision_id=request.decision_id,
            k=request.k,
            policy=request.policy,
        )
    except RecallQueryError as exc:
        raise ToolFailure(422, str(exc), ("query",), "bad_query") from exc
    except KeyError as exc:
        raise ToolFailure(422, str(exc.args[0]), ("policy",), "unknown_policy") from exc
    result = report.result
    return {
        "recall_id": report.recall_id,
        "role": request.role,
        "symbol": request.symbol,
        "scenario": request.scenario,
        "as_of": None if when is None else when.isoformat(),
        "decision_id": request.decision_id,
        "policy": report.policy.name,
        "terms": list(result.terms),
        "candidates": result.candidates,
        "hits": [h.to_dict() for h in result.hits],
    }


def describe(kind: str) -> str:
    """A tool description naming every field of a kind's contract (for agents)."""
    schema = SCHEMAS[kind]
    fields = []
    for c in schema.columns:
        spec = c.type + ("" if c.required else ", optional")
        if c.enum is not None:
            spec += ": " + "|".join(m.value for m in c.enum)
        fields.append(f"{c.name} ({spec})")
    return f"Record {kind} (all or none). {schema.doc} Fields: " + "; ".join(fields) + "."
