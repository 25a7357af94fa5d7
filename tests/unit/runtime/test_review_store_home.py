"""A review started in a sub-folder (Jupyter's kernel in `notebooks/`) finds the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters import migrate
from adapters.db import make_engine
from adapters.review_store import StoreMissing, open_store


def test_the_nearest_reflex_folder_above_the_working_directory_is_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("REFLEX_HOME", "REFLEX_DATABASE_URL", "REFLEX_MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    project = tmp_path / "project"
    (project / ".reflex").mkdir(parents=True)
    engine = make_engine(f"sqlite:///{project / '.reflex' / 'ledger.sqlite'}")
    migrate.upgrade(engine)
    engine.dispose()
    (project / "notebooks").mkdir()
    monkeypatch.chdir(project / "notebooks")
    store = open_store()
    try:
        assert store.settings.home == (project / ".reflex").resolve()
    finally:
        store.close()
    monkeypatch.chdir(tmp_path)  # nothing at or above: said plainly, nothing created
    with pytest.raises(StoreMissing, match="no ledger at"):
        open_store()
    assert not (tmp_path / ".reflex").exists()
