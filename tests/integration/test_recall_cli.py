"""`reflexmem recall` takes query text that starts with a dash, without `--`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner


@pytest.mark.parametrize(
    ("words", "terms"),
    [
        (["-5%", "drawdown"], ["5", "drawdown"]),
        (["-drawdown", "after", "earnings"], ["drawdown", "after", "earnings"]),
        (["late", "-entry"], ["late", "entry"]),
    ],
)
def test_a_query_starting_with_a_dash_is_query_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, words: list[str], terms: list[str]
) -> None:
    from apps.cli import app
    from reflexmem.settings import runtime_mode

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    monkeypatch.setenv("ROLE_MEMORY_MODE", "active")
    runtime_mode.cache_clear()
    try:
        runner = CliRunner()
        assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
        result = runner.invoke(app, ["recall", *words, "--role", "momentum", "--json"])
    finally:
        runtime_mode.cache_clear()
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output.strip().splitlines()[-1])
    assert payload["terms"] == terms
    assert payload["role"] == "momentum"
