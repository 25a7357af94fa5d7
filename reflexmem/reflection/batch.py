"""Reflection batches on the ledger: build inputs in bulk, reflect, apply results in bulk.

One batch reflects on one role under the role's lock (`reflexmem.reflection.locks`: a
session advisory lock on PostgreSQL, a file lock beside a SQLite ledger), so two batches
of the same role never run at once, and a crashed batch leaves no lock behind. The lock
is not a transaction: the batch reads its inputs in one short transaction, asks the
reflector with no transaction open (a model call is bounded in bytes and time, but it
is still a network call, and a transaction held across it would stop every other writer
of a SQLite ledger), and writes its results in a second short transaction
(`reflexmem.reflection.apply`), which skips any case that moved meanwhile.

Inputs come from the case, its decision's evidence and the decision's *primary*
evaluation run only; a case without one is not offered. Deferred cases
(`pending/budget_deferred`) are offered first, so the budget delays them, never drops
them (`reflexmem.reflection.inputs` reads and builds them). Results:

* a verdict: `reflected` with class, lesson (learnable classes only) and the reflection
  JSON (the episodes stage then records the case as an episode of the role's memory);
  a lesson that addresses the system instead of the trade is `held` for review,
* a failed reflection: `reflection_failed` with the error; nothing is fabricated,
* over budget: `pending/budget_deferred`,
* every executor audit record of the batch: a row of `executor_audit`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.executor import ToolExecutor, order_tools
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.sqlio import UTC_US
from reflexmem.reflection.apply import apply_results
from reflexmem.reflection.budget import BudgetGate, BudgetLimits
from reflexmem.reflection.inputs import build_inputs, load_inputs
from reflexmem.reflection.locks import DEFAULT_TIMEOUT_S, record_holder, role_lock
from reflexmem.reflection.types import ReflectionInput, Reflector
from reflexmem.reflection.verdicts import verdict_frame
from reflexmem.registry import RoleRegistry


class BrokerCallError(RuntimeError):
    """Raised by the guard broker if an order handler ever runs during reflection."""


def guarded_executor() -> tuple[ToolExecutor, list[str]]:
    """An executor with the real order tools registered and a broker that must never run.

    Registering them makes the refusal a permission decision (the reflector identity
    lacks the tool and the `move_funds` effect), not a missing tool; the returned list
    records any handler call, so a test can show it stays empty.
    """
    calls: list[str] = []

    def broker(name: str) -> Callable[[Any], object]:
        def handler(args: Any) -> object:
            calls.append(name)
            raise BrokerCallError(f"{name} reached the broker during reflection")

        return handler

    tools = order_tools(
        place=broker("place_order"), modify=broker("modify_order"), cancel=broker("cancel_order")
    )
    return ToolExecutor.with_tools(tools), calls


@dataclass(frozen=True)
class RoleReport:
    """What one role's reflection batch did."""

    role_id: str
    batch_id: str
    offered: int = 0
    reflected: int = 0
    failed: int = 0
    deferred: int = 0
    lessons: int = 0
    held: int = 0
    skipped: int = 0
    model_calls: int = 0
    tokens: int = 0
    audit_records: int = 0
    by_class: dict[str, int] = field(default_factory=dict)
    mlflow_run_id: str | None = None

    def as_row(self) -> dict[str, object]:
        """Flat counts for tables and artifacts."""
        row: dict[str, object] = {
            "role": self.role_id,
            "batch": self.batch_id,
            "offered": self.offered,
            "reflected": self.reflected,
            "failed": self.failed,
            "deferred": self.deferred,
            "lessons": self.lessons,
            "held": self.held,
            "skipped": self.skipped,
            "model_calls": self.model_calls,
            "tokens": self.tokens,
            "audit_records": self.audit_records,
            "mlflow_run": self.mlflow_run_id or "",
        }
        row.update({f"class_{k}": v for k, v in sorted(self.by_class.items())})
        return row


@dataclass(frozen=True)
class ReflectionBatch:
    """A batch about to be written: its counts and one row per verdict (the lessons table).

    `cases` has the case, decision, symbol, decision time, the primary evaluation run the
    verdict judged, the case state, outcome class, lesson, layer and error of every
    reflected or failed case (deferred cases get their verdict in a later batch).
    """

    report: RoleReport
    cases: pl.DataFrame


ReflectionOpener = Callable[[ReflectionBatch], str | None]
"""Called once per non-empty batch, before its summary row is written: the tracking run ID."""


def _usage_row(conn: sa.Connection, day: str, lock: bool) -> tuple[int, int]:
    conn.execute(
        sa.text(
            "INSERT INTO reflection_budget_usage (day, calls, tokens, updated_at) "
            "VALUES (:d, 0, 0, :t) ON CONFLICT (day) DO NOTHING"
        ),
        {"d": day, "t": datetime.now(UTC)},
    )
    sql = "SELECT calls, tokens FROM reflection_budget_usage WHERE day = :d"
    if lock and conn.dialect.name == "postgresql":
        sql += " FOR UPDATE"
    row = conn.execute(sa.text(sql), {"d": day}).one()
    return int(row[0]), int(row[1])


def charge_usage(conn: sa.Connection, day: str, calls: int, tokens: int) -> None:
    """Add (possibly negative) calls and tokens to a day's persisted usage, atomically."""
    _usage_row(conn, day, lock=False)
    conn.execute(
        sa.text(
            "UPDATE reflection_budget_usage SET calls = calls + :c, tokens = tokens + :k, "
            "updated_at = :t WHERE day = :d"
        ),
        {"c": calls, "k": tokens, "t": datetime.now(UTC), "d": day},
    )


def _reserve(
    engine: sa.Engine, limits: BudgetLimits, day: date, inputs: list[Any]
) -> tuple[BudgetGate, list[Any], list[Any]]:
    """Admit against the persisted day usage and commit the reservation at once.

    The reservation commits in its own short transaction (under a row lock on
    PostgreSQL, the write lock on SQLite), so batches of other roles see it while this
    one waits on the model; a batch that crashes after it leaves it charged (the budget
    errs on the side of fewer calls).
    """
    key = day.isoformat()
    with engine.begin() as c:
        calls, tokens = _usage_row(c, key, lock=True)
        gate = BudgetGate(limits, day=day, ledger={key: {"calls": calls, "tokens": tokens}})
        allowed, deferred = gate.admit(inputs)
        after = gate.ledger[key]
        charge_usage(c, key, after["calls"] - calls, after["tokens"] - tokens)
    return gate, allowed, [d.item for d in deferred]


def reflect_role(
    engine: sa.Engine,
    registry: RoleRegistry,
    role_id: str,
    reflector: Reflector,
    *,
    reflector_name: str = "rules",
    profile: str = "spy_daily",
    limit: int = 1_000_000,
    budget: BudgetLimits | None = None,
    day: date | None = None,
    executor: ToolExecutor | None = None,
    on_locked: Callable[[str], None] | None = None,
    lock_timeout_s: float = DEFAULT_TIMEOUT_S,
    open_run: ReflectionOpener | None = None,
) -> RoleReport:
    """Reflect on one role's offerable cases under the role's lock (see the module doc).

    `open_run` (the tracker's, if any) is handed the batch just before its summary row
    is written and returns the tracking run ID stored on that row.
    """
    registry.get(role_id)
    batch_id = f"refl-{uuid.uuid4().hex[:20]}"
    started = datetime.now(UTC)
    audit_from = len(executor.audit) if executor is not None else 0
    with role_lock(engine, role_id, timeout_s=lock_timeout_s):
        if on_locked is not None:
            on_locked(batch_id)
        with engine.connect() as conn:
            frame = load_inputs(conn, role_id, profile=profile, limit=limit)
        if frame.height == 0:
            # Nothing offerable: no batch row, so a re-run after a crash adds no empty batch.
            return RoleReport(role_id=role_id, batch_id=batch_id)
        inputs, failures = build_inputs(frame, registry)
        deferred: list[ReflectionInput] = []
        gate: BudgetGate | None = None
        if budget is not None and inputs:
            gate, inputs, deferred = _reserve(
                engine, budget, day or datetime.now(UTC).date(), inputs
            )
        results = reflector.reflect(inputs) if inputs else []  # no transaction is open
        if len(results) != len(inputs):
            raise RuntimeError(f"reflector returned {len(results)} results for {len(inputs)}")
        records = executor.audit[audit_from:] if executor is not None else []
        with engine.begin() as conn:
            record_holder(conn, role_id, batch_id)
            if gate is not None:
                key = gate.day.isoformat()
                before = gate.ledger[key]
                gate.record_reflections(results)
                after = gate.ledger[key]
                charge_usage(
                    conn, key, after["calls"] - before["calls"], after["tokens"] - before["tokens"]
                )
            written = apply_results(
                conn,
                batch_id=batch_id,
                role_id=role_id,
                results=results,
                failures=failures,
                deferred=[d.case_id for d in deferred],
                records=records,
            )
            calls = sum(r.model_calls for r in results)
            tokens = sum(r.usage.total_tokens for r in results if r.usage is not None)
            report = RoleReport(
                role_id=role_id,
                batch_id=batch_id,
                offered=frame.height,
                reflected=written.reflected,
                failed=written.failed,
                deferred=written.deferred,
                lessons=written.lessons,
                held=written.held,
                skipped=written.skipped,
                model_calls=calls,
                tokens=tokens,
                audit_records=len(records),
                by_class=written.by_class,
            )
            everything = results + failures
            if open_run is not None:
                run_id = open_run(ReflectionBatch(report, verdict_frame(frame, everything)))
                report = replace(report, mlflow_run_id=run_id)
            bulk_insert(conn, "reflection_batches", _batch_row(report, reflector_name, started))
            bulk_insert(
                conn,
                "reflection_batch_cases",
                pl.DataFrame(
                    {"case_id": [r.case_id for r in everything], "batch_id": batch_id},
                    schema={"case_id": pl.String, "batch_id": pl.String},
                ),
            )
    return report


def _batch_row(report: RoleReport, reflector: str, started: datetime) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "batch_id": [report.batch_id],
            "role_id": [report.role_id],
            "reflector": [reflector],
            "offered": [report.offered],
            "reflected": [report.reflected],
            "failed": [report.failed],
            "deferred": [report.deferred],
            "lessons": [report.lessons],
            "held": [report.held],
            "skipped": [report.skipped],
            "model_calls": [report.model_calls],
            "tokens": [report.tokens],
            "started_at": pl.Series([started], dtype=UTC_US),
            "finished_at": pl.Series([datetime.now(UTC)], dtype=UTC_US),
            "mlflow_run_id": pl.Series([report.mlflow_run_id], dtype=pl.String),
        }
    )


def reflect_all(
    engine: sa.Engine,
    registry: RoleRegistry,
    reflector: Reflector,
    *,
    roles: Sequence[str] | None = None,
    **options: Any,
) -> list[RoleReport]:
    """Every role's batch in turn (the direct path; flows run roles as separate tasks)."""
    return [
        reflect_role(engine, registry, role_id, reflector, **options)
        for role_id in (roles or registry.ids)
    ]
