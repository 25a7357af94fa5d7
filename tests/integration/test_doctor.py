from pathlib import Path

import pytest
from typer.testing import CliRunner

from infra.cli import app
from infra.doctor import run_doctor
from reflexmem.operations import intake
from reflexmem.settings import Settings
from tests.integration.ledger_data import write_small
from tests.support import migrated


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    return tmp_path / "home"


def test_doctor_reports_a_healthy_store_with_counts_after_admission(
    home: Path, tmp_path: Path
) -> None:
    settings = Settings()
    res = migrated(settings)
    intake.ingest(res, write_small(tmp_path / "in", 200))
    result = intake.admit(res)
    report = run_doctor(settings)
    assert report.healthy, report.checks
    assert sum(report.tables["quarantined by reason"].values()) == result.quarantined
    assert sum(report.tables["pending cases by reason"].values()) == result.pending
    out = CliRunner().invoke(app, ["doctor"])
    assert out.exit_code == 0
    assert "ROLE_MEMORY_MODE=shadow" in out.output


def test_doctor_fails_on_an_unmigrated_store(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "ledger.sqlite").touch()
    report = run_doctor(Settings())
    assert not report.healthy
    failing = [c for c in report.checks if not c.ok]
    assert [c.name for c in failing] == ["migrations"]
    assert "reflexmem db upgrade" in failing[0].detail
    assert CliRunner().invoke(app, ["doctor"]).exit_code == 1


def test_doctor_fails_on_an_unreachable_database(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFLEX_DATABASE_URL", "postgresql://postgres@127.0.0.1:1/none")
    report = run_doctor(Settings())
    assert not report.healthy
    assert any(c.name == "database" and "unreachable" in c.detail for c in report.checks)
