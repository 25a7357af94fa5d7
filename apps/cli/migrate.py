"""`reflexmem migrate legacy|restore`: the legacy migration and the restore of its backup.

`migrate legacy` checks the legacy table first (a missing required column exits 2
before anything is written), then backs the target ledger up and verifies the backup,
and only then writes. `migrate restore` brings the ledger back to a backup, refusing a
backup whose files do not match their checksums.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from apps.cli.common import app, console, emit, err, open_resources
from reflexmem.settings import Settings

migrate_app = typer.Typer(no_args_is_help=True, help="Legacy migration and restores.")
app.add_typer(migrate_app, name="migrate")


def _backup_summary(manifest: dict[str, Any]) -> dict[str, Any]:
    return {
        "path": manifest["path"],
        "format": manifest["format"],
        "revision": manifest["revision"],
        "files": manifest["files"],
        "tables": sum(1 for _ in manifest["tables"]),
        "rows": sum(int(t["rows"]) for t in manifest["tables"].values()),
    }


@migrate_app.command("legacy")
def migrate_legacy(
    from_url: Annotated[str, typer.Option("--from", help="URL of the legacy database.")],
    backup_dir: Annotated[
        Path | None, typer.Option(help="Folder for the backup (default: home/backups).")
    ] = None,
    backup_method: Annotated[
        str, typer.Option(help="auto, pg_dump or tables (PostgreSQL targets).")
    ] = "auto",
    chunk_rows: Annotated[int, typer.Option(min=1, help="Legacy rows per chunk.")] = 50_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Move legacy `role_memory` rows into the ledger after a verified backup (idempotent)."""
    from adapters.backup import BackupError, create_backup
    from adapters.legacy_source import open_legacy
    from reflexmem.ledger.legacy import LegacySchemaError
    from reflexmem.operations.legacy import migrate_legacy as run
    from reflexmem.redact import redact

    settings = Settings()
    res = open_resources(settings)
    try:
        source = open_legacy(from_url)
    except LegacySchemaError as exc:
        err.print(f"[red]cannot migrate:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(2) from exc
    except Exception as exc:  # a driver error: the legacy database is unreachable
        err.print(f"[red]cannot open the legacy database:[/red] {redact(str(exc))}")
        raise typer.Exit(2) from exc
    try:
        manifest = create_backup(res.engine, backup_dir or settings.home / "backups", backup_method)
        report = run(
            res,
            chunks=source.chunks(chunk_rows),
            source=source.label,
            backup=_backup_summary(manifest),
        )
    except (BackupError, LegacySchemaError) as exc:
        err.print(f"[red]migration refused, nothing written:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(2) from exc
    finally:
        source.engine.dispose()
        res.engine.dispose()
    result = report.to_dict()
    if as_json:
        emit(result, True)
        return
    console.print(
        f"legacy rows in {report.rows_in}: moved {report.moved}, quarantined "
        f"{report.quarantined}, unchanged {report.unchanged}"
    )
    emit(result, False)


@migrate_app.command("restore")
def migrate_restore(
    backup: Annotated[Path, typer.Argument(help="A backup folder (holds manifest.json).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Restore the ledger from a backup, verified by checksum before and after."""
    from adapters.backup import BackupError, restore_backup
    from adapters.db import make_engine

    settings = Settings()
    engine = make_engine(settings.resolved_database_url)
    try:
        manifest = restore_backup(backup, engine)
    except BackupError as exc:
        err.print(f"[red]restore refused:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(1) from exc
    finally:
        engine.dispose()
    result = {"restored": True, "backup": _backup_summary(manifest), "verified": True}
    emit(result, as_json)
