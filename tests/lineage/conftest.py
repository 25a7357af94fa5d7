"""One small demo store for every lineage test (notebook, report, CLI, MLflow UI)."""

from __future__ import annotations

import pytest

from reflexmem.operations.cycle import CycleReport
from reflexmem.settings import Settings
from tests.lineage_store import build_store


@pytest.fixture(scope="session")
def lineage_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, CycleReport]:
    """The store and the report of its cycle (built once per session)."""
    return build_store(tmp_path_factory.mktemp("lineage") / "home")


@pytest.fixture
def store_env(
    lineage_store: tuple[Settings, CycleReport], monkeypatch: pytest.MonkeyPatch
) -> Settings:
    """The store's settings, also exported as REFLEX_HOME for child processes."""
    settings = lineage_store[0]
    monkeypatch.setenv("REFLEX_HOME", str(settings.home))
    for name in ("REFLEX_DATABASE_URL", "REFLEX_MLFLOW_TRACKING_URI", "REFLEX_ARTIFACT_ROOT"):
        monkeypatch.delenv(name, raising=False)
    return settings
