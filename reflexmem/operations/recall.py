"""Recall for an agent in active mode: the namespace's bandit picks the retrieval policy.

The agent asks for a role (and optionally a symbol, scenario, as-of time and the ID of
the decision it is about to make). The role namespace's Thompson bandit samples a
retrieval policy (reproducibly from the seed, the namespace and how many recalls it
has served), the policy decides which tiers and how many items are recalled, and the
recall is logged with the decision's ID. When that decision's case is later recorded
as an episode, its outcome credits the policy (`reflexmem.memory.role_stream`).

Only active mode has recall at all (docs/design.md §9); callers check the frozen runtime mode.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

import sqlalchemy as sa

from reflexmem.ledger.memory_models import RecallLog
from reflexmem.memory.ledger_agents import MemoryLedger
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.memory.ledger_policies import policies_on
from reflexmem.memory.policies import RetrievalPolicy
from reflexmem.operations.resources import Resources
from reflexmem.recall import RecallConstraints, RecallResult
from reflexmem.recall import recall as recall_cases

LOG = cast(sa.Table, RecallLog.__table__)


@dataclass(frozen=True)
class RecallReport:
    """One recall: the policy the bandit chose and what it returned."""

    recall_id: str
    policy: RetrievalPolicy
    result: RecallResult


def recall(
    res: Resources,
    constraints: RecallConstraints,
    query: str,
    *,
    decision_id: str | None = None,
    k: int | None = None,
    policy: str | None = None,
) -> RecallReport:
    """Recall under every constraint with the policy the bandit samples; log it.

    `k` caps the policy's top-k (it never raises it); a policy without tiers (`none`,
    the bandit's control arm) recalls nothing, which is what it is for. `policy` names
    a policy to use instead of sampling one (an experiment, or a reviewer's query); it
    is logged and credited like a sampled one.
    """
    res.registry.get(constraints.role)
    namespace = role_namespace(constraints.role)
    ledger = MemoryLedger(res.engine, seed=res.memory_seed)
    ask = _Ask(constraints, query, decision_id, k, policy)
    # One connection for the policies, the pick, the recall and its log.
    with res.engine.begin() as conn:
        found = policies_on(conn, namespace)
        if found:
            return _recall_on(conn, res, ledger, namespace, found, ask)
    # The namespace's first recall: its default policies are created, then it recalls.
    found = ledger.ensure_agent(namespace)
    with res.engine.begin() as conn:
        return _recall_on(conn, res, ledger, namespace, found, ask)


@dataclass(frozen=True)
class _Ask:
    constraints: RecallConstraints
    query: str
    decision_id: str | None
    k: int | None
    policy: str | None


LAST_STEP = sa.select(sa.func.max(LOG.c.step)).where(LOG.c.namespace == sa.bindparam("namespace"))
"""The namespace's last recall step: an index lookup (namespace, step) at any log size."""


def next_step(conn: sa.Connection, namespace: str) -> int:
    """The step of the namespace's next recall: one past its last (0 for its first)."""
    last = conn.execute(LAST_STEP, {"namespace": namespace}).scalar_one()
    return 0 if last is None else int(last) + 1


def _recall_on(
    conn: sa.Connection,
    res: Resources,
    ledger: MemoryLedger,
    namespace: str,
    policies: Sequence[RetrievalPolicy],
    ask: _Ask,
) -> RecallReport:
    known = {p.name: p for p in policies}
    if ask.policy is not None and ask.policy not in known:
        raise KeyError(f"namespace {namespace!r} has no retrieval policy {ask.policy!r}")
    recall_id = f"rc-{uuid.uuid4().hex[:20]}"
    served = next_step(conn, namespace)
    if ask.policy is None:
        chosen = ledger.select_policy_on(conn, namespace, served, known)
    else:
        chosen = known[ask.policy]
    top = chosen.top_k if ask.k is None else min(ask.k, chosen.top_k)
    result = recall_cases(
        conn, ask.constraints, ask.query, k=top, embedder=res.embedder, tiers=chosen.tiers
    )
    conn.execute(
        sa.insert(LOG).values(
            recall_id=recall_id,
            namespace=namespace,
            decision_id=ask.decision_id,
            policy=chosen.name,
            step=served,
            hits=[h.id for h in result.hits],
            as_of=ask.constraints.as_of,
            recalled_at=datetime.now(UTC),
        )
    )
    return RecallReport(recall_id, chosen, result)
