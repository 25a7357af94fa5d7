"""The outcome effect on both backends: realized returns in the episode frame, the CLI.

One reflected ledger per backend, candidates generated and promoted as the cycle does;
then `reflexmem skills status --json` and `reflexmem skills effect --json` are read and
held to the frame they were measured on.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from apps.cli import app
from reflexmem.operations import skill_lifecycle, skills
from reflexmem.operations.resources import Resources
from reflexmem.reflex.cycle_ledger import load_views
from reflexmem.reflex.outcomes import LEARNED, POLICY, held_out_rows
from reflexmem.reflex.trading import judged_frame, read_episodes
from tests.integration.skill_data import clock_between, frame, reflected
from tests.support import AS_OF, make_resources

OUTCOME_FIELDS = ("effect_return", "effect_ci_low", "effect_ci_high")


def _promoted(res: Resources, tmp: Path) -> None:
    first = reflected(res, tmp)
    middle = clock_between(first, 0.6)
    skills.generate_candidates(res, as_of=middle)
    skills.check_decisions(res, as_of=middle)
    skill_lifecycle.advance_skills(res, as_of=middle)
    skills.check_decisions(res, as_of=AS_OF)
    skill_lifecycle.advance_skills(res, as_of=AS_OF)


def _episodes(res: Resources) -> pl.DataFrame:
    with res.engine.connect() as conn:
        return judged_frame(read_episodes(conn, res.registry, through=AS_OF), res.registry)


OWN_RETURN_SQL = """
SELECT rc.case_id, p.realized_return AS own FROM role_cases rc
JOIN position_lifecycles p ON p.status = 'settled' AND (
    p.execution_id = rc.execution_id
    OR (p.execution_id IS NULL AND p.decision_id = rc.decision_id
        AND (SELECT COUNT(*) FROM position_lifecycles q
             WHERE q.decision_id = rc.decision_id) = 1))
"""
"""A case's own settled return, written out independently of `OWN_POSITION_JOINS`."""


def _check_returns(res: Resources, episodes: pl.DataFrame) -> None:
    """Every row has a float `realized_return`: its own settled position's, else null."""
    assert episodes.schema["realized_return"] == pl.Float64
    known = episodes.drop_nulls("realized_return")
    assert known.height > episodes.height // 2
    own = frame(res, OWN_RETURN_SQL).with_columns(
        pl.col("case_id").cast(pl.String), pl.col("own").cast(pl.Float64)
    )
    joined = episodes.join(own, on="case_id", how="left")
    assert joined.height == episodes.height
    assert (joined["realized_return"].is_null() == joined["own"].is_null()).all()
    gap = (joined["realized_return"] - joined["own"]).abs().max()
    assert gap == pytest.approx(0.0)


def _check_status(versions: list[dict[str, object]], res: Resources, episodes: pl.DataFrame) -> int:
    """Types of every row, its effect against the frame; how many rows have an effect."""
    with res.engine.connect() as conn:
        views = {v.key: v for v in load_views(conn)}
    measured = 0
    for row in versions:
        assert isinstance(row["skill"], str)
        assert isinstance(row["version"], int)
        assert row["kind"] in (LEARNED, POLICY)
        assert isinstance(row["state"], str)
        for name in (*OUTCOME_FIELDS, "n_held_out"):
            assert name in row
        rows = held_out_rows(views[str(row["skill"])], episodes, through=AS_OF)
        settled = rows.drop_nulls("realized_return")
        assert row["n_held_out"] == settled.height
        assert row["n_stopped"] == int(settled["stopped"].sum())
        assert row["n_proceeded"] == settled.height - int(settled["stopped"].sum())
        if row["effect_return"] is None:
            assert row["effect_ci_low"] is None
            continue
        ret, held = settled["realized_return"], settled["stopped"]
        mean = ret.filter(~held).mean(), ret.filter(held).mean()
        assert row["effect_return"] == pytest.approx(float(str(mean[0])) - float(str(mean[1])))
        measured += 1
        if row["effect_ci_low"] is None:  # fewer than five two-week blocks: no interval yet
            assert row["effect_ci_high"] is None
            continue
        effect, low, high = (float(str(row[k])) for k in OUTCOME_FIELDS)
        assert all(math.isfinite(v) for v in (effect, low, high))
        assert low <= effect <= high
    return measured


def test_outcome_effects_on_the_ledger_and_the_cli(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = make_resources(engine)
    _promoted(res, tmp_path)
    episodes = _episodes(res)
    _check_returns(res, episodes)
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REFLEX_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    runner = CliRunner()
    status = runner.invoke(app, ["skills", "status", "--json", "--as-of", AS_OF.isoformat()])
    assert status.exit_code == 0, status.output
    versions = json.loads(status.output)["versions"]
    assert versions
    assert {r["kind"] for r in versions} <= {LEARNED, POLICY}
    assert _check_status(versions, res, episodes) > 0
    text = runner.invoke(app, ["skills", "status", "--as-of", AS_OF.isoformat()])
    assert text.exit_code == 0, text.output
    assert any(f" {r['kind']} " in text.output for r in versions)

    effect = runner.invoke(app, ["skills", "effect", "--json", "--as-of", AS_OF.isoformat()])
    assert effect.exit_code == 0, effect.output
    report = json.loads(effect.output)
    assert report["windows"]  # the label windows stay, as a diagnostic
    assert report["outcomes"]
    promoted = {w["skill"] for w in report["windows"]}
    assert {o["skill"] for o in report["outcomes"]} == promoted
    by_key = {r["skill"]: r for r in versions}
    for o in report["outcomes"]:
        assert o["method"] == "blocks_t"
        assert o["n_held_out"] == o["n_proceeded"] + o["n_stopped"]
        if o["effect_return"] is not None:
            assert o["effect_return"] == pytest.approx(o["mean_proceeded"] - o["mean_stopped"])
        if o["effect_ci_low"] is not None:
            assert o["effect_ci_low"] <= o["effect_return"] <= o["effect_ci_high"]
        for name in (*OUTCOME_FIELDS, "n_held_out"):  # the same figures as the status
            assert o[name] == by_key[o["skill"]][name]
    words = runner.invoke(app, ["skills", "effect", "--as-of", AS_OF.isoformat()])
    assert words.exit_code == 0, words.output
    assert "effect on realized return: " in words.output
    assert " n held " in words.output
    assert "label windows (diagnostic" in words.output
