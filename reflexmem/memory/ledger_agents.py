"""`MemoryLedger`: the agent side of ledger memory (policies, posteriors, episodes).

Retrieval policies are data (`retrieval_policies`, in bandit-arm order), posteriors are
one `bandit_states` row per agent and policy (Beta(1, 1) for a new arm), selection is a
seeded Thompson draw that any process reproduces from (seed, agent, step), and one
freeze switch makes memory, posteriors and policies read-only. Episode recording
(:meth:`MemoryLedger.record_episodes`, implemented in `reflexmem.memory.ledger_episodes`)
applies the same learning cycle as the in-process loop.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence

import numpy as np
import sqlalchemy as sa

from reflexmem.memory import bandit as bandit_fns
from reflexmem.memory.bandit import BanditState
from reflexmem.memory.cycle import EpisodeInput
from reflexmem.memory.distill import DistillConfig, DistillReport, window_key
from reflexmem.memory.entries import FrozenError
from reflexmem.memory.ledger_episodes import RecordReport, record_batch
from reflexmem.memory.ledger_mirror import NAMESPACES, POLICIES, load_namespaces
from reflexmem.memory.ledger_policies import (
    bandit_on,
    bandit_rows,
    insert_policies,
    policies_on,
    save_bandit,
)
from reflexmem.memory.ledger_store import LedgerMemoryStore
from reflexmem.memory.merge import MergeConfig
from reflexmem.memory.policies import RetrievalPolicy, default_policies
from reflexmem.memory.schedule import LearningSchedule, closing_windows
from reflexmem.memory.store import DEFAULT_CAP, QUALITY_FLOOR


class MemoryLedger:
    """Persisted memory, policies and Thompson posteriors of agents, with one freeze switch."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        cap: int = DEFAULT_CAP,
        quality_floor: float = QUALITY_FLOOR,
        seed: int = 0,
        schedule: LearningSchedule | None = None,
    ) -> None:
        self.engine = engine
        self.store = LedgerMemoryStore(engine, cap=cap, quality_floor=quality_floor)
        self.seed = seed
        self.schedule = schedule if schedule is not None else LearningSchedule()
        self._frozen = False

    @property
    def frozen(self) -> bool:
        """Whether memory, posteriors and policies are read-only."""
        return self._frozen

    def freeze(self) -> None:
        """Make memory, posteriors and policies read-only: every write raises."""
        self._frozen = True
        self.store.freeze()

    def unfreeze(self) -> None:
        """Allow writes again."""
        self._frozen = False
        self.store.unfreeze()

    def guard(self, action: str) -> None:
        """Raise :class:`FrozenError` naming ``action`` if the ledger is frozen."""
        if self._frozen:
            raise FrozenError(f"memory ledger is frozen: {action} refused")

    # policies -------------------------------------------------------------------------

    def ensure_agent(
        self, agent_id: str, policies: Sequence[RetrievalPolicy] | None = None
    ) -> tuple[RetrievalPolicy, ...]:
        """The agent's policies, creating the defaults at Beta(1, 1) on first use."""
        existing = self.policies(agent_id)
        if existing:
            return existing
        self.guard(f"ensure_agent {agent_id!r}")
        chosen = tuple(policies) if policies is not None else default_policies()
        try:
            with self.engine.begin() as conn:
                insert_policies(conn, agent_id, chosen, start=0, reasons=[None] * len(chosen))
        except sa.exc.IntegrityError:
            # two first recalls of one agent at once: the other one created them
            existing = self.policies(agent_id)
            if existing:
                return existing
            raise
        return chosen

    def policies(self, agent_id: str) -> tuple[RetrievalPolicy, ...]:
        """The agent's policies in bandit-arm order (empty for an unknown agent)."""
        with self.engine.connect() as conn:
            return policies_on(conn, agent_id)

    def add_policy(self, agent_id: str, policy: RetrievalPolicy, reason: str) -> None:
        """Append an evolved policy as a new arm at Beta(1, 1)."""
        self.guard(f"add_policy {policy.name!r}")
        with self.engine.begin() as conn:
            n = conn.execute(
                sa.select(sa.func.count()).where(POLICIES.c.agent_id == agent_id)
            ).scalar()
            insert_policies(conn, agent_id, [policy], start=int(n or 0), reasons=[reason])

    # bandit -----------------------------------------------------------------------------

    def bandit_state(self, agent_id: str) -> BanditState:
        """The agent's posterior (arms in position order)."""
        with self.engine.connect() as conn:
            return bandit_on(conn, agent_id)

    def pulls(self, agent_id: str) -> dict[str, int]:
        """Observations credited to each arm so far (FCC: per episode, at window close)."""
        with self.engine.connect() as conn:
            return {str(r["policy"]): int(r["pulls"]) for r in bandit_rows(conn, agent_id)}

    def _rng(self, agent_id: str, step: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(agent_id.encode("utf-8")), step])

    def select_policy(self, agent_id: str, step: int | None = None) -> RetrievalPolicy:
        """Thompson-sample a policy; reproducible from (seed, agent, step).

        ``step`` defaults to the number of updates credited so far, so the same ledger
        state always gives the same pick; selecting is allowed while frozen.
        """
        policies = {p.name: p for p in self.ensure_agent(agent_id)}
        with self.engine.connect() as conn:
            at = sum(int(r["pulls"]) for r in bandit_rows(conn, agent_id)) if step is None else step
            return self.select_policy_on(conn, agent_id, at, policies)

    def select_policy_on(
        self,
        conn: sa.Connection,
        agent_id: str,
        step: int,
        policies: Mapping[str, RetrievalPolicy],
    ) -> RetrievalPolicy:
        """:meth:`select_policy` at ``step`` on the caller's connection, among ``policies``.

        A recall reads its policy, recalls and logs on one connection: each connection
        of a request costs a begin, a rollback or commit, and a pool round trip.
        """
        state = bandit_on(conn, agent_id)
        return policies[bandit_fns.select(state, self._rng(agent_id, step))]

    def save_bandit(
        self, conn: sa.Connection, agent_id: str, state: BanditState, pulls: Mapping[str, int]
    ) -> None:
        """Write a posterior back (one executemany over the agent's arms)."""
        self.guard(f"bandit update {agent_id!r}")
        save_bandit(conn, agent_id, state, pulls)

    # episodes ---------------------------------------------------------------------------

    def record_episodes(
        self,
        agent_id: str,
        namespace: str,
        episodes: Sequence[EpisodeInput],
        *,
        task_family: str = "memory",
        distill: bool = True,
    ) -> RecordReport:
        """Record settled episodes: ledger rows, episodic memory, credit, distillation, gate.

        One transaction for the batch; every episode goes through the same learning
        cycle as `LearningLoop.record_episode` (`reflexmem.memory.cycle.settle_episode`),
        so any split of a sequence into batches gives the loop's posteriors, policies,
        evolution events and distilled windows. See
        :func:`reflexmem.memory.ledger_episodes.record_batch`.
        """
        self.guard(f"record_episodes {namespace!r}")
        self.ensure_agent(agent_id)
        return record_batch(
            self.engine,
            self.store,
            self.schedule,
            agent_id,
            namespace,
            episodes,
            task_family=task_family,
            distill=distill,
        )

    # distillation -----------------------------------------------------------------------

    def due_windows(self, namespace: str) -> list[tuple[int, int]]:
        """Closed learning windows not distilled yet, oldest first.

        Recording distils every window as it closes (``distill=True``), so windows are
        only due here when they were recorded with ``distill=False``.
        """
        with self.engine.connect() as conn:
            loaded = load_namespaces(conn, [namespace], lock=False)
        done = loaded.windows.get(namespace, set())
        total = loaded.next_episode.get(namespace, 0)
        return [
            (w.start, w.end)
            for w in closing_windows(self.schedule, 0, total)
            if w.learned and window_key(namespace, w.start, w.end) not in done
        ]

    def namespaces_due(self) -> dict[str, list[tuple[int, int]]]:
        """Every namespace with at least one closed learning window left to distil."""
        with self.engine.connect() as conn:
            names = [str(n) for n in conn.execute(sa.select(NAMESPACES.c.namespace)).scalars()]
        due = {ns: self.due_windows(ns) for ns in sorted(names)}
        return {ns: w for ns, w in due.items() if w}

    def distill_due(self, config: DistillConfig | MergeConfig | None = None) -> list[DistillReport]:
        """Distil every due window of every namespace (idempotent by window key).

        ``config`` defaults to the schedule's distillation thresholds.
        """
        cfg = config if config is not None else self.schedule.distill
        reports: list[DistillReport] = []
        for ns, windows in self.namespaces_due().items():
            reports += self.store.distill(ns, windows, cfg)
        return reports
