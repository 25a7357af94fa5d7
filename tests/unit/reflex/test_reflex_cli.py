"""`reflexmem skills check`: the shipped files pass; a bad file is named with field and reason."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from infra.cli import app
from reflexmem.reflex.skills import SKILLS_DIR


def test_skills_check_passes_the_shipped_files_and_names_a_bad_one(tmp_path: Path):
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
