"""Rich renderings shared by the CLI and the demo."""

from __future__ import annotations

from rich.table import Table

from reflexmem.admission.admit import AdmissionResult


def admission_table(result: AdmissionResult) -> Table:
    """Admitted / pending / quarantined counts by reason, with the conservation line."""
    table = Table(title=f"admission batch {result.batch_id}")
    table.add_column("verdict")
    table.add_column("reason")
    table.add_column("rows", justify="right")
    table.add_row("admitted", "eligible", str(result.admitted))
    for reason, n in result.pending_by_reason.items():
        table.add_row("pending", reason, str(n))
    for reason, n in result.by_reason.items():
        table.add_row("quarantined", reason, str(n))
    table.add_section()
    table.add_row("rows in", "= admitted + pending + quarantined", str(result.rows_in))
    for reason, n in result.revoked_by_reason.items():
        table.add_row("revoked", f"earlier case, {reason}", str(n))
    return table
