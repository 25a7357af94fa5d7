"""`reflexmem migrate legacy` and `migrate restore` on both backends, through the CLI."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from adapters.backup import table_digests
from apps.cli import app
from reflexmem.operations import intake
from tests.integration.ledger_data import write_small
from tests.support import make_resources, scalar

LEGACY_DDL = (
    "CREATE TABLE role_memory (id {id}, role TEXT, content TEXT, score REAL, "
    "created_at TEXT, provenance TEXT, decision_id TEXT)"
)


def _rows(decision: str) -> list[tuple[object, ...]]:
    prov = '{"source": "legacy-app", "note": "kept byte for byte"}'
    return [
        (1, "momentum", "Fade the open on thin volume.", 0.7, "2024-01-02", prov, decision),
        (2, "risk", "Halve size before CPI.", -0.2, "2024-01-03", prov, "missing-decision"),
        (3, "valuation", "Cheap is not a catalyst.", None, None, None, None),
        (4, "astrology", "Mercury is retrograde.", 0.9, "2024-01-04", prov, decision),
    ]


@pytest.fixture
def target(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[sa.Engine, str]:
    """The migrated test ledger with some decisions, as the CLI's ledger; a decision ID."""
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REFLEX_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    res = make_resources(engine)
    intake.ingest(res, write_small(tmp_path / "in", 30))
    with engine.connect() as conn:
        decision = conn.execute(sa.text("SELECT MIN(decision_id) FROM trading_decisions"))
        first = str(decision.scalar_one())
    return engine, first


def _legacy(engine: sa.Engine, tmp_path: Path, rows: list[tuple[object, ...]]) -> str:
    """A legacy database of the target's backend (PostgreSQL: a table in the scratch DB)."""
    if engine.dialect.name == "sqlite":
        path = tmp_path / "legacy.sqlite"
        with sqlite3.connect(path) as conn:
            conn.execute(LEGACY_DDL.format(id="INTEGER PRIMARY KEY"))
            conn.executemany("INSERT INTO role_memory VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
        return f"sqlite:///{path}"
    with engine.begin() as conn:
        conn.execute(sa.text("DROP TABLE IF EXISTS role_memory"))
        conn.execute(
            sa.text(
                LEGACY_DDL.format(id="INTEGER PRIMARY KEY").replace(
                    "provenance TEXT", "provenance JSONB"
                )
            )
        )
        for r in rows:
            conn.execute(
                sa.text(
                    "INSERT INTO role_memory VALUES (:a, :b, :c, :d, :e, CAST(:f AS JSONB), :g)"
                ),
                dict(zip("abcdefg", r, strict=True)),
            )
    return engine.url.render_as_string(hide_password=False)


def _run(*args: str) -> dict[str, object]:
    out = CliRunner().invoke(app, ["migrate", *args, "--json"])
    assert out.exit_code == 0, out.output
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.parametrize("method", ["auto", "tables"])
def test_round_trip_is_idempotent_and_restores_by_checksum(
    target: tuple[sa.Engine, str], tmp_path: Path, method: str
) -> None:
    engine, decision = target
    if method == "tables" and engine.dialect.name == "sqlite":
        pytest.skip("the table export is the PostgreSQL fallback when pg_dump is absent")
    url = _legacy(engine, tmp_path, _rows(decision))
    before = table_digests(engine)
    first = _run("legacy", "--from", url, "--backup-method", method)
    assert (first["rows_in"], first["moved"], first["quarantined"], first["unchanged"]) == (
        4,
        3,
        1,
        0,
    )
    backup = first["backup"]
    assert isinstance(backup, dict)
    expected_format = {"sqlite": "sqlite", "postgresql": "pg_dump"}[engine.dialect.name]
    assert backup["format"] == (expected_format if method == "auto" else "tables")
    with engine.connect() as conn:
        cases = {
            r.legacy_id: r
            for r in conn.execute(sa.text("SELECT * FROM legacy_cases ORDER BY legacy_id"))
        }
        held = conn.execute(sa.text("SELECT * FROM quarantine WHERE subject_kind='legacy_row'"))
        quarantined = held.one()
    assert sorted(cases) == ["1", "2", "3"]
    assert cases["1"].content == "Fade the open on thin volume."
    assert json.loads(cases["1"].provenance) == {
        "source": "legacy-app",
        "note": "kept byte for byte",
    }
    assert cases["1"].decision_id == decision
    assert cases["2"].decision_id is None
    assert cases["2"].legacy_decision_id == "missing-decision"
    assert cases["1"].legacy_score == pytest.approx(0.7)
    assert quarantined.reason_code == "legacy_unknown_role"
    assert quarantined.subject_id == "4"
    assert quarantined.role_id == "astrology"
    assert json.loads(quarantined.detail)["content"] == "Mercury is retrograde."
    # Legacy rows never become role cases (statistics read only role_cases and runs).
    assert scalar(engine, "SELECT COUNT(*) FROM role_cases") == 0

    second = _run("legacy", "--from", url, "--backup-method", method)
    assert (second["moved"], second["quarantined"], second["unchanged"]) == (0, 0, 4)
    assert second["checksums"]["rows_in"] == first["checksums"]["rows_in"]  # type: ignore[index]
    assert scalar(engine, "SELECT COUNT(*) FROM legacy_cases") == 3
    assert scalar(engine, "SELECT COUNT(*) FROM legacy_migrations") == 2

    engine.dispose()
    restored = _run("restore", str(backup["path"]))
    assert restored["verified"] is True
    assert table_digests(engine) == before
    assert scalar(engine, "SELECT COUNT(*) FROM legacy_cases") == 0


def test_a_tampered_backup_is_refused(target: tuple[sa.Engine, str], tmp_path: Path) -> None:
    engine, decision = target
    url = _legacy(engine, tmp_path, _rows(decision))
    backup = Path(str(_run("legacy", "--from", url)["backup"]["path"]))  # type: ignore[index]
    data = next(p for p in backup.iterdir() if p.name.startswith("ledger"))
    with data.open("r+b") as fh:
        fh.seek(200)
        byte = fh.read(1)
        fh.seek(200)
        fh.write(bytes([byte[0] ^ 0xFF]))
    engine.dispose()
    out = CliRunner().invoke(app, ["migrate", "restore", str(backup)])
    assert out.exit_code == 1
    assert "checksum" in out.output
    assert scalar(engine, "SELECT COUNT(*) FROM legacy_cases") == 3


def test_missing_optional_columns_are_null(tmp_path: Path, target: tuple[sa.Engine, str]) -> None:
    engine, _ = target
    if engine.dialect.name != "sqlite":
        pytest.skip("one backend is enough for the column check")
    path = tmp_path / "bare.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE role_memory (id TEXT, role TEXT, content TEXT)")
        conn.executemany(
            "INSERT INTO role_memory VALUES (?, ?, ?)",
            [("a", "risk", "Stops belong below structure."), ("b", "nobody", "?")],
        )
    result = _run("legacy", "--from", f"sqlite:///{path}")
    assert (result["moved"], result["quarantined"]) == (1, 1)
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT * FROM legacy_cases")).one()
    assert row.content == "Stops belong below structure."
    assert (row.legacy_score, row.provenance, row.decision_id) == (None, None, None)


def test_missing_required_column_is_named_and_nothing_written(
    tmp_path: Path, target: tuple[sa.Engine, str]
) -> None:
    engine, _ = target
    if engine.dialect.name != "sqlite":
        pytest.skip("one backend is enough for the column check")
    path = tmp_path / "broken.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE role_memory (id TEXT, content TEXT, score REAL)")
    out = CliRunner().invoke(app, ["migrate", "legacy", "--from", f"sqlite:///{path}"])
    assert out.exit_code == 2
    assert "'role'" in out.output
    assert not (tmp_path / "home" / "backups").exists()
    assert scalar(engine, "SELECT COUNT(*) FROM legacy_migrations") == 0
