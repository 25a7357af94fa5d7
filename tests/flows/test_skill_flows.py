"""The skill flows: the same stages as the direct path, the same ledger, and their schedules."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from adapters import migrate
from adapters.db import make_engine
from adapters.resources import build_resources
from reflexmem.ledger.checksums import table_checksums
from reflexmem.operations import intake
from reflexmem.operations.cycle import run_audit, run_generation, run_shadow
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.settings import Settings
from tests.integration.skill_data import clock_between, reflected


def _ledger(tmp: Path, name: str) -> tuple[Settings, Resources]:
    settings = Settings(
        home=tmp / name,
        database_url=f"sqlite:///{tmp / f'{name}.sqlite'}",
        mlflow_tracking_uri=f"sqlite:///{tmp / f'mlflow-{name}.sqlite'}",
        artifact_root=tmp / f"artifacts-{name}",
    )
    engine = make_engine(settings.resolved_database_url)
    migrate.upgrade(engine)
    engine.dispose()
    res = build_resources(settings)
    intake.ingest(res, [write_dfull_bars(tmp / f"bars-{name}")], "bars")
    return settings, res


@pytest.mark.usefixtures("prefect_harness")
def test_skill_flows_leave_the_ledger_the_direct_sequence_leaves(tmp_path: Path) -> None:
    from prefect.client.orchestration import get_client

    from flows.skills import audit, candidate_generation, shadow_evaluation

    _, res_direct = _ledger(tmp_path, "direct")
    flow, res_flow = _ledger(tmp_path, "flow")
    first = reflected(res_direct, tmp_path / "d")
    reflected(res_flow, tmp_path / "f")
    middle = clock_between(first, 0.6)

    runner = DirectRunner(res_direct)
    made = run_generation(runner, middle)
    shadow = run_shadow(runner, middle)
    run_audit(runner, middle)

    urls = (flow.resolved_database_url, flow.resolved_tracking_uri)
    generated = candidate_generation(*urls, as_of=middle)
    evaluated = shadow_evaluation(*urls, as_of=middle)
    audited = audit(*urls, as_of=middle)

    assert generated["registered"] == list(made.registered)
    assert len(made.registered) > 3
    assert [m["to"] for m in evaluated["lifecycle"]["moves"]] == [
        m.to for m in shadow.lifecycle.moves
    ]
    assert "limited" in {m.to for m in shadow.lifecycle.moves}
    assert audited["moves"] == []  # nothing is active yet
    with res_direct.engine.connect() as a, res_flow.engine.connect() as b:
        left, right = table_checksums(a), table_checksums(b)
    differ = {t for t in left if left[t] != right[t]}
    assert differ == {"ingested_files"}  # only the two seed folders' paths differ

    async def artifacts() -> set[str]:
        async with get_client() as client:
            return {a.key for a in await client.read_artifacts() if a.key}

    assert {"skill-candidates", "skill-shadow-evaluation", "skill-audit"} <= anyio.run(artifacts)
    again = shadow_evaluation(*urls, as_of=middle)
    assert again["lifecycle"]["moves"] == []
    assert again["checks"]["decisions"] == 0
    res_direct.engine.dispose()
    res_flow.engine.dispose()


def test_each_skill_flow_is_a_deployment_with_a_schedule(tmp_path: Path) -> None:
    from apps.deploy.deployments import AUDIT, CANDIDATE_GENERATION, SHADOW_EVALUATION, deployments

    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'l.sqlite'}")
    built = {d.name: d for d in deployments(settings)}
    expected = {
        CANDIDATE_GENERATION: ("candidate_generation", "5 1 * * *"),
        SHADOW_EVALUATION: ("shadow_evaluation", "20 * * * *"),
        AUDIT: ("audit", "50 1 * * *"),
    }
    for name, (flow, cron) in expected.items():
        deployment = built[name]
        assert deployment.flow_name == flow
        assert [s.schedule.cron for s in deployment.schedules] == [cron]
        assert deployment.parameters["database_url"].endswith("l.sqlite")
