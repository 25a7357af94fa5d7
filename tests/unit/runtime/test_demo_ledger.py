"""`make demo` deletes only a ledger a demo made, never someone else's."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.demo.fresh import NotDemoLedger, drop_demo_ledger, ledger_file, mark_if_new
from reflexmem.settings import Settings
from tests.support import migrated, seed_ledger


def test_a_demo_ledger_is_marked_and_then_deleted_with_its_side_files(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", database_url=None)
    assert drop_demo_ledger(settings).startswith("no ledger at")
    res = migrated(settings)
    assert mark_if_new(settings, res.engine)
    res.engine.dispose()
    path = ledger_file(settings)
    assert path is not None
    assert path.exists()
    assert drop_demo_ledger(settings).startswith("deleted")
    assert not path.exists()
    assert not Path(f"{path}.demo").exists()


def test_someone_elses_ledger_is_never_deleted(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home", database_url=None)
    res = migrated(settings)
    seed_ledger(res, tmp_path, n=50)
    assert not mark_if_new(settings, res.engine)  # it holds decisions: not the demo's
    res.engine.dispose()
    with pytest.raises(NotDemoLedger, match="was not made by the demo"):
        drop_demo_ledger(settings)
    assert ledger_file(settings) is not None
    assert ledger_file(settings).exists()  # type: ignore[union-attr]
    server = Settings(home=tmp_path, database_url="postgresql+psycopg://postgres@127.0.0.1/x")
    assert "left alone" in drop_demo_ledger(server)
