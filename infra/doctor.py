"""`reflexmem doctor`: is the store usable, and what is waiting or held back."""

from __future__ import annotations

from dataclasses import dataclass, field

from infra import migrate
from infra.db import make_engine
from reflexmem.ledger.audit import ledger_counts
from reflexmem.registry import RegistryError, load_registry
from reflexmem.settings import Settings, runtime_mode


@dataclass(frozen=True)
class Check:
    """One health check."""

    name: str
    ok: bool
    detail: str


@dataclass
class DoctorReport:
    """Checks (all must pass) and informational count tables."""

    checks: list[Check] = field(default_factory=list)
    tables: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        """Every check passed."""
        return all(c.ok for c in self.checks)


def run_doctor(settings: Settings) -> DoctorReport:
    """Run every check; a failing check never stops the others from running."""
    report = DoctorReport()
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
    engine = make_engine(settings.resolved_database_url)
    try:
        current = migrate.current_revision(engine)
    except Exception as exc:  # any driver error means unreachable
        report.checks.append(Check("database", False, f"unreachable: {exc}"))
        return report
    finally:
        engine.dispose()
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
        return report
    with engine.connect() as conn:
        counts = ledger_counts(conn)
    engine.dispose()
    report.checks.append(
        Check(
            "conservation",
            counts.batches_violating_conservation == 0,
            f"{counts.batches_violating_conservation} admission batches where rows in != "
            "admitted + pending + quarantined",
        )
    )
    report.checks.append(
        Check(
            "admission backlog",
            True,
            f"{counts.executions} executions, {counts.unaccounted_executions} not yet admitted",
        )
    )
    report.tables = {
        "role cases by state": counts.cases_by_state,
        "pending cases by reason": counts.pending_by_reason,
        "quarantined by reason": counts.quarantined_by_reason,
    }
    return report
