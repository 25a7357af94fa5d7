"""Isolation below the prompt: scoped storage and retrieval, and the message broker.

A module's knowledge scopes are enforced where the data is, not in what it is told:
:class:`ScopedMemory` hands each identity a :class:`ModuleMemory` that lists, reads,
retrieves and writes only namespaces within that identity's scopes, over the real
memory store and ranked retrieval of `reflexmem.memory`. :class:`Broker` is the only
way a module reaches another: per episode it opens only declared edges whose trigger
fires for the goal, checks the message against the edge's closed contract, delivers
only the edge's fields, and enforces the edge's and the episode's message budgets.
Every refusal raises :class:`IsolationRefused` and lands in the shared log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from reflexmem.ledger.enums import Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.policies import Retrieval, RetrievalPolicy, retrieve
from reflexmem.memory.store import MemoryStore, WriteResult
from reflexmem.structures.model import Structure, within
from reflexmem.structures.refusals import IsolationRefused, Refusal, RefusalKind, RefusalLog

_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
}


class NamespacedStore(MemoryStore, Protocol):
    """A memory store that can list its namespaces (the in-memory store can)."""

    def namespaces(self) -> tuple[str, ...]:
        """Every namespace holding at least one entry."""
        ...


@dataclass
class ModuleMemory:
    """One identity's view of the store: only namespaces within its scopes exist for it."""

    identity: str
    scopes: tuple[str, ...]
    store: NamespacedStore
    log: RefusalLog
    reads: list[str] = field(default_factory=list)

    def allowed(self, namespace: str) -> bool:
        """Whether `namespace` lies within one of this identity's scopes."""
        return any(within(namespace, s) for s in self.scopes)

    def _check(self, namespace: str, action: str) -> None:
        if not self.allowed(namespace):
            refusal = Refusal(
                RefusalKind.SCOPE,
                self.identity,
                namespace,
                "knowledge_scope",
                f"{action} of {namespace!r} refused: {self.identity!r} may only reach "
                f"{list(self.scopes)}",
            )
            raise IsolationRefused(self.log.add(refusal))

    def namespaces(self) -> tuple[str, ...]:
        """The namespaces this identity can see (others are not even listed)."""
        return tuple(n for n in self.store.namespaces() if self.allowed(n))

    def entries(
        self, namespace: str, tiers: Iterable[Tier] | None = None
    ) -> tuple[MemoryEntry, ...]:
        """Entries of one namespace, if it is within scope."""
        self._check(namespace, "read")
        self.reads.append(namespace)
        return self.store.entries(namespace, tiers)

    def retrieve(
        self, namespace: str, policy: RetrievalPolicy, query: str, *, now_episode: int
    ) -> Retrieval:
        """Ranked retrieval from one namespace, if it is within scope."""
        self._check(namespace, "retrieval")
        self.reads.append(namespace)
        return retrieve(self.store, namespace, policy, query, now_episode=now_episode)

    def get(self, entry_id: str) -> MemoryEntry | None:
        """One entry by ID, if it exists and its namespace is within scope."""
        entry = self.store.get(entry_id)
        if entry is not None:
            self._check(entry.namespace, "read")
            self.reads.append(entry.namespace)
        return entry

    def put(self, entry: MemoryEntry) -> WriteResult:
        """Write an entry, if its namespace is within scope."""
        self._check(entry.namespace, "write")
        return self.store.put(entry)


@dataclass
class ScopedMemory:
    """The storage layer: hands out views, never the store itself."""

    store: NamespacedStore
    grants: Mapping[str, tuple[str, ...]]
    log: RefusalLog = field(default_factory=RefusalLog)

    @classmethod
    def for_structure(
        cls, store: NamespacedStore, structure: Structure, log: RefusalLog | None = None
    ) -> ScopedMemory:
        """Grants from a structure's modules (the verifier's namespace is nobody's)."""
        grants = {m.id: m.knowledge for m in structure.modules}
        return cls(store, grants, log if log is not None else RefusalLog())

    def view(self, identity: str) -> ModuleMemory:
        """The view of `identity`; an unknown identity sees nothing."""
        return ModuleMemory(identity, tuple(self.grants.get(identity, ())), self.store, self.log)


@dataclass(frozen=True)
class Message:
    """A delivered message: only the edge's fields, plus what was dropped from the payload."""

    edge: str
    source: str
    target: str
    contract: str
    payload: Mapping[str, Any]
    dropped: tuple[str, ...] = ()


@dataclass
class Channel:
    """One episode's broker state: delivered messages and the budgets left."""

    structure: Structure
    episode: str
    subgoals: frozenset[str]
    log: RefusalLog
    delivered: list[Message] = field(default_factory=list)
    per_edge: dict[str, int] = field(default_factory=dict)

    def _refuse(self, field_: str, check: str, reason: str) -> IsolationRefused:
        refusal = Refusal(
            RefusalKind.MESSAGE,
            f"episode {self.episode}",
            field_,
            check,
            reason,
            self.structure.structure_id,
        )
        return IsolationRefused(self.log.add(refusal))

    def send(self, source: str, target: str, payload: Mapping[str, Any]) -> Message:
        """Deliver `payload` from `source` to `target`, or raise :class:`IsolationRefused`."""
        edge_id = f"{source}->{target}"
        edge = self.structure.edge_map.get(edge_id)
        if edge is None:
            raise self._refuse(edge_id, "declared_edge", f"no edge {edge_id} in the structure")
        if not edge.trigger.fires(self.subgoals):
            raise self._refuse(
                edge_id,
                "edge_trigger",
                f"{edge_id} opens on {edge.trigger}; goal is {sorted(self.subgoals)}",
            )
        limit = self.structure.limits.max_messages_per_episode
        if len(self.delivered) >= limit:
            raise self._refuse(edge_id, "episode_budget", f"episode already carried {limit}")
        if self.per_edge.get(edge_id, 0) >= edge.max_messages:
            raise self._refuse(edge_id, "edge_budget", f"{edge_id} allows {edge.max_messages}")
        types = self.structure.contract_map[edge.contract].types
        for name in edge.fields:
            if name not in payload:
                raise self._refuse(
                    f"{edge_id}.{name}", "message_schema", f"required field {name!r} missing"
                )
            value = payload[name]
            ok = _TYPES[types[name]]
            if not isinstance(value, ok) or (types[name] != "boolean" and isinstance(value, bool)):
                raise self._refuse(
                    f"{edge_id}.{name}",
                    "message_schema",
                    f"{name!r} must be {types[name]}, got {type(value).__name__}",
                )
        message = Message(
            edge_id,
            source,
            target,
            edge.contract,
            {k: payload[k] for k in edge.fields},
            tuple(sorted(set(payload) - set(edge.fields))),
        )
        self.delivered.append(message)
        self.per_edge[edge_id] = self.per_edge.get(edge_id, 0) + 1
        return message

    def inbox(self, target: str) -> tuple[Message, ...]:
        """Messages delivered to `target` so far, in order."""
        return tuple(m for m in self.delivered if m.target == target)


@dataclass
class Broker:
    """Opens one :class:`Channel` per episode over a structure's declared edges."""

    structure: Structure
    log: RefusalLog = field(default_factory=RefusalLog)

    def open(self, episode: str, subgoals: Iterable[str]) -> Channel:
        """A fresh channel for one episode and its goal."""
        return Channel(self.structure, episode, frozenset(subgoals), self.log)
