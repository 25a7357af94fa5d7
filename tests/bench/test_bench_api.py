"""`bench api`: concurrent recall clients and writers against `reflexmem api`.

A small load (the figures of the full one are in docs/api.md): no answer 500, no
dropped connection, and every acknowledged write is stored; on SQLite with one server
process, on PostgreSQL with two (`reflexmem api --workers 2`), which SQLite refuses.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from apps.cli import app
from tests.support import migrated, tmp_settings


@pytest.mark.serial
def test_concurrent_clients_and_writers_get_answers_and_lose_no_write() -> None:
    out = CliRunner().invoke(
        app,
        ["bench", "api", "--clients", "4", "--writers", "3", "--seconds", "4", "--cases", "1000",
         "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["dropped_connections"] == 0
    assert set(data["status_counts"]) <= {"200", "503"}
    assert data["answers_503_without_retry_after"] == 0
    assert data["acknowledged_writes"] > 0
    assert data["acknowledged_writes"] == data["stored_writes"]
    assert data["recall_p99_ms"] > data["floor"]["recall"]["p50_ms"] > 0
    assert data["peak_rss_mb"] > 0
    bad = CliRunner().invoke(app, ["bench", "api", "--clients", "0", "--writers", "0"])
    assert bad.exit_code == 2


@pytest.mark.serial
def test_the_server_runs_as_two_processes_on_postgresql() -> None:
    out = CliRunner().invoke(
        app,
        ["bench", "api", "--backend", "postgres", "--clients", "4", "--writers", "2",
         "--seconds", "4", "--cases", "1000", "--server-workers", "2", "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert data["server_workers"] == 2
    assert data["dropped_connections"] == 0
    assert set(data["status_counts"]) == {"200"}
    assert data["acknowledged_writes"] == data["stored_writes"] > 0


def test_more_than_one_server_process_is_refused_on_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tmp_settings(tmp_path)
    migrated(settings).engine.dispose()
    monkeypatch.setenv("REFLEX_HOME", str(settings.home))
    monkeypatch.setenv("REFLEX_DATABASE_URL", settings.resolved_database_url)
    monkeypatch.setenv("REFLEX_API_TOKEN", "t0ken")
    out = CliRunner().invoke(app, ["api", "--workers", "2"])
    assert out.exit_code == 2
    assert "needs PostgreSQL" in out.output
    assert CliRunner().invoke(app, ["api", "--workers", "0"]).exit_code == 2
