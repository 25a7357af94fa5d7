"""Failure hooks of the scheduled flows: a run that fails or crashes for good is recorded.

Prefect calls `on_failure` hooks when a flow run ends Failed after its retries, and
`on_crashed` hooks when its process dies or is cancelled by infrastructure. Both go to
`record_flow_failure`, which writes one `flow_failures` row to the ledger the run was
given (its pinned `database_url` parameter, else the environment's settings) and
publishes a markdown artifact `flow-failure` on the run, so the failure shows in the
Prefect UI and stays on record in the ledger. A hook never raises: a ledger that cannot
be reached is logged, and the run's own failure is what Prefect reports.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from adapters.flow_failures import write_failure
from flows.settings import flow_settings
from reflexmem.redact import redact

log = logging.getLogger(__name__)


def _settings_url(parameters: dict[str, Any]) -> str:
    settings = flow_settings(
        parameters.get("database_url"), parameters.get("tracking_uri"), parameters.get("home")
    )
    return settings.resolved_database_url


def record_flow_failure(flow: Any, flow_run: Any, state: Any) -> None:
    """Record the run's final state in the ledger and as a Prefect markdown artifact."""
    message = str(redact(str(getattr(state, "message", "") or "")))
    state_name = str(getattr(state, "name", None) or getattr(state, "type", "FAILED"))
    deployment = _deployment_name(flow_run)
    at = datetime.now(UTC)
    try:
        write_failure(
            _settings_url(dict(flow_run.parameters or {})),
            flow_name=str(flow.name),
            deployment=deployment,
            flow_run_id=str(flow_run.id),
            flow_run_name=getattr(flow_run, "name", None),
            state=state_name,
            message=message,
            at=at,
        )
    except Exception:
        log.exception("could not record the failure of flow run %s in the ledger", flow_run.id)
    try:
        _artifact(flow, flow_run, state_name, message, at)
    except Exception:
        log.exception("could not publish the failure artifact of flow run %s", flow_run.id)


def _deployment_name(flow_run: Any) -> str | None:
    if getattr(flow_run, "deployment_id", None) is None:
        return None
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            return str(client.read_deployment(flow_run.deployment_id).name)
    except Exception:
        return str(flow_run.deployment_id)


def _artifact(flow: Any, flow_run: Any, state: str, message: str, at: datetime) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import ArtifactCreate

    text = "\n".join(
        [
            f"# {flow.name}: {state}",
            "",
            f"* flow run: `{flow_run.name}` (`{flow_run.id}`)",
            f"* at: {at.isoformat()}",
            "* recorded in the ledger table `flow_failures`",
            "",
            "```",
            message[-2000:],
            "```",
        ]
    )
    artifact = ArtifactCreate(
        key="flow-failure",
        type="markdown",
        data=str(redact(text)),
        description=f"{flow.name} ended {state}",
        flow_run_id=flow_run.id,
    )
    with get_client(sync_client=True) as client:
        client.create_artifact(artifact=artifact)


FAILURE_HOOKS: dict[str, Any] = {
    "on_failure": [record_flow_failure],
    "on_crashed": [record_flow_failure],
}
"""Keyword arguments of `@flow` for every scheduled flow."""
