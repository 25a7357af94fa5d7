"""memory_namespaces.learning: the rewards the next credit and gate steps need

Revision ID: 0004b_schedule
Revises: 0003
Create Date: 2026-12-04 09:00:00

Recording episodes in the ledger needs, at every evolution-gate check, the rewards of
the learning episodes of the last five windows, and with FCC credit the rewards of the
open window; before this revision the gate re-read every `episodes` payload of the
agent at every check (the `episodes` table has no indexable episode index). The new
nullable JSON column holds `{"agent": id, "recent": [[episode, policy, reward], ...]}`,
bounded to one gate span, read and written with the namespace row that recording
already locks.

Backfill: for every namespace with recorded episodes, the learning episodes (payload
`learned`, with a policy) of its last recording agent that the default schedule still
needs (window 10 episodes, gate span 50 episodes) are copied from the payloads, in one
streaming pass over `episodes`.
"""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0004b_schedule"
down_revision = "0004_market_bars"
branch_labels = None
depends_on = None

# The default schedule at the time of this revision (reflexmem.memory.schedule); a
# migration must not follow later code changes.
WINDOW_SIZE = 10
GATE_SPAN = 50


def _keep_from(next_episode: int) -> int:
    closed = next_episode - next_episode % WINDOW_SIZE
    return min(closed, closed + WINDOW_SIZE - GATE_SPAN)


def _backfill(conn: sa.Connection) -> None:
    counters = {
        str(ns): int(n)
        for ns, n in conn.execute(
            sa.text("SELECT namespace, next_episode FROM memory_namespaces WHERE next_episode > 0")
        )
    }
    if not counters:
        return
    last: dict[str, tuple[int, str]] = {}
    played: dict[str, list[tuple[str, int, str, float]]] = {}
    rows = conn.execute(
        sa.text(
            "SELECT agent_id, payload FROM episodes WHERE payload IS NOT NULL"
        ).execution_options(stream_results=True, yield_per=5000)
    )
    for agent, raw in rows:
        payload: Any = json.loads(raw) if isinstance(raw, str) else raw
        if not isinstance(payload, dict):
            continue
        ns, index = payload.get("namespace"), payload.get("episode")
        if ns not in counters or not isinstance(index, int):
            continue
        if ns not in last or index > last[ns][0]:
            last[ns] = (index, str(agent))
        policy = payload.get("policy")
        if payload.get("learned") and policy is not None and index >= _keep_from(counters[ns]):
            reward = float(payload["reward"])
            played.setdefault(ns, []).append((str(agent), index, str(policy), reward))
    table = sa.table(
        "memory_namespaces", sa.column("namespace", sa.String), sa.column("learning", sa.JSON)
    )
    for ns, (_, agent) in sorted(last.items()):
        recent = sorted((i, p, r) for a, i, p, r in played.get(ns, []) if a == agent)
        value = {"agent": agent, "recent": [list(t) for t in recent]}
        conn.execute(sa.update(table).where(table.c.namespace == ns).values(learning=value))


def upgrade() -> None:
    with op.batch_alter_table("memory_namespaces") as batch:
        batch.add_column(sa.Column("learning", sa.JSON(), nullable=True))
    _backfill(op.get_bind())


def downgrade() -> None:
    with op.batch_alter_table("memory_namespaces") as batch:
        batch.drop_column("learning")
