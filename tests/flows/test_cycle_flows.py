"""The cycle as Prefect flows: the same stages, the same ledger, idempotent reruns."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from adapters.resources import build_resources
from reflexmem.ledger.checksums import excluded_columns, table_checksums
from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.prices.panel import load_dfull
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream
from tests.support import scalar


def _drop(folder: Path, n: int) -> Path:
    write_dfull_bars(folder)
    write_stream(generate(load_dfull(), n, seed=21), folder)
    return folder


def _ledger(tmp: Path, name: str) -> Settings:
    settings = Settings(
        home=tmp / name,
        database_url=f"sqlite:///{tmp / f'{name}.sqlite'}",
        mlflow_tracking_uri=f"sqlite:///{tmp / f'mlflow-{name}.sqlite'}",
        artifact_root=tmp / f"artifacts-{name}",
    )
    engine = make_engine(settings.resolved_database_url)
    migrate.upgrade(engine)
    engine.dispose()
    return settings


def _checksums(url: str) -> dict[str, tuple[int, str]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return table_checksums(conn)
    finally:
        engine.dispose()


@pytest.mark.usefixtures("prefect_harness")
def test_the_flow_and_the_direct_path_leave_identical_ledgers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from flows.cycle import daily_cycle

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    drop = _drop(tmp_path / "drop", 900)
    direct = _ledger(tmp_path, "direct")
    flow = _ledger(tmp_path, "flow")

    res = build_resources(direct)
    report = run_cycle(DirectRunner(res), CycleParams(drop=drop)).as_dict()
    res.engine.dispose()
    via_flow = daily_cycle(
        flow.resolved_database_url, flow.resolved_tracking_uri, drop_dir=str(drop)
    )

    # The same stages ran on the same input: the reports agree on every count.
    for counts in ("rows_in", "admitted", "pending", "quarantined"):
        assert report["admission"][counts] == via_flow["admission"][counts]
    assert [(r["role_id"], r["reflected"], r["lessons"]) for r in report["reflection"]] == [
        (r["role_id"], r["reflected"], r["lessons"]) for r in via_flow["reflection"]
    ]
    a, b = _checksums(direct.resolved_database_url), _checksums(flow.resolved_database_url)
    assert a == b, {t: (a[t], b[t]) for t in a if a[t] != b[t]}
    # ... and the cycle did real work in every tier (not two empty ledgers).
    engine = make_engine(direct.resolved_database_url)
    assert scalar(engine, "SELECT COUNT(*) FROM market_bars") == 2266
    assert scalar(engine, "SELECT COUNT(*) FROM evaluation_runs WHERE is_primary") > 100
    assert scalar(engine, "SELECT COUNT(*) FROM episodes WHERE case_id IS NOT NULL") > 100
    assert scalar(engine, "SELECT COUNT(*) FROM memory_entries WHERE tier = 'semantic'") > 0
    engine.dispose()
    # The comparison leaves out only generated IDs and wall-clock stamps.
    dropped = {c for cols in excluded_columns().values() for c in cols}
    assert dropped <= {
        "batch_id",
        "run_id",
        "mlflow_run_id",
        "previous_run_id",
        "recall_id",
        "holder",
        "component_id",
        "observation_id",
        "quarantine_id",
        "source_batch",
        "admitted_batch_id",
        "revoked_by_batch_id",
        "held_by_batch_id",
        "flow_run_id",  # flow_failures: the Prefect flow run's generated UUID
    } | {c for c in dropped if c.endswith("_at") or c == "at"}


@pytest.mark.usefixtures("prefect_harness")
def test_the_scheduled_parts_are_idempotent_and_publish_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.client.orchestration import get_client

    from flows.cycle import admission, distillation, maturation_check, reflection_batch

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    settings = _ledger(tmp_path, "ledger")
    url, uri = settings.resolved_database_url, settings.resolved_tracking_uri
    drop = _drop(tmp_path / "drop", 500)

    intake = admission(url, uri, drop_dir=str(drop))
    assert intake["admission"]["rows_in"] == 500
    matured = maturation_check(url, uri)
    assert matured["plan"]["as_of"].startswith("2025-03-27")
    assert matured["evaluation"]["runs"] > 0
    assert matured["promotion"]["promoted"] == matured["evaluation"]["runs"]
    rows = reflection_batch(url, uri)
    assert {r["role"] for r in rows} == {"cycle_analysis", "momentum", "risk", "valuation"}
    assert sum(int(r["reflected"]) for r in rows) == matured["evaluation"]["runs"]
    memory = distillation(url, uri)
    assert sum(e["recorded"] for e in memory["episodes"]) == matured["evaluation"]["runs"]

    # A re-run after a (simulated) crash repeats nothing that was committed.
    assert admission(url, uri, drop_dir=str(drop))["admission"]["rows_in"] == 0
    assert maturation_check(url, uri)["evaluation"]["runs"] == 0
    assert sum(int(r["offered"]) for r in reflection_batch(url, uri)) == 0
    assert sum(e["recorded"] for e in distillation(url, uri)["episodes"]) == 0
    engine = make_engine(url)
    with engine.connect() as conn:
        batches = conn.execute(
            sa.text("SELECT kind, COUNT(*) FROM evaluation_batches GROUP BY kind ORDER BY kind")
        ).all()
    assert batches == [("evaluate", 1), ("promote", 1)]
    assert scalar(engine, "SELECT COUNT(*) FROM admission_batches") == 1
    engine.dispose()

    async def artifact_keys() -> set[str]:
        async with get_client() as client:
            return {a.key for a in await client.read_artifacts() if a.key}

    keys = anyio.run(artifact_keys)
    assert {"admission", "maturation-check", "reflection-batch", "memory-distillation"} <= keys
