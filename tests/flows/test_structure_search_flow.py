from __future__ import annotations

from pathlib import Path

import pytest

from adapters import migrate
from adapters.db import make_engine
from adapters.tracking.structures import StructureRegistry
from reflexmem.structures import persist


@pytest.mark.usefixtures("prefect_harness")
def test_structure_search_flow_registers_the_winner_and_publishes_the_archive(
    tmp_path: Path, mlflow_uri: str
) -> None:
    import anyio
    from prefect.client.orchestration import get_client

    from flows.structure_search import structure_search

    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    engine = make_engine(url)
    migrate.upgrade(engine)
    artifacts = (tmp_path / "mlartifacts").resolve().as_uri()  # the home's artifact root
    out = structure_search(
        database_url=url,
        tracking_uri=mlflow_uri,
        home=str(tmp_path),
        environment="independent",
    )
    assert out["registered"]
    assert out["steps"] == [
        "delete_edge(edge=document->schedule)",
        "delete_edge(edge=schedule->image)",
        "delete_edge(edge=image->document)",
    ]
    assert out["mlflow"]["aliases"][-1] == "current"
    with engine.connect() as conn:
        assert persist.active_bundle_id(conn, "office") == out["bundle"]
        registered = persist.get_version(conn, out["registered_id"])
    assert registered is not None
    assert registered.mlflow_version == out["mlflow"]["version"]
    mv = StructureRegistry(mlflow_uri, artifacts).by_alias("current-schedule")
    assert mv.tags["reflexmem.parent_id"] == "office-all-shared"

    async def artifact_keys() -> set[str]:
        async with get_client() as client:
            return {a.key for a in await client.read_artifacts() if a.key}

    assert {"structure-archive", "structure-final-test"} <= anyio.run(artifact_keys)
    engine.dispose()


def test_structure_search_has_a_deployment() -> None:
    from apps.deploy.deployments import STRUCTURE_SEARCH, specs

    found = {s.name: s for s in specs()}
    assert found[STRUCTURE_SEARCH].cron == "30 3 * * *"
    assert found[STRUCTURE_SEARCH].flow.name == "structure_search"
