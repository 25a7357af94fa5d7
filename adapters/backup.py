"""Checksum-verified backups of the ledger, and restores verified by the same checksums.

A backup is a folder holding the data and `manifest.json`: the format, the schema
revision, a SHA-256 per data file and, per ledger table, its row count and a SHA-256
over its rows in primary-key order. `manifest.sha256` guards the manifest itself.

* SQLite: the SQLite online backup API (`sqlite3.Connection.backup`) copies the ledger
  page by page into `ledger.sqlite`, consistent even while the ledger is open.
* PostgreSQL with `pg_dump` on the PATH: one custom-format archive (`ledger.dump`),
  restored with `pg_restore --clean --single-transaction`.
* PostgreSQL without `pg_dump`: every ledger table exported with COPY to one CSV file
  inside one REPEATABLE READ transaction (a single snapshot); the restore truncates and
  reloads them in one transaction and resets the ID sequences.

A backup is verified right after it is written (file checksums, and for SQLite an
integrity check and the table digests of the copy); a restore first checks every file
against the manifest, refuses on any mismatch, and after loading recomputes the table
digests of the target and fails unless they equal the manifest's. The ledger must be
quiet (no stack running) while a backup or a restore runs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from reflexmem.ledger.models import Base
from reflexmem.redact import redact

MANIFEST = "manifest.json"
HASH_CHUNK = 1 << 20


class BackupError(RuntimeError):
    """A backup could not be made or verified, or a restore was refused."""


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(HASH_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _tables() -> list[sa.Table]:
    return [*Base.metadata.sorted_tables, _ALEMBIC]


_ALEMBIC = sa.Table(
    "alembic_version",
    sa.MetaData(),
    sa.Column("version_num", sa.String(32), primary_key=True),
)


def _order(table: sa.Table) -> str:
    keys = [c.name for c in table.primary_key.columns] or [c.name for c in table.columns]
    return ", ".join(f'"{k}"' for k in keys)


def table_digests(engine: sa.Engine, conn: sa.Connection | None = None) -> dict[str, Any]:
    """Per ledger table: rows and a SHA-256 over them in primary-key order."""
    if conn is None:
        with engine.connect() as own:
            return table_digests(engine, own)
    out: dict[str, Any] = {}
    present = set(sa.inspect(conn).get_table_names())
    for table in _tables():
        if table.name not in present:
            continue
        digest = hashlib.sha256()
        rows = 0
        sql = f'SELECT * FROM "{table.name}" ORDER BY {_order(table)}'
        if conn.dialect.name == "postgresql":
            raw: Any = conn.connection.driver_connection
            with raw.cursor() as cur, cur.copy(f"COPY ({sql}) TO STDOUT (FORMAT csv)") as copy:
                for block in copy:
                    digest.update(bytes(block))
            rows = int(conn.execute(sa.text(f'SELECT COUNT(*) FROM "{table.name}"')).scalar_one())
        else:
            cur = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                cur.execute(sql)
                while batch := cur.fetchmany(10_000):
                    rows += len(batch)
                    digest.update("".join(f"{r!r}\n" for r in batch).encode())
            finally:
                cur.close()
        out[table.name] = {"rows": rows, "sha256": digest.hexdigest()}
    return out


def _sqlite_path(engine: sa.Engine) -> Path:
    return Path(engine.url.database or "").resolve()


def _pg_env(engine: sa.Engine) -> tuple[str, dict[str, str]]:
    """A libpq URI without the password, and an environment carrying it (not argv)."""
    url = engine.url.set(drivername="postgresql")
    env = dict(os.environ)
    if url.password:
        env["PGPASSWORD"] = str(url.password)
    return url.set(password=None).render_as_string(hide_password=False), env


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    text = json.dumps(manifest, indent=2, sort_keys=True)
    (folder / MANIFEST).write_text(text)
    (folder / "manifest.sha256").write_text(hashlib.sha256(text.encode()).hexdigest() + "\n")


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest, after checking it and every data file against their checksums."""
    path = folder / MANIFEST
    if not path.is_file():
        raise BackupError(f"{folder} holds no {MANIFEST}")
    text = path.read_text()
    expected = (folder / "manifest.sha256").read_text().strip()
    if hashlib.sha256(text.encode()).hexdigest() != expected:
        raise BackupError(f"{path} does not match manifest.sha256")
    manifest: dict[str, Any] = json.loads(text)
    for name, sha in manifest["files"].items():
        got = file_sha256(folder / name)
        if got != sha:
            raise BackupError(f"{name}: checksum {got} != manifest {sha}")
    return manifest


def create_backup(engine: sa.Engine, root: Path, method: str = "auto") -> dict[str, Any]:
    """Back the ledger up into a new folder under `root`, verify it, return the manifest.

    `method`: `auto` (SQLite backup API; pg_dump when installed, else table export),
    `pg_dump` or `tables` (PostgreSQL only).
    """
    stamp = datetime.now(UTC)
    folder = root / f"{stamp:%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    backend = engine.dialect.name
    manifest: dict[str, Any] = {
        "path": str(folder.resolve()),
        "created_at": stamp.isoformat(),
        "target": redact(engine.url.render_as_string(hide_password=True)),
        "backend": backend,
        "revision": migrate.current_revision(engine),
    }
    if backend == "sqlite":
        target = folder / "ledger.sqlite"
        src = sqlite3.connect(_sqlite_path(engine))
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
        copy = make_engine(f"sqlite:///{target}")
        with copy.connect() as conn:
            check = conn.exec_driver_sql("PRAGMA integrity_check").scalar_one()
            conn.exec_driver_sql("PRAGMA journal_mode=DELETE")
        if check != "ok":
            raise BackupError(f"backup copy fails integrity_check: {check}")
        manifest.update(format="sqlite", tables=table_digests(copy))
        copy.dispose()
        files = ["ledger.sqlite"]
    else:
        use_dump = method == "pg_dump" or (method == "auto" and shutil.which("pg_dump"))
        if use_dump:
            files = _pg_dump(engine, folder, manifest)
        else:
            files = _pg_tables(engine, folder, manifest)
    manifest["files"] = {f: file_sha256(folder / f) for f in files}
    _write_manifest(folder, manifest)
    read_manifest(folder)
    return manifest


def _pg_dump(engine: sa.Engine, folder: Path, manifest: dict[str, Any]) -> list[str]:
    uri, env = _pg_env(engine)
    manifest.update(format="pg_dump", tables=table_digests(engine))
    archive = folder / "ledger.dump"
    run = subprocess.run(
        ["pg_dump", "--format=custom", "--no-owner", f"--file={archive}", uri],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        raise BackupError(f"pg_dump failed: {redact(run.stderr.strip())}")
    listed = subprocess.run(
        ["pg_restore", "--list", str(archive)], capture_output=True, text=True, check=False
    )
    if listed.returncode != 0:
        raise BackupError(f"pg_restore cannot read the archive: {listed.stderr.strip()}")
    return ["ledger.dump"]


def _pg_tables(engine: sa.Engine, folder: Path, manifest: dict[str, Any]) -> list[str]:
    files: list[str] = []
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            present = set(sa.inspect(conn).get_table_names())
            raw: Any = conn.connection.driver_connection
            order: list[str] = []
            for table in _tables():
                if table.name not in present:
                    continue
                name = f"{table.name}.csv"
                with (
                    (folder / name).open("wb") as fh,
                    raw.cursor() as cur,
                    cur.copy(f'COPY "{table.name}" TO STDOUT (FORMAT csv, HEADER)') as copy,
                ):
                    for block in copy:
                        fh.write(bytes(block))
                files.append(name)
                order.append(table.name)
            manifest.update(format="tables", order=order, tables=table_digests(engine, conn))
    return files


def restore_backup(folder: Path, engine: sa.Engine) -> dict[str, Any]:
    """Bring the ledger back to the backup, verified by checksum; returns the manifest."""
    manifest = read_manifest(folder)
    if manifest["backend"] != engine.dialect.name:
        raise BackupError(
            f"a {manifest['backend']} backup cannot restore a {engine.dialect.name} ledger"
        )
    engine.dispose()
    if manifest["format"] == "sqlite":
        src = sqlite3.connect(f"file:{folder / 'ledger.sqlite'}?mode=ro", uri=True)
        dst = sqlite3.connect(_sqlite_path(engine))
        try:
            src.backup(dst)
        finally:
            dst.close()
            src.close()
    elif manifest["format"] == "pg_dump":
        uri, env = _pg_env(engine)
        run = subprocess.run(
            [
                "pg_restore",
                "--clean",
                "--if-exists",
                "--no-owner",
                "--single-transaction",
                f"--dbname={uri}",
                str(folder / "ledger.dump"),
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if run.returncode != 0:
            raise BackupError(f"pg_restore failed: {redact(run.stderr.strip())}")
    else:
        _load_tables(folder, manifest, engine)
    got = table_digests(engine)
    wrong = sorted(t for t, d in manifest["tables"].items() if got.get(t) != d)
    if wrong:
        raise BackupError(f"restored tables differ from the backup: {', '.join(wrong)}")
    return manifest


def _load_tables(folder: Path, manifest: dict[str, Any], engine: sa.Engine) -> None:
    order: list[str] = manifest["order"]
    by_name = {t.name: t for t in _tables()}
    with engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL session_replication_role = replica")
        conn.exec_driver_sql(
            f"TRUNCATE {', '.join(f'{chr(34)}{t}{chr(34)}' for t in order)} CASCADE"
        )
        raw: Any = conn.connection.driver_connection
        for name in order:
            with (
                (folder / f"{name}.csv").open("rb") as fh,
                raw.cursor() as cur,
                cur.copy(f'COPY "{name}" FROM STDIN (FORMAT csv, HEADER)') as copy,
            ):
                while block := fh.read(HASH_CHUNK):
                    copy.write(block)
            column = by_name[name].autoincrement_column if name in by_name else None
            if column is not None:
                conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('\"{name}\"', '{column.name}'), "
                    f'COALESCE(MAX("{column.name}"), 1), MAX("{column.name}") IS NOT NULL) '
                    f'FROM "{name}"'
                )
