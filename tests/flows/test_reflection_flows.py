from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import sqlalchemy as sa

import reflexmem.ledger.reflection_models  # noqa: F401
from infra import migrate
from infra.db import make_engine
from tests.integration.test_evaluation_db import AS_OF, scalar, seed_ledger


@pytest.mark.usefixtures("prefect_harness")
def test_maturation_and_reflection_flows_are_batched_idempotent_and_publish_counts(
    tmp_path: Path, mlflow_uri: str
) -> None:
    from prefect.client.orchestration import get_client

    from flows.maturation import maturation_check
    from flows.reflection import reflection_batch

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    seed_ledger(engine, tmp_path, n=300)

    counts = maturation_check(url, mlflow_uri, as_of=AS_OF)
    assert counts["evaluated"] > 0
    assert counts["promoted"] == counts["evaluated"]
    runs = scalar(engine, "SELECT COUNT(*) FROM evaluation_runs")
    assert runs == counts["evaluated"]
    assert scalar(engine, "SELECT COUNT(DISTINCT mlflow_run_id) FROM evaluation_runs") == 1

    rows = reflection_batch(url)
    assert {r["role"] for r in rows} == {"cycle_analysis", "momentum", "risk", "valuation"}
    reflected = sum(int(r["reflected"]) for r in rows)
    assert reflected == runs

    # Re-running after a (simulated) crash repeats nothing that was committed.
    again = maturation_check(url, mlflow_uri, as_of=AS_OF)
    assert again["evaluated"] == 0
    assert again["promoted"] == 0
    assert sum(int(r["offered"]) for r in reflection_batch(url)) == 0
    assert scalar(engine, "SELECT COUNT(*) FROM evaluation_runs") == runs
    with engine.connect() as conn:
        batches = conn.execute(
            sa.text("SELECT kind, COUNT(*) FROM evaluation_batches GROUP BY kind ORDER BY kind")
        ).all()
    assert batches == [("evaluate", 1), ("promote", 1)]

    async def artifact_keys() -> set[str]:
        async with get_client() as client:
            return {a.key for a in await client.read_artifacts() if a.key}

    assert {"maturation-check", "reflection-batch"} <= anyio.run(artifact_keys)
    engine.dispose()


def test_deployments_are_defined_in_one_place_with_cron_schedules() -> None:
    from infra.deployments import specs

    found = {s.name: s.cron for s in specs()}
    assert set(found) >= {"maturation-check-hourly", "reflection-batch-hourly"}
    assert all(len(cron.split()) == 5 for cron in found.values())
