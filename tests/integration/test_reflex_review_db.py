"""The review queue of the REFLEX episodes, its command line, and Experiment A."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from apps.cli import app
from reflexmem.executor import ToolExecutor
from reflexmem.ledger.reflex_enums import ReviewKind, ReviewStatus
from reflexmem.reflex.experiment_a import INPUTS, run_experiment_a
from reflexmem.reflex.filings import filing_tool
from reflexmem.reflex.review import ReviewError, list_reviews, resolve_review
from tests.integration.reflex_data import spec
from tests.integration.reflex_episodes import activate, episode, run, task


def test_the_review_queue_counts_causes_and_resolves_once(
    engine: sa.Engine, tmp_path: Path
) -> None:
    with engine.begin() as conn:
        activate(conn, spec())
    ex = ToolExecutor.with_tools([filing_tool(tmp_path)])
    for i in range(3):
        run(engine, ex, task(f"nf-{i}", observation={"id": f"x{i}", "form": "10-Q"}))
    run(engine, ex, task("env-1", environment_version="filings-v2"))
    with engine.begin() as conn:
        items = list_reviews(conn)
        assert [(e.kind, e.occurrences) for e in items] == [
            (ReviewKind.NEW_INPUT_FORMAT, 3),
            (ReviewKind.ENVIRONMENT_CHANGE, 1),
        ]
        assert (items[0].first_episode_id, items[0].last_episode_id) == ("nf-0", "nf-2")
        done = resolve_review(conn, items[1].review_id, "accepted", note="EDGAR v2", actor="ops")
        assert (done.status, done.resolution, done.resolved_by) == (
            ReviewStatus.RESOLVED,
            "accepted",
            "ops",
        )
        with pytest.raises(ReviewError, match="already resolved"):
            resolve_review(conn, items[1].review_id, "rejected", note="again", actor="ops")
        with pytest.raises(ReviewError, match="does not exist"):
            resolve_review(conn, 999, "rejected", note="x", actor="ops")
        with pytest.raises(ReviewError, match="not one of"):
            resolve_review(conn, items[0].review_id, "maybe", note="x", actor="ops")
        assert [e.kind for e in list_reviews(conn)] == [ReviewKind.NEW_INPUT_FORMAT]
    run(engine, ex, task("env-2", environment_version="filings-v2"))
    with engine.connect() as conn:
        env = [e for e in list_reviews(conn, status=None) if e.kind == "environment_change"]
    assert (env[0].status, env[0].occurrences) == (ReviewStatus.RESOLVED, 2)
    hold = episode(engine, "env-2")
    assert (hold["status"], hold["status_reason"]) == ("hold", "no_model")


def test_review_list_and_resolve_on_the_command_line(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REFLEX_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        activate(conn, spec())
    run(engine, ToolExecutor.with_tools([filing_tool(tmp_path)]), task("nf", observation={"x": 1}))
    runner = CliRunner()
    listed = runner.invoke(app, ["review", "list", "--json"])
    assert listed.exit_code == 0, listed.output
    (item,) = json.loads(listed.output)["items"]
    assert (item["kind"], item["last_episode_id"]) == ("new_input_format", "nf")
    resolved = runner.invoke(
        app,
        [
            "review",
            "resolve",
            str(item["review_id"]),
            "--resolution",
            "rejected",
            "--note",
            "not a filing",
        ],
    )
    assert resolved.exit_code == 0, resolved.output
    assert "resolved as rejected" in resolved.output
    again = runner.invoke(
        app,
        [
            "review",
            "resolve",
            str(item["review_id"]),
            "--resolution",
            "rejected",
            "--note",
            "twice",
        ],
    )
    assert again.exit_code == 1
    assert json.loads(runner.invoke(app, ["review", "list", "--json"]).output)["items"] == []
    everything = json.loads(runner.invoke(app, ["review", "list", "--all", "--json"]).output)
    assert everything["items"][0]["resolution_note"] == "not a filing"


def test_experiment_a_shows_which_layer_decided_and_what_was_held(
    engine: sa.Engine, tmp_path: Path
) -> None:
    report = run_experiment_a(engine, tmp_path / "files")
    table = {(r.stage, r.input): r for r in report.rows}
    layer = {key: r.layer for key, r in table.items()}
    assert [layer[(s, "10-Q")] for s in ("novice", "examples", "policy", "rules")] == [
        "L3",
        "L2",
        "L1",
        "L0",
    ]
    assert [layer[(s, "broker note")] for s in ("examples", "policy", "rules")] == [
        "L2",
        "L1",
        "L1",
    ]
    assert layer[("rules", "8-K results")] == "L2"  # L0 has no rule, L1 is unsure
    familiar = [r for r in report.rows if r.condition == "familiar" and r.stage != "novice"]
    assert all(r.correct for r in familiar)
    assert all(
        r.status == "hold" and r.reason == "no_model" for r in report.rows if r.stage == "novice"
    )
    for stage in ("examples", "policy", "rules"):
        assert (table[(stage, "CEO change")].status, table[(stage, "CEO change")].reason) == (
            "hold",
            "no_model",
        )
        assert (table[(stage, "no body")].status, table[(stage, "no body")].reason) == (
            "request",
            "missing_information",
        )
        assert table[(stage, "XBRL feed")].status == "hold"
        assert table[(stage, "EDGAR v2")].status == "hold"
    kinds = {e.kind: e.occurrences for e in report.reviews}
    assert kinds == {
        ReviewKind.UNKNOWN_TASK_FAMILY: len(INPUTS),
        ReviewKind.NEW_INPUT_FORMAT: 3,
        ReviewKind.ENVIRONMENT_CHANGE: 3,
    }
    assert [p[1] for p in report.promotions if p[1] == "active"] == ["active"] * 3
    assert report.holds().height == len(INPUTS) + 3 * 4
    with engine.connect() as conn:
        n = conn.execute(sa.text("SELECT COUNT(*) FROM episodes WHERE status = 'success'"))
        assert n.scalar_one() == 12  # only decided, verified filings are successes
