from __future__ import annotations

from pathlib import Path

import pytest

from infra import migrate
from infra.db import make_engine
from reflexmem.memory.ledger_agents import MemoryLedger


@pytest.mark.usefixtures("prefect_harness")
def test_distillation_flow_distils_due_namespaces_and_publishes_artifacts(tmp_path: Path) -> None:
    from flows.distillation import distillation, record_episodes
    from prefect.client.orchestration import get_client

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    eps = [
        {
            "text": f"ep {i}",
            "outcome": 0.6,
            "quality": 0.9,
            "tags": ["momentum"],
            "policy": "compressed",
        }
        for i in range(20)
    ]
    summary = record_episodes("agent-1", "role:r1", eps, database_url=url, distill=False)
    assert summary["bandit_updates"] == {"compressed": 5}  # 15 warm-up episodes
    assert summary["windows_distilled"] == []  # left to the sweep
    rows = distillation(database_url=url)
    assert [r["window"] for r in rows] == ["role:r1:episodes:10-20"]
    assert rows[0]["semantic_written"] == 1
    assert rows[0]["promoted_candidates"] == 1
    assert distillation(database_url=url) == []  # nothing new: idempotent
    store = MemoryLedger(engine).store
    assert len(store.entries("role:r1")) == 20 + 2
    # recording distils the windows it closes itself: the sweep finds nothing
    more = record_episodes("agent-1", "role:r1", eps[:10], database_url=url)
    assert more["windows_distilled"] == ["role:r1:episodes:20-30"]
    assert distillation(database_url=url) == []
    assert store.has_window("role:r1", "role:r1:episodes:20-30")

    import anyio

    async def artifacts() -> list[str]:
        async with get_client() as client:
            found = await client.read_artifacts()
            return [a.key for a in found if a.key]

    keys = anyio.run(artifacts)
    assert "memory-distillation" in keys
    assert "memory-episodes" in keys
    engine.dispose()
