"""Recall in active mode over the trading stream: every tier, distinct texts, as-of, bandit."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from reflexmem.ledger.enums import Tier
from reflexmem.ledger.memory_models import RecallLog
from reflexmem.memory.ledger_agents import MemoryLedger
from reflexmem.operations import memory, reflection
from reflexmem.operations.recall import LAST_STEP, next_step, recall
from reflexmem.recall import RecallConstraints
from tests.support import make_resources, mature_and_evaluate, registry, scalar, seed_ledger

ROLE = "momentum"
NS = f"role:{ROLE}"
LESSON = "Role momentum (late_entry): chased a breakout after the move and gave it back."


QUERY = "chased a breakout lost with technicals missing"


def _lesson_episodes(n: int, start: int) -> list[dict[str, object]]:
    """Every other episode decided without technicals, learned the lesson and lost."""
    out: list[dict[str, object]] = []
    for i in range(n):
        noise = ((start + i) * 37 % 11) / 50.0
        lesson = i % 2 == 0
        out.append(
            {
                "text": LESSON if lesson else "Role momentum: followed its signal.",
                "outcome": -0.6 + noise if lesson else 0.3 - noise,
                "quality": 0.8,
                "tags": (
                    ["pattern:late-entry", "class:logic_error", "missing:technicals"]
                    if lesson
                    else ["class:variance"]
                ),
                "source_ids": [f"synthetic-{start + i}"],
            }
        )
    return out


def test_recall_shows_every_tier_once_and_sees_the_past_as_it_was(
    engine: sa.Engine, tmp_path: Path
) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path, n=600)
    mature_and_evaluate(res)
    reflection.reflect(res, ROLE)
    first = memory.record_episodes(res, ROLE)
    assert first.recorded > 15
    # The role keeps learning the same lesson (one lineage, versions), and deciding without
    # technicals keeps costing it: a rule on that condition, confirmed on later episodes.
    memory.record_agent_episodes(res, NS, NS, _lesson_episodes(180, 0))
    before_update = datetime.now(UTC)
    time.sleep(0.01)
    memory.record_agent_episodes(res, NS, NS, _lesson_episodes(40, 180))
    constraints = RecallConstraints(role=ROLE)
    now = recall(res, constraints, QUERY, policy="full_detailed").result
    tiers = {h.tier for h in now.hits}
    assert tiers == {Tier.EPISODIC, Tier.SEMANTIC, Tier.PROCEDURAL}
    rule = next(h for h in now.hits if h.tier is Tier.PROCEDURAL)
    assert "technicals" in rule.text
    assert "confirmed on later episodes" in rule.text
    texts = [" ".join(h.text.casefold().split()) for h in now.hits]
    assert len(texts) == len(set(texts))  # no two results carry the same text
    current = next(h for h in now.hits if h.tier is Tier.SEMANTIC and "chased" in h.text)
    # As of a moment before the second batch, the older version of the same pattern is
    # what was live; the newer one did not exist yet.
    then = recall(
        res,
        RecallConstraints(role=ROLE, as_of=before_update),
        QUERY,
        policy="full_detailed",
    ).result
    past = next(h for h in then.hits if h.tier is Tier.SEMANTIC and "chased" in h.text)
    assert past.id != current.id
    assert current.id not in {h.id for h in then.hits}
    # These episodes have no case: their valid time is when they were recorded, so the
    # recorded-time question ("what had been written by then") sees the same past.
    known = recall(
        res, RecallConstraints(role=ROLE, known_at=before_update), QUERY, policy="full_detailed"
    ).result
    assert [h.id for h in known.hits if h.kind == "memory"] == [
        h.id for h in then.hits if h.kind == "memory"
    ]
    seen = {h.id: int(h.text.split("(seen ")[1].split("x")[0]) for h in (past, current)}
    assert 0 < seen[past.id] < seen[current.id] <= 110


def test_the_bandit_picks_the_policy_and_the_outcome_credits_it(
    engine: sa.Engine, tmp_path: Path
) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path, n=900)
    mature_and_evaluate(res)
    reflection.reflect(res, ROLE)
    with engine.connect() as conn:
        decisions = [
            r[0]
            for r in conn.execute(
                sa.text(
                    "SELECT rc.decision_id FROM role_cases rc "
                    "JOIN trading_decisions d ON d.decision_id = rc.decision_id "
                    "WHERE rc.role_id = :r AND rc.state = 'reflected' "
                    "ORDER BY d.decided_at DESC, rc.case_id DESC LIMIT 10"
                ),
                {"r": ROLE},
            )
        ]
    assert len(decisions) == 10
    chosen = [
        recall(res, RecallConstraints(role=ROLE), "signal", decision_id=d).policy.name
        for d in decisions
    ]
    known = {p.name for p in MemoryLedger(engine).policies(NS)}
    assert set(chosen) <= known
    assert scalar(engine, "SELECT COUNT(*) FROM recall_log WHERE namespace = 'role:momentum'") == 10
    with engine.connect() as conn:
        steps = conn.execute(sa.text("SELECT step FROM recall_log ORDER BY step")).scalars()
        assert list(steps) == list(range(10))  # each recall one past the namespace's last
    report = memory.record_episodes(res, ROLE)
    assert report.recorded >= 25  # the ten recalled decisions are past the warm-up
    expected: dict[str, int] = {}
    for name in chosen:
        expected[name] = expected.get(name, 0) + 1
    assert report.credited == expected
    pulls = MemoryLedger(engine).pulls(NS)
    assert sum(pulls.values()) == 10
    assert registry().get(ROLE)


def test_a_recall_finds_its_step_by_index_however_long_the_log(engine: sa.Engine) -> None:
    """The step was a count of the namespace's log, a scan growing with every recall."""
    rows = [
        {
            "recall_id": f"r{ns}-{i}",
            "namespace": f"role:n{ns}",
            "policy": "full_detailed",
            "step": i,
            "hits": [],
            "recalled_at": datetime(2025, 1, 2, tzinfo=UTC),
        }
        for ns in range(4)
        for i in range(5_000)
    ]
    with engine.begin() as conn:
        conn.execute(sa.insert(RecallLog), rows)
        if engine.dialect.name == "postgresql":
            conn.exec_driver_sql("ANALYZE recall_log")
    with engine.connect() as conn:
        assert next_step(conn, "role:n2") == 5_000
        assert next_step(conn, "role:none") == 0
        stmt = LAST_STEP.params(namespace="role:n2")
        query = str(stmt.compile(engine, compile_kwargs={"literal_binds": True}))
        explain = "EXPLAIN " if engine.dialect.name == "postgresql" else "EXPLAIN QUERY PLAN "
        plan = " ".join(str(r) for r in conn.exec_driver_sql(explain + query))
    assert "ix_recall_log_namespace_step" in plan, plan
