"""`bench api`: concurrent recall clients and writers against `reflexmem api` on SQLite.

A small load (the figures of the full one are in docs/api.md): no answer 500, no
dropped connection, and every acknowledged write is stored.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from apps.cli import app


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
