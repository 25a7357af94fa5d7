"""The production topology for real: Prefect server, a process worker, MLflow server, PostgreSQL.

`reflexmem stack up` (its function) starts everything on loopback under a temporary
`REFLEX_HOME` (own `PREFECT_HOME`, analytics off); the maturation flow is deployed to the
work pool with an interval schedule of a few seconds and its concurrency limit of one.
The test watches the runs: a scheduled run completes, its MLflow run appears on the
tracking server, and a run triggered while another runs is held in
`AwaitingConcurrencySlot`; never do two runs of the deployment run at once. The stack is
stopped (process groups) and the scratch databases dropped in `finally`, on failure too.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from apps.deploy.deployments import MATURATION
from apps.deploy.processes import is_ours
from apps.deploy.stack import _api, deploy_stack, down, read_state, up
from apps.deploy.stack_live import paused_schedules, status
from reflexmem.settings import Settings
from tests.conftest import PG_ADMIN_URL, _pg_admin

pytestmark = [pytest.mark.stack, pytest.mark.slow, pytest.mark.postgres, pytest.mark.serial]

ACTIVE = {"PENDING", "RUNNING"}


@pytest.fixture
def stack_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    admin = _pg_admin()
    if admin is None:
        pytest.skip(f"PostgreSQL not reachable at {PG_ADMIN_URL}")
    suffix = uuid.uuid4().hex[:10]
    ledger, mlflow_db = f"reflex_stack_{suffix}", f"reflex_stack_mlflow_{suffix}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{ledger}"'))
    url = sa.make_url(PG_ADMIN_URL).set(database=ledger).render_as_string(hide_password=False)
    engine = make_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    # Fast polling so a few-second interval shows within the test's time.
    monkeypatch.setenv("PREFECT_WORKER_QUERY_SECONDS", "2")
    monkeypatch.setenv("PREFECT_WORKER_PREFETCH_SECONDS", "2")
    monkeypatch.setenv("PREFECT_SERVER_SERVICES_SCHEDULER_LOOP_SECONDS", "2")
    monkeypatch.setenv("REFLEX_STACK_UI", "true")  # the browser check below opens it
    settings = Settings(
        home=tmp_path / "home", database_url=url, stack_postgres_url=PG_ADMIN_URL
    ).model_copy(update={"mlflow_ui_url": "http://127.0.0.1:1"})
    started: list[dict[str, Any]] = []
    try:
        yield settings.model_copy(update={"drop_dir": tmp_path / "drop"})
    finally:
        state = read_state(settings)
        if state is not None:
            started = [state.get("prefect", {}), state.get("mlflow", {}), *state.get("workers", [])]
        down(settings)
        assert not any(is_ours(e) for e in started if "pid" in e), "a stack process survived"
        with admin.connect() as conn:
            for name in (ledger, mlflow_db):
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _runs(api: str, deployment_id: str) -> list[Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import DeploymentFilter, DeploymentFilterId

    with _api(api), get_client(sync_client=True) as client:
        return list(
            client.read_flow_runs(
                deployment_filter=DeploymentFilter(
                    id=DeploymentFilterId(any_=[uuid.UUID(deployment_id)])
                )
            )
        )


def _trigger(api: str, deployment_id: str) -> str:
    from prefect.client.orchestration import get_client

    with _api(api), get_client(sync_client=True) as client:
        return str(client.create_flow_run_from_deployment(uuid.UUID(deployment_id)).id)


def _wait_text(driver: Any, wanted: str, refused: str, timeout_s: float = 90.0) -> str:
    """The page's text once it shows `wanted` (fails at once if it shows `refused`)."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        text = str(driver.find_element(By.TAG_NAME, "body").text)
        assert refused not in text, text[:500]
        if wanted in text:
            return text
        time.sleep(1.0)
    raise AssertionError(f"{wanted!r} never shown; the page said: {text[:500]}")


def _browse_uis(prefect_url: str, mlflow_url: str) -> None:
    """Both UIs in headless Chromium: each reaches its API and shows the stack's data.

    Screenshots go to `REFLEX_SCREENSHOT_DIR` when set (docs/operations.md shows them).
    """
    from tests.browser import chromium

    shots = os.environ.get("REFLEX_SCREENSHOT_DIR")
    with chromium() as driver:
        driver.get(f"{prefect_url}/deployments")
        _wait_text(driver, MATURATION, "Can't connect to Server API")
        if shots:
            driver.save_screenshot(str(Path(shots) / "stack-prefect-deployments.png"))
        driver.get(f"{mlflow_url}/#/experiments")
        _wait_text(driver, "learning-cycles", "Failed to fetch")
        import mlflow

        found = mlflow.MlflowClient(mlflow_url).get_experiment_by_name("learning-cycles")
        assert found is not None
        # with the view every printed link carries, it opens on its runs, not GenAI traces
        from adapters.tracking.context import VIEW

        driver.get(f"{mlflow_url}/#/experiments/{found.experiment_id}{VIEW}")
        _wait_text(driver, "maturation_check", "Failed to fetch")
        if shots:
            driver.save_screenshot(str(Path(shots) / "stack-mlflow-experiments.png"))


def _paused(api: str, deployment_id: str) -> bool:
    from prefect.client.orchestration import get_client

    with _api(api), get_client(sync_client=True) as client:
        return bool(client.read_deployment(uuid.UUID(deployment_id)).paused)


def _cycle_runs(tracking_uri: str) -> list[Any]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("learning-cycles")
    if experiment is None:
        return []
    return list(client.search_runs([experiment.experiment_id]))


@pytest.mark.timeout(600)
def test_stack_runs_scheduled_flow_and_holds_overlap(stack_settings: Settings) -> None:
    state = up(stack_settings, deploy=False, mlflow_db=_mlflow_db(stack_settings))
    assert state["ledger"]["migrated"] is True
    api, tracking = state["prefect"]["api_url"], state["mlflow"]["url"]
    deployment_id = deploy_stack(stack_settings, state, names=[MATURATION], interval_s=4)[
        MATURATION
    ]

    held: set[str] = set()
    completed_scheduled: set[str] = set()
    triggered: str | None = None
    max_active = 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        runs = _runs(api, deployment_id)
        active = [r for r in runs if r.state_type is not None and r.state_type.value in ACTIVE]
        max_active = max(max_active, len(active))
        held |= {str(r.id) for r in runs if r.state_name == "AwaitingConcurrencySlot"}
        completed_scheduled |= {
            str(r.id) for r in runs if r.auto_scheduled and r.state_name == "Completed"
        }
        if triggered is None and any(r.state_type.value == "RUNNING" for r in active):
            triggered = _trigger(api, deployment_id)
        if completed_scheduled and triggered is not None and held:
            break
        time.sleep(1.0)

    failed = [
        r.state_name for r in _runs(api, deployment_id) if r.state_name in ("Failed", "Crashed")
    ]
    assert not failed, f"runs failed: {failed}; see {state['workers'][0]['log']}"
    assert completed_scheduled, "no scheduled run completed"
    assert triggered is not None, "no run was seen running"
    assert held, "no run was held by the deployment's concurrency limit"
    assert max_active <= 1, "two runs of a limit-one deployment were active at once"
    cycle_runs = [
        r
        for r in _cycle_runs(tracking)
        if r.data.tags.get("mlflow.source.name", "").endswith("maturation_check")
    ]
    assert any(r.info.status == "FINISHED" for r in cycle_runs), "no MLflow run on the server"
    # `stack status` reads what is true now, not what `up` recorded before the deploy.
    report = status(stack_settings)
    assert report["up"] is True
    assert report["ledger"]["migrated"] is True
    assert report["deployments"][MATURATION] == deployment_id
    # The UI calls the API this server listens on, not Prefect's default port.
    assert psutil.Process(state["prefect"]["pid"]).environ()["PREFECT_UI_API_URL"] == api
    _browse_uis(state["prefect"]["url"], tracking)
    # The demo pauses the stack's schedules for its length, and resumes exactly those.
    with paused_schedules(api) as paused:
        assert paused == [MATURATION]
        assert _paused(api, deployment_id) is True
    assert _paused(api, deployment_id) is False
    stopped = down(stack_settings)
    assert set(stopped.values()) <= {"stopped", "killed"}, stopped
    assert read_state(stack_settings) is None


def _mlflow_db(settings: Settings) -> str:
    url = sa.make_url(settings.resolved_database_url)
    return f"reflex_stack_mlflow_{str(url.database).removeprefix('reflex_stack_')}"
