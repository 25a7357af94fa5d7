"""A scheduled flow that fails for good leaves a row in `flow_failures` and a UI artifact."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters import migrate
from adapters.db import make_engine
from adapters.flow_failures import recent_failures
from reflexmem.settings import Settings


@pytest.mark.usefixtures("prefect_harness")
def test_failed_flow_is_recorded_in_ledger_and_prefect(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.cycle import reflection_batch

    settings = Settings(
        home=tmp_path,
        database_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        mlflow_tracking_uri=f"sqlite:///{tmp_path / 'mlflow.sqlite'}",
    )
    engine = make_engine(settings.resolved_database_url)
    migrate.upgrade(engine)
    engine.dispose()
    once = reflection_batch.with_options(retries=0)
    state = once(
        settings.resolved_database_url,
        settings.resolved_tracking_uri,
        str(tmp_path),
        roles=["no_such_role"],
        return_state=True,
    )
    assert state.is_failed()
    rows = recent_failures(settings.resolved_database_url)
    assert len(rows) == 1
    assert rows[0]["flow_name"] == "reflection_batch"
    assert rows[0]["state"] == "Failed"
    assert "no_such_role" in rows[0]["message"]
    assert rows[0]["deployment"] is None
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["flow-failure"]))
        )
    assert any(str(a.flow_run_id) == rows[0]["flow_run_id"] for a in artifacts)


def test_every_deployed_flow_retries_and_records_its_failure() -> None:
    from apps.deploy.deployments import specs
    from flows.hooks import record_flow_failure

    for spec in specs():
        assert spec.flow.retries >= 1, spec.name
        assert record_flow_failure in spec.flow.on_failure_hooks, spec.name
