"""`reflexmem doctor` and `reflexmem audit`: the store's health, and the cases behind it.

Exit codes of `doctor`: 0 healthy, 1 unhealthy, 2 cannot check (the ledger is
unreachable). `audit` lists cases one per line (or one JSON object) with the filters
`--role`, `--state` and `--since`, and the two clocks of docs/lineage.md: `--as-of`
(valid time: the cases decided and matured by then) and `--known-at` (recorded time:
admitted by then); every row shows its `valid_at` and `recorded_at`.
"""

from __future__ import annotations

from typing import Annotated

import typer

from apps.cli.common import AsOf, KnownAt, app, console, counts_table, emit, err, parse_as_of
from reflexmem.settings import Settings


@app.command()
def doctor(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Check the store: registry, mode, ledger, MLflow, migrations, stuck cases, schedule."""
    from apps.deploy.doctor import run_doctor

    report = run_doctor(Settings())
    if as_json:
        emit(report.to_dict(), True)
    else:
        for check in report.checks:
            mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
            console.print(f"{mark}  {check.name}: {check.detail}", soft_wrap=True)
        for title, counts in report.tables.items():
            if counts:
                console.print(counts_table(title, counts))
    if report.exit_code:
        raise typer.Exit(report.exit_code)


@app.command()
def audit(
    role: Annotated[str | None, typer.Option(help="Only this role.")] = None,
    state: Annotated[
        str | None,
        typer.Option(help="A case state, `stale` or `quarantined`."),
    ] = None,
    since: Annotated[
        str | None, typer.Option(help="Only decided (or quarantined) at or after (ISO).")
    ] = None,
    as_of: AsOf = None,
    known_at: KnownAt = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many rows.")] = 1000,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List cases and quarantined rows behind the doctor's counts, newest first."""
    from datetime import UTC, datetime

    from adapters import migrate
    from adapters.db import make_engine
    from apps.deploy.doctor import maturation_days, stale_judge_for
    from reflexmem.ledger.health import AUDIT_STATES, audit_rows
    from reflexmem.recall.clocks import Clocks, case_scope, quarantine_scope, with_times
    from reflexmem.redact import redact
    from reflexmem.registry import load_registry

    if state is not None and state not in AUDIT_STATES:
        err.print(f"--state must be one of {', '.join(AUDIT_STATES)}")
        raise typer.Exit(2)
    clocks = Clocks(parse_as_of(as_of), parse_as_of(known_at, "--known-at"))
    settings = Settings()
    engine = make_engine(settings.resolved_database_url)
    try:
        migrate.require_current(engine)
        registry = load_registry()
        now = datetime.now(UTC)
        with engine.connect() as conn:
            found = audit_rows(
                conn,
                maturation_days(registry),
                now,
                stale_judge_for(settings, conn, registry, now),
                role=role,
                state=state,
                since=parse_as_of(since),
                limit=limit,
                case_where=case_scope(clocks),
                quarantine_where=quarantine_scope(clocks),
            )
            rows = with_times(conn, found)
    except migrate.SchemaNotCurrent as exc:
        err.print(f"[red]{redact(str(exc))}[/red]", soft_wrap=True)
        raise typer.Exit(2) from exc
    except Exception as exc:  # any driver error means unreachable
        err.print(f"[red]cannot audit:[/red] {redact(str(exc))}", soft_wrap=True)
        raise typer.Exit(2) from exc
    finally:
        engine.dispose()
    clean = [
        {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in r.items()} for r in rows
    ]
    if as_json:
        filters = {
            "role": role,
            "state": state,
            "since": since,
            "as_of": as_of,
            "known_at": known_at,
            "limit": limit,
        }
        emit({"filters": filters, "count": len(clean), "rows": clean}, True)
        return
    for r in clean:
        ident = r.get("case_id") or r.get("subject_id")
        why = r.get("pending_reason") or r.get("reason_code") or ""
        stale = " STALE" if r.get("stale") else ""
        valid = str(r.get("valid_at") or "-")[:19]
        console.print(
            f"{r['state']:<18} {r.get('role_id') or '-':<16} {ident} {why}{stale} valid {valid}",
            highlight=False,
        )
    console.print(f"{len(clean)} rows")
