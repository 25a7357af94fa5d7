import runpy
from pathlib import Path

import pytest

from infra.services import ready_engine, run_admission, run_ingest
from reflexmem.settings import Settings
from tests.integration.ledger_data import write_small

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_the_lineage_notebook_runs_against_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    settings = Settings()
    engine = ready_engine(settings)
    run_ingest(engine, write_small(tmp_path / "in", 100))
    result = run_admission(engine, settings)
    engine.dispose()
    runpy.run_path(str(NOTEBOOKS / "lineage_review.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "quarantined by reason" in out
    assert str(result.rows_in) in out
