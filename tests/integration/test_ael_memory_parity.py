"""The benchmark's learner is the cycle's: the AEL agent's memory, replayed into the ledger.

The AEL reference agent learns through `LearningLoop` on an in-process store; the cycle
learns through `MemoryLedger.record_episodes` on the ledger. Fed the same episodes (every
episode the agent wrote in one regime's namespace, with the policy it played or none),
both must hold the same entries (episodes, pattern and rule versions with their figures
and states) and the same posterior, exactly: there is one learner, whichever path runs it.
"""

from __future__ import annotations

import numpy as np
import sqlalchemy as sa

from reflexmem.ael.environment import MarketEnvironment
from reflexmem.ael.learning import RuleAgent
from reflexmem.ael.splits import split_by_fractions
from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.ledger_agents import MemoryLedger
from reflexmem.synth import drift_panel

AGENT = "ael-reference"


def _by_id(entries: tuple[MemoryEntry, ...]) -> list[MemoryEntry]:
    return sorted(entries, key=lambda e: e.id)


def test_the_ledger_learns_from_the_agents_episodes_exactly_what_the_agent_learned(
    engine: sa.Engine,
) -> None:
    panel = drift_panel(3000, 10, spread=0.002, seed=0)
    agent = RuleAgent(np.random.default_rng(0), "ael")
    MarketEnvironment(panel).run_splits(tuple(split_by_fractions(panel.n_bars)), agent)
    confirmed = {c.split(":arm:")[0] for r in agent.reflections for c in r["confirmed"]}
    namespace = sorted(ns.removeprefix("proc:") for ns in confirmed)[0]
    loop = next(loop for loop in agent.loops if loop.namespace == namespace)
    episodes = agent.written[namespace]
    assert len(episodes) == loop.episode > agent.store.cap  # eviction is exercised too

    ledger = MemoryLedger(engine, schedule=agent.schedule)
    ledger.ensure_agent(AGENT)
    for start in range(0, len(episodes), 400):
        ledger.record_episodes(AGENT, namespace, episodes[start : start + 400])

    ours = _by_id(agent.store.entries(namespace))
    theirs = _by_id(ledger.store.entries(namespace))
    assert [e.id for e in theirs] == [e.id for e in ours]
    assert theirs == ours
    rules = [e for e in theirs if e.tier is Tier.PROCEDURAL and e.state is EntryState.ACTIVE]
    assert rules, "a confirmed rule is among what both hold"
    state = ledger.bandit_state(AGENT)
    assert state.arms == loop.bandit_state.arms
    assert state.alpha == loop.bandit_state.alpha  # exactly, not approximately
    assert state.beta == loop.bandit_state.beta
