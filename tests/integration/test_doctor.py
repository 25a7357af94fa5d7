import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from adapters.db import make_engine
from apps.cli import app
from apps.deploy.doctor import run_doctor
from reflexmem.operations import intake
from reflexmem.settings import Settings
from tests.integration.ledger_data import write_small
from tests.support import migrated

KEYS = {"status", "exit_code", "checks", "tables", "schedule"}


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    monkeypatch.delenv("REFLEX_MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("REFLEX_PREFECT_API_URL", raising=False)
    return tmp_path / "home"


def _doctor_json() -> tuple[int, dict[str, object]]:
    out = CliRunner().invoke(app, ["doctor", "--json"])
    return out.exit_code, json.loads(out.stdout)


def test_doctor_reports_a_healthy_store_with_counts_after_admission(
    home: Path, tmp_path: Path
) -> None:
    settings = Settings()
    res = migrated(settings)
    intake.ingest(res, write_small(tmp_path / "in", 200))
    result = intake.admit(res)
    # Daily bars of the decisions' symbols (T0..T9): staleness counts bars of the symbol.
    days = np.arange(np.datetime64("2024-12-01"), np.datetime64("2025-06-30"))
    days = days[np.is_busday(days)].astype(str)
    bars = pl.DataFrame(
        {
            "symbol": np.repeat([f"T{i}" for i in range(10)], days.size),
            "ts": np.tile(days, 10),
            "close": 100.0 + np.tile(np.arange(days.size), 10),
        }
    )
    bars.write_csv(tmp_path / "bars-t.csv")
    intake.ingest(res, [tmp_path / "bars-t.csv"], "bars")
    res.engine.dispose()
    report = run_doctor(settings, now=datetime(2020, 1, 1, tzinfo=UTC))
    assert report.healthy, report.checks
    assert sum(report.tables["quarantined by reason"].values()) == result.quarantined
    assert sum(report.tables["pending cases by reason"].values()) == result.pending
    out = CliRunner().invoke(app, ["doctor"])
    assert "ROLE_MEMORY_MODE=shadow" in out.output
    _code, body = _doctor_json()
    assert set(body) == KEYS
    assert body["tables"]["health"]["executions"] == 200  # type: ignore[index]
    names = {c["name"] for c in body["checks"]}  # type: ignore[attr-defined]
    assert {
        "registry",
        "mode",
        "mlflow",
        "database",
        "migrations",
        "conservation",
        "stale pending",
        "failed reflections",
        "deferred reflections",
        "review queues",
    } <= names
    # Pending cases long past twice their role's maturation period and twice its horizon
    # in bars of their symbol are stale (unhealthy).
    if result.pending:
        late = run_doctor(settings, now=datetime(2100, 1, 1, tzinfo=UTC))
        stale = next(c for c in late.checks if c.name == "stale pending")
        assert not stale.ok
        assert late.exit_code == 1
        rows = CliRunner().invoke(app, ["audit", "--state", "stale", "--json"])
        assert rows.exit_code == 0
        # A case pending for insufficient data can never be measured: it is counted
        # apart as unmeasurable, never as stale.
        n_stale = late.tables["health"]["stale_pending"]
        engine = make_engine(settings.resolved_database_url)
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE role_cases SET pending_reason = 'insufficient_data' "
                    "WHERE state = 'pending'"
                )
            )
        engine.dispose()
        later = run_doctor(settings, now=datetime(2100, 1, 1, tzinfo=UTC))
        assert n_stale > 0
        assert later.tables["health"]["stale_pending"] == 0
        assert later.tables["health"]["unmeasurable"] == result.pending
        assert later.exit_code == 0
    audit = CliRunner().invoke(app, ["audit", "--json", "--state", "quarantined"])
    listed = json.loads(audit.stdout)
    assert listed["count"] == result.quarantined
    assert all(r["state"] == "quarantined" for r in listed["rows"])
    role = CliRunner().invoke(
        app, ["audit", "--json", "--role", "momentum", "--since", "2000-01-01"]
    )
    assert all(r["role_id"] == "momentum" for r in json.loads(role.stdout)["rows"])


def test_doctor_fails_on_an_unmigrated_store(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "ledger.sqlite").touch()
    report = run_doctor(Settings())
    assert not report.healthy
    failing = [c for c in report.checks if not c.ok]
    assert [c.name for c in failing] == ["migrations"]
    assert "reflexmem db upgrade" in failing[0].detail
    code, body = _doctor_json()
    assert (code, body["status"]) == (1, "unhealthy")


def test_doctor_cannot_check_an_unreachable_database(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REFLEX_DATABASE_URL", "postgresql://postgres@127.0.0.1:1/none")
    report = run_doctor(Settings())
    assert not report.healthy
    assert any(c.name == "database" and "unreachable" in c.detail for c in report.checks)
    code, body = _doctor_json()
    assert (code, body["status"]) == (2, "cannot_check")


def test_doctor_fails_on_an_unreachable_mlflow(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    migrated(Settings()).engine.dispose()
    monkeypatch.setenv("REFLEX_MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    code, body = _doctor_json()
    assert (code, body["status"]) == (1, "unhealthy")
    mlflow = next(c for c in body["checks"] if c["name"] == "mlflow")  # type: ignore[attr-defined]
    assert not mlflow["ok"]
    assert "unreachable" in mlflow["detail"]


def test_doctor_reports_a_late_scheduled_run(
    home: Path, monkeypatch: pytest.MonkeyPatch, prefect_harness: None
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL
    from prefect.states import Scheduled

    async def plant() -> None:
        async with get_client() as client:
            flow_id = await client.create_flow_from_name("doctor-probe")
            dep = await client.create_deployment(flow_id=flow_id, name="late-probe")
            past = datetime.now(UTC) - timedelta(minutes=10)
            await client.create_flow_run_from_deployment(dep, state=Scheduled(scheduled_time=past))

    asyncio.run(plant())
    migrated(Settings()).engine.dispose()
    monkeypatch.setenv("REFLEX_PREFECT_API_URL", str(PREFECT_API_URL.value()))
    code, body = _doctor_json()
    assert code == 1
    schedule = body["schedule"]
    assert isinstance(schedule, dict)
    assert not schedule["ok"]
    probe = next(d for d in schedule["deployments"] if d["name"] == "late-probe")
    assert probe["late_runs"] == 1
    assert probe["last_run"] is None
    assert "late: late-probe" in schedule["detail"]
