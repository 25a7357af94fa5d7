"""Recording a batch of episodes in the ledger, through the one learning cycle.

:func:`record_batch` loads, in one transaction, the namespace into an in-memory mirror
(its row locked on PostgreSQL), the agent's policies and posterior, and the namespace's
pending learning state (``memory_namespaces.learning``: the rewards the open window's
FCC credit and the next gate checks need, at most one gate span). It then runs every
episode through :func:`reflexmem.memory.cycle.settle_episode`, the function
`LearningLoop.record_episode` calls, and writes back: the `episodes` rows and the
memory diff in bulk, evolved policies, the posterior, the learning state. Nothing is
re-read per gate check, so a batch costs O(n) whatever the history before it, and any
split of a sequence into batches gives the same result as the loop.

A namespace learns for one agent (as a `LearningLoop` does): the first agent that
records into it owns its windows, its FCC credit and its gate; another agent recording
into it is refused with ValueError.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import bulk_insert
from reflexmem.memory.cycle import (
    EpisodeInput,
    EvolutionEvent,
    LearningState,
    Settled,
    settle_episode,
)
from reflexmem.memory.distill import DistillReport, window_key
from reflexmem.memory.ledger_mirror import EPISODES, now_utc
from reflexmem.memory.ledger_policies import bandit_on, insert_policies, policies_on, save_bandit
from reflexmem.memory.ledger_store import LedgerMemoryStore
from reflexmem.memory.schedule import LearningSchedule, Played
from reflexmem.memory.store import MemoryStore


@dataclass(frozen=True, slots=True)
class RecordReport:
    """What recording a batch of episodes changed.

    ``bandit_updates``: observations credited per arm (uniform: one per learning
    episode; FCC: per learning episode of each window that closed in the batch).
    ``windows_closed``: keys of every window the batch closed, warm-up ones included;
    ``distilled``: the distillation of each closed learning window; ``events``: the
    policies the evolution gate added, in order (``evolved`` and ``evolution_reasons``
    repeat their names and reasons).
    """

    namespace: str
    agent_id: str
    first_episode: int
    episodes: int
    stored: int
    refused: tuple[tuple[str, str], ...]
    bandit_updates: dict[str, int]
    windows_closed: tuple[str, ...]
    evolved: tuple[str, ...] = ()
    evolution_reasons: tuple[str, ...] = ()
    events: tuple[EvolutionEvent, ...] = ()
    distilled: tuple[DistillReport, ...] = field(default=())


def learning_from_json(value: Any, namespace: str, agent_id: str) -> tuple[Played, ...]:
    """The pending rewards stored for ``namespace``; ValueError if another agent owns it."""
    if value is None:
        return ()
    owner = str(value["agent"])
    if owner != agent_id:
        raise ValueError(
            f"namespace {namespace!r} learns for agent {owner!r}; "
            f"recording episodes of agent {agent_id!r} into it is refused"
        )
    return tuple(Played(int(i), str(p), float(r)) for i, p, r in value["recent"])


def learning_to_json(agent_id: str, recent: Sequence[Played]) -> dict[str, Any]:
    """The JSON form of ``memory_namespaces.learning`` (floats round-trip exactly)."""
    return {"agent": agent_id, "recent": [[p.episode, p.policy, p.reward] for p in recent]}


def _settle_all(
    schedule: LearningSchedule,
    store: MemoryStore,
    namespace: str,
    state: LearningState,
    first: int,
    episodes: Sequence[EpisodeInput],
    distill: bool,
) -> tuple[LearningState, list[Settled]]:
    steps: list[Settled] = []
    for i, episode in enumerate(episodes):
        try:
            state, step = settle_episode(
                schedule, store, namespace, state, first + i, episode, distill=distill
            )
        except KeyError as exc:
            raise KeyError(
                f"episode {i} of the batch (index {first + i} of {namespace!r}): {exc.args[0]}"
            ) from exc
        except ValueError as exc:
            raise ValueError(
                f"episode {i} of the batch (index {first + i} of {namespace!r}): {exc}"
            ) from exc
        steps.append(step)
    return state, steps


def _episode_rows(
    agent_id: str,
    namespace: str,
    task_family: str,
    episodes: Sequence[EpisodeInput],
    steps: Sequence[Settled],
    now: datetime,
) -> pl.DataFrame:
    records = [s.record for s in steps]
    payload = pl.DataFrame(
        {
            "namespace": [namespace] * len(records),
            "episode": [r.episode for r in records],
            "policy": pl.Series([r.policy for r in records], dtype=pl.String),
            "reward": pl.Series([r.reward for r in records], dtype=pl.Float64),
            "learned": pl.Series([r.learned for r in records], dtype=pl.Boolean),
        }
    ).select(pl.struct(pl.all()).struct.json_encode().alias("payload"))
    ids = [
        e.episode_id or f"ep:{namespace}:{r.episode}"
        for e, r in zip(episodes, records, strict=True)
    ]
    return pl.DataFrame(
        {
            "episode_id": ids,
            "agent_id": [agent_id] * len(records),
            "namespace": [namespace] * len(records),
            "episode_index": pl.Series([r.episode for r in records], dtype=pl.Int64),
            "case_id": pl.Series([e.case_id for e in episodes], dtype=pl.String),
            "decision_id": pl.Series([e.decision_id for e in episodes], dtype=pl.String),
            "quality": pl.Series([e.quality for e in episodes], dtype=pl.Float64),
            "task_family": [task_family] * len(records),
            "outcome": pl.Series([r.outcome for r in records], dtype=pl.Float64),
            "payload": payload["payload"],
            "recorded_at": pl.Series([now] * len(records), dtype=pl.Datetime("us", "UTC")),
        }
    )


def _sum_counts(steps: Sequence[Settled]) -> dict[str, int]:
    total: dict[str, int] = {}
    for step in steps:
        credited: Mapping[str, int] = step.credited
        for arm, n in credited.items():
            total[arm] = total.get(arm, 0) + n
    return total


def record_batch(
    engine: sa.Engine,
    store: LedgerMemoryStore,
    schedule: LearningSchedule,
    agent_id: str,
    namespace: str,
    episodes: Sequence[EpisodeInput],
    *,
    task_family: str = "memory",
    distill: bool = True,
) -> RecordReport:
    """Record ``episodes`` as the next episodes of ``namespace``, for ``agent_id``.

    The agent's policies must exist (`MemoryLedger.ensure_agent`). One transaction: an
    unknown policy or a non-finite outcome raises (naming the episode) and writes
    nothing. ``distill=False`` leaves closed learning windows due for
    `MemoryLedger.distill_due` instead of distilling them in the batch.
    """
    now = now_utc()
    with engine.begin() as conn:
        with store.mirror(conn, [namespace]) as m:
            first = m.next_episode.get(namespace, 0)
            recent = learning_from_json(m.learning.get(namespace), namespace, agent_id)
            start = LearningState(
                bandit_on(conn, agent_id), policies_on(conn, agent_id), recent
            ).checked()
            state, steps = _settle_all(
                schedule, m.store, namespace, start, first, episodes, distill
            )
            m.next_episode[namespace] = first + len(episodes)
            m.learning[namespace] = learning_to_json(agent_id, state.recent)
        if steps:
            frame = _episode_rows(agent_id, namespace, task_family, episodes, steps, now)
            bulk_insert(conn, EPISODES.name, frame)
        events = tuple(s.evolution for s in steps if s.evolution is not None)
        arms = len(start.policies)
        insert_policies(
            conn, agent_id, state.policies[arms:], start=arms, reasons=[e.reason for e in events]
        )
        counts = _sum_counts(steps)
        if counts or events:
            save_bandit(conn, agent_id, state.bandit, counts)
    writes = [s.write for s in steps]
    return RecordReport(
        namespace=namespace,
        agent_id=agent_id,
        first_episode=first,
        episodes=len(steps),
        stored=sum(w.stored for w in writes),
        refused=tuple((w.entry_id, w.reason or "") for w in writes if not w.stored),
        bandit_updates=counts,
        windows_closed=tuple(
            window_key(namespace, s.window.start, s.window.end)
            for s in steps
            if s.window is not None
        ),
        evolved=tuple(e.policy.name for e in events),
        evolution_reasons=tuple(e.reason for e in events),
        events=events,
        distilled=tuple(s.distill for s in steps if s.distill is not None),
    )
