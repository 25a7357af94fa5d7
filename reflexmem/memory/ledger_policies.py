"""Policy and posterior rows of the ledger, read and written on the caller's connection.

`retrieval_policies` holds each agent's policies as data (`RetrievalPolicy.to_dict()`)
in bandit-arm order; `bandit_states` holds one Beta(alpha, beta) row per agent and
policy, with the number of observations credited (`pulls`). Both the agent API
(`MemoryLedger`) and episode recording (`ledger_episodes`) use these functions inside
their own transactions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from reflexmem.memory import bandit as bandit_fns
from reflexmem.memory.bandit import BanditState
from reflexmem.memory.ledger_mirror import BANDITS, POLICIES, from_json, now_utc
from reflexmem.memory.policies import RetrievalPolicy


def bandit_rows(conn: sa.Connection, agent_id: str) -> list[Any]:
    """The agent's `bandit_states` rows in position order."""
    return list(
        conn.execute(
            sa.select(BANDITS).where(BANDITS.c.agent_id == agent_id).order_by(BANDITS.c.position)
        ).mappings()
    )


def bandit_on(conn: sa.Connection, agent_id: str) -> BanditState:
    """The agent's posterior read on the caller's connection (arms in position order)."""
    rows = bandit_rows(conn, agent_id)
    return BanditState(
        tuple(r["policy"] for r in rows),
        tuple(r["alpha"] for r in rows),
        tuple(r["beta"] for r in rows),
    )


def policies_on(conn: sa.Connection, agent_id: str) -> tuple[RetrievalPolicy, ...]:
    """The agent's policies read on the caller's connection, in bandit-arm order."""
    rows = conn.execute(
        sa.select(POLICIES.c.spec)
        .where(POLICIES.c.agent_id == agent_id)
        .order_by(POLICIES.c.position)
    ).scalars()
    return tuple(RetrievalPolicy.from_dict(from_json(s)) for s in rows)


def insert_policies(
    conn: sa.Connection,
    agent_id: str,
    policies: Sequence[RetrievalPolicy],
    *,
    start: int,
    reasons: Sequence[str | None],
) -> None:
    """Append policies at positions ``start``... with their bandit rows at Beta(1, 1)."""
    if not policies:
        return
    now = now_utc()
    conn.execute(
        sa.insert(POLICIES),
        [
            {
                "agent_id": agent_id,
                "name": p.name,
                "position": start + i,
                "spec": p.to_dict(),
                "parent": p.parent,
                "generation": p.generation,
                "reason": reason,
                "created_at": now,
            }
            for i, (p, reason) in enumerate(zip(policies, reasons, strict=True))
        ],
    )
    conn.execute(
        sa.insert(BANDITS),
        [
            {
                "agent_id": agent_id,
                "policy": p.name,
                "position": start + i,
                "alpha": bandit_fns.PRIOR_ALPHA,
                "beta": bandit_fns.PRIOR_BETA,
                "pulls": 0,
                "updated_at": now,
            }
            for i, p in enumerate(policies)
        ],
    )


def save_bandit(
    conn: sa.Connection, agent_id: str, state: BanditState, pulls: Mapping[str, int]
) -> None:
    """Write a posterior back (one executemany over the agent's arms), adding ``pulls``."""
    conn.execute(
        sa.update(BANDITS)
        .where(BANDITS.c.agent_id == sa.bindparam("a"), BANDITS.c.policy == sa.bindparam("p"))
        .values(
            alpha=sa.bindparam("al"),
            beta=sa.bindparam("be"),
            pulls=BANDITS.c.pulls + sa.bindparam("n"),
            updated_at=now_utc(),
        ),
        [
            {"a": agent_id, "p": arm, "al": a, "be": b, "n": int(pulls.get(arm, 0))}
            for arm, a, b in zip(state.arms, state.alpha, state.beta, strict=True)
        ],
    )
