from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from adapters import migrate
from adapters.db import make_engine
from reflexmem.memory.ledger_agents import MemoryLedger


@pytest.mark.usefixtures("prefect_harness")
def test_agent_episodes_flow_and_the_distillation_sweep_publish_artifacts(
    tmp_path: Path, mlflow_uri: str
) -> None:
    from prefect.client.orchestration import get_client

    from flows.cycle import distillation, record_episodes

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    eps = [
        {"text": f"ep {i}", "outcome": 0.6, "quality": 0.9, "tags": ["momentum"]}
        | {"policy": "compressed"}
        for i in range(20)
    ]
    summary = record_episodes(
        "agent-1", "agent:r1", eps, database_url=url, tracking_uri=mlflow_uri, distill=False
    )
    assert summary["bandit_updates"] == {"compressed": 5}  # 15 warm-up episodes
    assert summary["distilled"] == []  # left to the sweep
    report = distillation(database_url=url, tracking_uri=mlflow_uri)
    assert [d["namespace"] for d in report["distillation"]] == ["agent:r1"]
    assert report["distillation"][0]["windows"] == 1
    assert report["distillation"][0]["patterns"] == 1
    assert len(report["distillation"][0]["promoted"]) == 1
    again = distillation(database_url=url, tracking_uri=mlflow_uri)
    assert again["distillation"] == []  # nothing new: idempotent
    store = MemoryLedger(engine).store
    assert len(store.entries("agent:r1")) == 20 + 2

    async def artifacts() -> list[str]:
        async with get_client() as client:
            return [a.key for a in await client.read_artifacts() if a.key]

    keys = anyio.run(artifacts)
    assert {"memory-distillation", "memory-episodes"} <= set(keys)
    engine.dispose()
