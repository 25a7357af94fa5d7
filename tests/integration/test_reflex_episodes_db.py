"""Episodes through the executor, the review queue and its CLI, and Experiment A."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from apps.cli import app
from reflexmem.executor import RetryableToolError, Tool, ToolExecutor
from reflexmem.executor_ledger import LedgerIdempotency
from reflexmem.ledger.reflex_enums import ReviewKind, ReviewStatus, SkillState
from reflexmem.reflex.episode import EpisodeResult, act, run_episode
from reflexmem.reflex.experiment_a import INPUTS, run_experiment_a
from reflexmem.reflex.filings import FilingArgs, filing_tool
from reflexmem.reflex.lifecycle import EvidenceKind
from reflexmem.reflex.review import ReviewError, list_reviews, resolve_review
from reflexmem.reflex.router import Task, route
from reflexmem.reflex.skills import SkillSpec
from reflexmem.reflex.snapshot import load_snapshot
from reflexmem.reflex.versions import register_skill, transition
from tests.integration.reflex_data import ok, spec

K = EvidenceKind
TEN_Q = {
    "doc_id": "d1",
    "form_type": "10-Q",
    "title": "Quarterly report",
    "body": "Revenue for the quarter rose.",
    "source": "sec",
}


def activate(conn: sa.Connection, skill: SkillSpec) -> None:
    register_skill(conn, skill)
    transition(conn, skill.skill_id, 1, SkillState.VALIDATING, [ok(K.EVALUATION)], actor="t")
    transition(
        conn, skill.skill_id, 1, SkillState.LIMITED, [ok(K.REPLAY)], actor="t", rollout_fraction=0.1
    )
    transition(conn, skill.skill_id, 1, SkillState.ACTIVE, [ok(K.SHADOW), ok(K.ROLLOUT)], actor="t")


def task(episode_id: str = "ep-1", **kw: Any) -> Task:
    values: dict[str, Any] = {
        "episode_id": episode_id,
        "task_family": "classify_filing",
        "environment_version": "filings-v1",
        "observation": TEN_Q,
        "at": datetime(2026, 1, 5, tzinfo=UTC),
    }
    values.update(kw)
    return Task(**values)


def run(engine: sa.Engine, executor: ToolExecutor, t: Task) -> EpisodeResult:
    with engine.begin() as conn:
        snapshot = load_snapshot(conn)
        return run_episode(conn, t, snapshot, executor)


def episode(engine: sa.Engine, episode_id: str) -> dict[str, Any]:
    with engine.connect() as conn:
        row = (
            conn.execute(sa.text("SELECT * FROM episodes WHERE episode_id = :e"), {"e": episode_id})
            .mappings()
            .one()
        )
    return dict(row)


def test_a_verified_filing_is_a_success_pinned_to_its_version(
    engine: sa.Engine, tmp_path: Path
) -> None:
    with engine.begin() as conn:
        activate(conn, spec())
    ex = ToolExecutor.with_tools([filing_tool(tmp_path)], idempotency=LedgerIdempotency(engine))
    result = run(engine, ex, task(expected="earnings_report"))
    row = episode(engine, "ep-1")
    assert (row["status"], row["layer"], row["skill_id"], row["skill_version"]) == (
        "success",
        "L0",
        "filing_kind_rules",
        1,
    )
    assert (row["tool"], row["verifier_version"], row["idempotency_key"]) == (
        "file_filing",
        "filing-on-disk-v1",
        "file_filing:ep-1",
    )
    effects = row["allowed_effects"]
    assert (json.loads(effects) if isinstance(effects, str) else effects) == ["write_files"]
    assert (tmp_path / "earnings_report" / "d1.txt").read_text() == TEN_Q["body"]
    assert result.record.feedback == {
        "expected": "earnings_report",
        "correct": True,
        "source": "independent",
    }
    with engine.connect() as conn:
        audit = conn.execute(sa.text("SELECT caller, outcome, batch_id FROM executor_audit")).all()
    assert [tuple(a) for a in audit] == [("skill:filing_kind_rules@1", "ok", "ep-1")]


def test_a_wrong_choice_is_a_policy_failure(engine: sa.Engine, tmp_path: Path) -> None:
    with engine.begin() as conn:
        activate(conn, spec())
    ex = ToolExecutor.with_tools([filing_tool(tmp_path)])
    run(engine, ex, task(expected="guidance_update"))
    row = episode(engine, "ep-1")
    assert (row["status"], row["failure_kind"]) == ("failure", "policy")


def test_a_file_that_did_not_land_is_a_verification_failure(
    engine: sa.Engine, tmp_path: Path
) -> None:
    with engine.begin() as conn:
        activate(conn, spec())
    real = filing_tool(tmp_path)

    def lose(args: FilingArgs) -> dict[str, Any]:
        result = real.handler(args)
        assert isinstance(result, dict)
        value: dict[str, Any] = dict(result)
        Path(value["path"]).write_text("corrupted")
        return value

    broken = Tool(
        real.name,
        real.effects,
        FilingArgs,
        lose,
        verify=real.verify,
        verifier_version=real.verifier_version,
    )
    run(engine, ToolExecutor.with_tools([broken]), task())
    row = episode(engine, "ep-1")
    assert (row["status"], row["failure_kind"], row["verifier_version"]) == (
        "failure",
        "verification",
        "filing-on-disk-v1",
    )


def test_transient_failures_are_retried_up_to_the_skills_limit(
    engine: sa.Engine, tmp_path: Path
) -> None:
    with engine.begin() as conn:
        activate(conn, spec())  # retry_limit 2: at most 3 attempts
    real = filing_tool(tmp_path)
    calls: list[int] = []

    def flaky(args: FilingArgs) -> object:
        calls.append(1)
        if len(calls) < 3:
            raise RetryableToolError("disk busy")
        return real.handler(args)

    tool = Tool(
        real.name,
        real.effects,
        FilingArgs,
        flaky,
        verify=real.verify,
        max_attempts=9,
        verifier_version=real.verifier_version,
    )
    ex = ToolExecutor.with_tools([tool], sleep=lambda _: None)
    run(engine, ex, task())
    assert (episode(engine, "ep-1")["status"], episode(engine, "ep-1")["retries"]) == ("success", 2)

    def always(args: FilingArgs) -> object:
        raise RetryableToolError("disk gone")

    tool = Tool(real.name, real.effects, FilingArgs, always, max_attempts=9)
    run(engine, ToolExecutor.with_tools([tool], sleep=lambda _: None), task("ep-2"))
    row = episode(engine, "ep-2")
    assert (row["status"], row["failure_kind"], row["retries"]) == ("failure", "execution", 2)


def test_a_skill_without_the_permission_holds(engine: sa.Engine, tmp_path: Path) -> None:
    def no_tools(raw: dict[str, Any]) -> None:
        raw["bounds"]["permissions"] = {"tools": ["file_filing"], "effects": ["read"]}

    with engine.begin() as conn:
        activate(conn, spec(edit=no_tools))
    run(engine, ToolExecutor.with_tools([filing_tool(tmp_path)]), task())
    row = episode(engine, "ep-1")
    assert (row["status"], row["status_reason"]) == ("hold", "missing_permission")
    assert not (tmp_path / "earnings_report").exists()


def test_an_action_over_budget_holds_before_calling(engine: sa.Engine, tmp_path: Path) -> None:
    with engine.begin() as conn:
        activate(conn, spec())  # budget max_cost 0
    run(engine, ToolExecutor.with_tools([filing_tool(tmp_path, cost=0.1)]), task())
    row = episode(engine, "ep-1")
    assert (row["status"], row["status_reason"]) == ("hold", "over_budget")
    assert not (tmp_path / "earnings_report").exists()


def test_a_rerun_episode_replays_its_filing_instead_of_filing_twice(
    engine: sa.Engine, tmp_path: Path
) -> None:
    with engine.begin() as conn:
        activate(conn, spec())
    calls: list[str] = []
    real = filing_tool(tmp_path)

    def counting(args: FilingArgs) -> object:
        calls.append(args.doc_id)
        return real.handler(args)

    tool = Tool(
        real.name,
        real.effects,
        FilingArgs,
        counting,
        verify=real.verify,
        verifier_version=real.verifier_version,
    )
    first = run(
        engine, ToolExecutor.with_tools([tool], idempotency=LedgerIdempotency(engine)), task("ep-1")
    )
    again = ToolExecutor.with_tools([tool], idempotency=LedgerIdempotency(engine))
    with engine.connect() as conn:
        snapshot = load_snapshot(conn)
    replay = act(route(task("ep-1"), snapshot), again)
    assert calls == ["d1"]
    assert replay.record.result is not None
    assert replay.record.result["replayed"] is True
    assert replay.record.status == first.record.status == "success"


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


def test_a_model_asking_to_trade_is_refused_and_the_refusal_is_in_the_ledger(
    engine: sa.Engine, tmp_path: Path
) -> None:
    from reflexmem.executor import order_tools
    from reflexmem.reflection.chat import LLMConfig
    from reflexmem.reflex.deliberate import ModelDeliberator
    from tests.unit.reflex.reflex_helpers import ChatServer, completion

    with engine.begin() as conn:
        activate(conn, spec())
    broker: list[object] = []
    ex = ToolExecutor.with_tools(
        [
            filing_tool(tmp_path),
            *order_tools(place=broker.append, modify=broker.append, cancel=broker.append),
        ]
    )
    call = {
        "type": "function",
        "function": {
            "name": "place_order",
            "arguments": '{"symbol": "AAPL", "side": "long", "quantity": 5}',
        },
    }
    server = ChatServer(completion(None, tool_calls=[call]))
    try:
        cfg = LLMConfig(base_url=server.url, model="m-test", max_retries=0)
        model = ModelDeliberator(cfg, executor=ex)
        ceo = {
            "doc_id": "d9",
            "form_type": "8-K",
            "title": "Chief executive transition",
            "body": "The board appointed a new chief executive.",
            "source": "company",
        }
        with engine.begin() as conn:
            run_episode(
                conn, task("ep-m", observation=ceo), load_snapshot(conn), ex, deliberator=model
            )
    finally:
        server.close()
    assert broker == []
    row = episode(engine, "ep-m")
    assert (row["status"], row["status_reason"], row["layer"]) == (
        "hold",
        "missing_permission",
        "L3",
    )
    result = json.loads(row["result"]) if isinstance(row["result"], str) else row["result"]
    assert result["refused_requests"][0].startswith("place_order: refused")
    with engine.connect() as conn:
        audit = conn.execute(
            sa.text("SELECT caller, tool, outcome FROM executor_audit WHERE batch_id = 'ep-m'")
        ).all()
    assert [tuple(a) for a in audit] == [("deliberator", "place_order", "refused")]


def test_a_running_episode_keeps_its_version_and_the_next_one_uses_the_new(
    engine: sa.Engine, tmp_path: Path
) -> None:
    from tests.integration.reflex_data import next_version

    with engine.begin() as conn:
        activate(conn, spec())
        pinned = load_snapshot(conn)  # the episode starts here
        register_skill(conn, next_version())
        transition(
            conn, "filing_kind_rules", 2, SkillState.VALIDATING, [ok(K.EVALUATION)], actor="t"
        )
        transition(
            conn,
            "filing_kind_rules",
            2,
            SkillState.LIMITED,
            [ok(K.REPLAY)],
            actor="t",
            rollout_fraction=0.1,
        )
        transition(
            conn,
            "filing_kind_rules",
            2,
            SkillState.ACTIVE,
            [ok(K.SHADOW), ok(K.ROLLOUT)],
            actor="t",
        )
    ex = ToolExecutor.with_tools([filing_tool(tmp_path)])
    with engine.begin() as conn:
        run_episode(conn, task("running"), pinned, ex)
    run(engine, ex, task("next"))
    assert episode(engine, "running")["skill_version"] == 1
    assert episode(engine, "next")["skill_version"] == 2
