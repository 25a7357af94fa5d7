"""Episodes through the executor: verified successes, failures, holds, retries, replays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from reflexmem.executor import RetryableToolError, Tool, ToolExecutor
from reflexmem.executor_ledger import LedgerIdempotency
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.episode import act, run_episode
from reflexmem.reflex.filings import FilingArgs, filing_tool
from reflexmem.reflex.router import route
from reflexmem.reflex.snapshot import load_snapshot
from reflexmem.reflex.versions import register_skill, transition
from tests.integration.reflex_data import ok, spec
from tests.integration.reflex_episodes import TEN_Q, K, activate, episode, run, task


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
