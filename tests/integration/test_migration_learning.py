"""Migration 0004b backfills the pending learning state from the recorded episode payloads."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import sqlalchemy as sa

from adapters import migrate
from reflexmem.memory.cycle import EpisodeInput
from reflexmem.memory.ledger_agents import MemoryLedger


def _payload(ns: str, i: int, policy: str | None, reward: float) -> str:
    return json.dumps(
        {"namespace": ns, "episode": i, "policy": policy, "reward": reward, "learned": i >= 15}
    )


def test_backfill_copies_the_rewards_the_next_gate_needs(engine: sa.Engine) -> None:
    migrate.downgrade(engine, "0003")
    try:
        now = datetime.now(UTC)
        episodes = sa.table(
            "episodes",
            sa.column("episode_id"),
            sa.column("agent_id"),
            sa.column("task_family"),
            sa.column("outcome"),
            sa.column("payload"),
            sa.column("recorded_at"),
        )
        rows = [
            {
                "episode_id": f"ep:ns:{i}",
                "agent_id": "agent",
                "task_family": "memory",
                "outcome": -0.5,
                "payload": _payload("ns", i, None if i == 70 else "none", 0.25),
                "recorded_at": now,
            }
            for i in range(95)
        ]
        rows.append({**rows[0], "episode_id": "other", "payload": json.dumps({"kind": "x"})})
        namespaces = sa.table(
            "memory_namespaces",
            sa.column("namespace"),
            sa.column("next_episode"),
            sa.column("clock"),
            sa.column("updated_at"),
        )
        with engine.begin() as conn:
            conn.execute(sa.insert(episodes), rows)
            conn.execute(
                sa.insert(namespaces),
                [
                    {"namespace": "ns", "next_episode": 95, "clock": 94, "updated_at": now},
                    {"namespace": "empty", "next_episode": 0, "clock": 0, "updated_at": now},
                ],
            )
    finally:
        migrate.upgrade(engine)
    with engine.connect() as conn:
        got = {
            row.namespace: row.learning
            for row in conn.execute(sa.text("SELECT namespace, learning FROM memory_namespaces"))
        }
    assert got["empty"] is None
    state = json.loads(got["ns"]) if isinstance(got["ns"], str) else got["ns"]
    assert state["agent"] == "agent"
    # window 9 closed at 90: keep from 90 + 10 - 50 = 50; episode 70 had no policy
    assert [e[0] for e in state["recent"]] == [i for i in range(50, 95) if i != 70]
    # the gate at window 10 then judges episodes 50-99 with the backfilled rewards
    ledger = MemoryLedger(engine)
    ledger.ensure_agent("agent")
    eps = [EpisodeInput(f"e{i}", -0.5, 0.9, policy="none") for i in range(95, 100)]
    (event,) = ledger.record_episodes("agent", "ns", eps).events
    assert (event.window, event.episode, event.mean_reward) == (10, 99, 0.25)
    assert "episodes 50-99" in event.reason
