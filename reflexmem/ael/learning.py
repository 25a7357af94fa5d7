"""Registers the learning methods (`learning_variants`) with the method registry.

Importing this module makes `memory`, `ael`, `ael_no_warmup`, `ael_no_reflection` and
`ael_bandit_feedback` available to `table.run_table`. Every one is a `RuleAgent`
(`rule_agent.py`): the AEL memory loop choosing, per regime, among the fixed
allocation rules of `rules.RULE_FAMILY`. A session (a context variable, so concurrent
flows do not see each other's) carries the evidence the point-in-time guard must
judge and collects the agents built, so the runner can read their traces.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np

from reflexmem.ael.frozen import FrozenCheck
from reflexmem.ael.learning_variants import LEARNING_METHODS, VARIANTS, Variant
from reflexmem.ael.pit_guard import Evidence
from reflexmem.ael.rule_agent import RuleAgent
from reflexmem.ael.table import register_method, registered_methods

__all__ = [
    "LEARNING_METHODS",
    "VARIANTS",
    "AgentSession",
    "FrozenCheck",
    "RuleAgent",
    "Variant",
    "agent_session",
    "build_agent",
]


@dataclass
class AgentSession:
    """Per-run settings for the registered factories, and the agents they built."""

    evidence: tuple[Evidence, ...] = ()
    built: list[RuleAgent] = field(default_factory=list)


_SESSION: ContextVar[AgentSession | None] = ContextVar("ael_agent_session", default=None)


@contextmanager
def agent_session(evidence: Sequence[Evidence] = ()) -> Iterator[AgentSession]:
    """Build registered learning agents with this evidence inside the block."""
    session = AgentSession(tuple(evidence))
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


def build_agent(name: str, rng: np.random.Generator | None) -> RuleAgent:
    """Build the learning agent `name` with the active session's settings (if any)."""
    if rng is None:
        raise ValueError(f"{name} is seeded and needs a generator")
    session = _SESSION.get()
    agent = RuleAgent(rng, name, evidence=session.evidence if session is not None else ())
    if session is not None:
        session.built.append(agent)
    return agent


for _name in LEARNING_METHODS:
    if _name not in registered_methods():
        register_method(_name, functools.partial(build_agent, _name), seeded=True)
