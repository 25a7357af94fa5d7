import runpy
from pathlib import Path

import pytest

from reflexmem.operations import intake
from reflexmem.settings import Settings
from tests.integration.ledger_data import write_small
from tests.support import migrated

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_the_lineage_notebook_runs_against_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    settings = Settings()
    res = migrated(settings)
    intake.ingest(res, write_small(tmp_path / "in", 100))
    result = intake.admit(res)
    res.engine.dispose()
    runpy.run_path(str(NOTEBOOKS / "lineage_review.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "quarantined by reason" in out
    assert str(result.rows_in) in out
