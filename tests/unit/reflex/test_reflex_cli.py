"""`reflexmem skills check`: the shipped files pass; a bad file is named with field and reason."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from apps.cli import app
from reflexmem.reflex.skills import SKILLS_DIR


def test_skills_check_passes_the_shipped_files_and_names_a_bad_one(tmp_path: Path) -> None:
    runner = CliRunner()
    good = runner.invoke(app, ["skills", "check"])
    assert good.exit_code == 0, good.output
    assert "filing_kind_rules@1  L0" in good.output
    text = (SKILLS_DIR / "filing_kind_rules.yaml").read_text()
    bad = tmp_path / "widened.yaml"
    bad.write_text(text.replace("tools: [file_filing]", "tools: [file_filing, place_order]"))
    refused = runner.invoke(app, ["skills", "check", str(bad)])
    assert refused.exit_code == 1
    assert "widened.yaml: bounds.permissions.tools" in refused.output
    assert "place_order" in refused.output


def test_skills_propose_refuses_a_widening_file_with_its_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from adapters import migrate
    from adapters.db import make_engine

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path))
    engine = make_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    migrate.upgrade(engine)
    engine.dispose()
    text = (SKILLS_DIR / "filing_kind_rules.yaml").read_text()
    bad = tmp_path / "widened.yaml"
    bad.write_text(text.replace("tools: [file_filing]", "tools: [file_filing, place_order]"))
    runner = CliRunner()
    refused = runner.invoke(app, ["skills", "propose", str(bad)])
    assert refused.exit_code == 1, refused.output
    assert "bounds.permissions.tools" in refused.output
    good = runner.invoke(app, ["skills", "propose", str(SKILLS_DIR / "filing_kind_rules.yaml")])
    assert good.exit_code == 0, good.output
    assert "filing_kind_rules@1 registered as candidate" in good.output
    status = runner.invoke(app, ["skills", "status", "--family", "classify_filing", "--json"])
    assert '"skill": "filing_kind_rules@1"' in status.output
