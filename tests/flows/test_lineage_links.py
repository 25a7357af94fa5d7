"""Prefect <-> MLflow both ways: runs made in a flow name the flow run; its artifact links them."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from adapters import migrate
from adapters.db import make_engine
from adapters.tracking.context import VIEW, existing_client
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.prices.panel import load_dfull
from reflexmem.synth import generate, write_stream
from tests.support import tmp_settings


@pytest.mark.usefixtures("prefect_harness")
def test_flow_runs_and_mlflow_runs_point_at_each_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefect.client.orchestration import get_client

    from flows.cycle import admission, maturation_check

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REFLEX_MLFLOW_UI_URL", "http://mlflow.example:5000")
    settings = tmp_settings(tmp_path)
    engine = make_engine(settings.resolved_database_url)
    migrate.upgrade(engine)
    engine.dispose()
    drop = tmp_path / "drop"
    write_dfull_bars(drop)
    write_stream(generate(load_dfull(), 300, seed=3), drop)
    url, uri = settings.resolved_database_url, settings.resolved_tracking_uri
    admission(url, uri, drop_dir=str(drop))
    state = maturation_check(url, uri, return_state=True)
    report = state.result()
    flow_run_id = str(state.state_details.flow_run_id)

    # MLflow -> Prefect: every run the flow opened names the flow run and the flow.
    client = existing_client(uri)
    assert client is not None
    cycle = client.get_run(report["cycle"]["mlflow_run_id"])
    evaluated = client.get_run(report["evaluation"]["mlflow_run_id"])
    promoted = client.get_run(report["promotion"]["mlflow_run_id"])
    for run in (cycle, evaluated, promoted):
        tags = run.data.tags
        assert tags["reflexmem.prefect.flow_run_id"] == flow_run_id
        assert tags["reflexmem.prefect.flow_name"] == "maturation_check"
        assert tags["mlflow.source.type"] == "JOB"
        assert tags["mlflow.source.name"] == "prefect flow maturation_check"
        assert tags["mlflow.user"]
    # ... nested under the flow's cycle run, which is closed with the counts.
    assert evaluated.data.tags["mlflow.parentRunId"] == cycle.info.run_id
    assert promoted.data.tags["mlflow.parentRunId"] == cycle.info.run_id
    assert cycle.info.status == "FINISHED"
    assert cycle.data.metrics["evaluated"] == report["evaluation"]["runs"] > 0
    assert promoted.data.tags["reflexmem.source_mlflow_runs"] == evaluated.info.run_id
    assert promoted.data.params["profile_version"] == "1"

    # Prefect -> MLflow: the flow's markdown artifact links every one of those run pages.
    async def artifact() -> str:
        async with get_client() as prefect:
            found = await prefect.read_artifacts()
            mine = [
                a for a in found if a.flow_run_id is not None and str(a.flow_run_id) == flow_run_id
            ]
            assert mine, "the flow published no artifact"
            return str(mine[0].data)

    text = anyio.run(artifact)
    for run in (cycle, evaluated, promoted):
        assert f"(http://mlflow.example:5000/#/runs/{run.info.run_id}{VIEW})" in text
