"""The scheduled `audit` flow rolls back a drifted structure bundle (stage `audit_structures`)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from adapters import migrate
from adapters.db import make_engine
from reflexmem.operations.stages import stage_of
from reflexmem.operations.structure_audit import audit_structures
from reflexmem.structures import rollout
from tests.integration.structure_drift import SCOPE, drift_under_b, two_bundles
from tests.support import tmp_settings


@pytest.mark.usefixtures("prefect_harness")
def test_the_audit_flow_quarantines_the_drifted_bundle_and_restores_the_previous(
    tmp_path: Path,
) -> None:
    from prefect.client.orchestration import get_client

    from flows.skills import audit

    settings = tmp_settings(tmp_path)
    engine = make_engine(settings.resolved_database_url)
    migrate.upgrade(engine)
    setup = two_bundles(engine)
    drift_under_b(engine, setup.env)
    assert stage_of(audit_structures).retries == 1

    report = audit(
        settings.resolved_database_url,
        settings.resolved_tracking_uri,
        str(settings.home),
        as_of=datetime(2025, 3, 28, tzinfo=UTC),
    )

    (office,) = report["structures"]["scopes"]
    assert (office["scope"], office["drifted"]) == (SCOPE, True)
    assert (office["quarantined"], office["restored"]) == (setup.b.bundle_id, setup.a.bundle_id)
    assert office["pins_before"] == office["pins_after"]
    found = rollout.active(engine, SCOPE)
    assert found is not None
    assert found[0] == setup.a

    async def artifacts() -> set[str]:
        async with get_client() as client:
            return {a.key for a in await client.read_artifacts() if a.key}

    assert "structure-audit" in anyio.run(artifacts)
    again = audit(settings.resolved_database_url, settings.resolved_tracking_uri)
    assert [s["restored"] for s in again["structures"]["scopes"]] == [None]
    engine.dispose()
