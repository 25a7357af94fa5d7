"""`reflexmem doctor`: is the store usable, what is stuck, waiting or held back.

Every check runs even when another fails. The verdict maps to the exit code:
0 healthy (every check passed), 1 unhealthy (a check failed), 2 cannot check (the
ledger is unreachable, so the ledger checks could not run at all). The JSON keys are
documented in docs/operations.md ("Doctor and audit").
"""

from __future__ import annotations

import sqlite3
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from adapters.resources import make_prices
from reflexmem.ledger.audit import ledger_counts
from reflexmem.ledger.health import StaleJudge, health_counts
from reflexmem.maturation.stale import stale_judge
from reflexmem.redact import redact
from reflexmem.registry import RegistryError, RoleRegistry, load_registry
from reflexmem.settings import Settings, runtime_mode

EXIT_HEALTHY, EXIT_UNHEALTHY, EXIT_CANNOT_CHECK = 0, 1, 2
PROBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Check:
    """One health check."""

    name: str
    ok: bool
    detail: str


@dataclass
class DoctorReport:
    """Checks (all must pass), informational count tables, and the schedule's health."""

    checks: list[Check] = field(default_factory=list)
    tables: dict[str, dict[str, int]] = field(default_factory=dict)
    schedule: dict[str, Any] | None = None
    cannot_check: bool = False

    @property
    def healthy(self) -> bool:
        """Every check passed."""
        return not self.cannot_check and all(c.ok for c in self.checks)

    @property
    def exit_code(self) -> int:
        """0 healthy, 1 unhealthy, 2 cannot check."""
        if self.cannot_check:
            return EXIT_CANNOT_CHECK
        return EXIT_HEALTHY if self.healthy else EXIT_UNHEALTHY

    def to_dict(self) -> dict[str, Any]:
        """The object `doctor --json` prints."""
        status = {0: "healthy", 1: "unhealthy", 2: "cannot_check"}[self.exit_code]
        return {
            "status": status,
            "exit_code": self.exit_code,
            "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in self.checks],
            "tables": self.tables,
            "schedule": self.schedule,
        }


def maturation_days(registry: RoleRegistry) -> dict[str, int]:
    """Each registered role's maturation period in days."""
    return {r: registry.get(r).policy.maturation.days for r in registry.ids}


def horizon_bars(registry: RoleRegistry) -> dict[str, int]:
    """Each registered role's outcome horizon in bars of the decision's symbol."""
    return {r: registry.get(r).policy.outcome_probe.horizon_bars for r in registry.ids}


def stale_judge_for(
    settings: Settings, conn: sa.Connection, registry: RoleRegistry | None, now: datetime
) -> StaleJudge:
    """Judge overdue cases by the configured prices (the ledger's bars by default)."""
    return stale_judge(make_prices(settings, conn), horizon_bars(registry) if registry else {}, now)


def check_mlflow(uri: str) -> Check:
    """Is the tracking store reachable? (An embedded store not yet created is fine.)."""
    if uri.startswith("sqlite:///"):
        path = Path(uri.removeprefix("sqlite:///"))
        if not path.exists():
            return Check("mlflow", True, "embedded store not created yet (first tracked run)")
        try:
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
                conn.execute("SELECT COUNT(*) FROM experiments").fetchone()
        except sqlite3.Error as exc:
            return Check("mlflow", False, f"{path}: not an MLflow store ({exc})")
        return Check("mlflow", True, f"embedded store {path}")
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=PROBE_TIMEOUT_S) as r:
                ok = r.status == 200
        except OSError as exc:
            return Check("mlflow", False, f"{redact(uri)} unreachable: {exc}")
        return Check("mlflow", ok, f"server {redact(uri)} answers /health")
    try:
        engine = make_engine(uri, connect_args={"connect_timeout": 5})
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        engine.dispose()
    except Exception as exc:  # any driver error means unreachable
        return Check("mlflow", False, f"{redact(uri)} unreachable: {redact(str(exc))}")
    return Check("mlflow", True, f"store {redact(uri)} reachable")


def run_doctor(settings: Settings, now: datetime | None = None) -> DoctorReport:
    """Run every check; a failing check never stops the others from running.

    `now` judges staleness and the schedule at that instant; without it the schedule is
    judged on the wall clock and staleness on the ledger's own clock (its newest bar), so
    a store of past trades is not stale because time has moved on since.
    """
    asked, now = now, now or datetime.now(UTC)
    report = DoctorReport()
    registry: RoleRegistry | None = None
    try:
        registry = load_registry()
        report.checks.append(
            Check("registry", True, f"{len(registry.ids)} roles: {', '.join(registry.ids)}")
        )
    except RegistryError as exc:
        report.checks.append(Check("registry", False, str(exc)))
    report.checks.append(
        Check("mode", True, f"ROLE_MEMORY_MODE={runtime_mode().value} (frozen for this process)")
    )
    report.checks.append(check_mlflow(settings.resolved_tracking_uri))
    if settings.prefect_api_url:
        from apps.deploy.doctor_schedule import schedule_health

        report.schedule = schedule_health(settings.prefect_api_url, now)
        report.checks.append(
            Check("schedule", bool(report.schedule["ok"]), str(report.schedule["detail"]))
        )
    _ledger_checks(settings, report, registry, asked)
    return report


def _ledger_checks(
    settings: Settings, report: DoctorReport, registry: RoleRegistry | None, now: datetime | None
) -> None:
    engine = make_engine(settings.resolved_database_url)
    try:
        current = migrate.current_revision(engine)
    except Exception as exc:  # any driver error means unreachable
        report.checks.append(Check("database", False, f"unreachable: {redact(str(exc))}"))
        report.cannot_check = True
        engine.dispose()
        return
    report.checks.append(Check("database", True, f"{settings.backend} reachable"))
    head = migrate.head_revision()
    report.checks.append(
        Check(
            "migrations",
            current == head,
            f"at {current}, code expects {head}"
            + ("" if current == head else " — run `reflexmem db upgrade`"),
        )
    )
    if current != head:
        engine.dispose()
        return
    with engine.connect() as conn:
        counts = ledger_counts(conn)
        prices = make_prices(settings, conn)
        clock = now or prices.newest() or datetime.now(UTC)
        judge = stale_judge(prices, horizon_bars(registry) if registry else {}, clock)
        health = health_counts(conn, maturation_days(registry) if registry else {}, clock, judge)
    engine.dispose()
    unaccounted = counts.unaccounted_executions
    report.checks += [
        Check(
            "conservation",
            counts.batches_violating_conservation == 0,
            f"{counts.batches_violating_conservation} admission batches where rows in != "
            f"admitted + pending + quarantined; {counts.executions} executions, "
            f"{unaccounted} not yet admitted (run `reflexmem admit`)",
        ),
        Check(
            "stale pending",
            health.stale_pending == 0,
            f"{health.stale_pending} pending cases older than twice their role's maturation "
            "period and twice its outcome horizon in bars of their symbol (at the newest bar)",
        ),
        Check(
            "unmeasurable",
            True,
            f"{health.unmeasurable} pending cases whose settled position saw fewer bars than "
            "the profile needs: no later bar can measure them (not stale, never learned from)",
        ),
        Check(
            "failed reflections",
            health.failed_reflections == 0,
            f"{health.failed_reflections} cases in reflection_failed",
        ),
        Check(
            "deferred reflections",
            True,
            f"{health.deferred_reflections} cases deferred by the budget (retried next cycle)",
        ),
        Check(
            "review queues",
            True,
            f"{health.held_lessons} lessons held for review, {health.open_reviews} open "
            "review-queue items",
        ),
    ]
    report.tables = {
        "role cases by state": counts.cases_by_state,
        "pending cases by reason": counts.pending_by_reason,
        "quarantined by reason": counts.quarantined_by_reason,
        "health": {
            "executions": counts.executions,
            "unaccounted_executions": unaccounted,
            "stale_pending": health.stale_pending,
            "unmeasurable": health.unmeasurable,
            "failed_reflections": health.failed_reflections,
            "deferred_reflections": health.deferred_reflections,
            "held_lessons": health.held_lessons,
            "open_reviews": health.open_reviews,
            "legacy_quarantined": health.legacy_quarantined,
        },
    }
