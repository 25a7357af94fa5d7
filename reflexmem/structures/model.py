"""Structure G as immutable values: modules, edges, contracts, verification, limits, pins.

A structure is data, never code: the router, the broker and the executor read it, and
the mutation operators return new values instead of editing one in place, so a frozen
parent stays exactly what was evaluated. `fingerprint()` hashes only what changes
behaviour (not the ID, parent or lifecycle), which is how the search recognises the
same graph reached along two different paths and how experiment B names its winner.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import cached_property
from typing import Any

import yaml


class Lifecycle(StrEnum):
    """The states a structure version moves through (the skill lifecycle's, plus retired)."""

    CANDIDATE = "candidate"
    VALIDATING = "validating"
    LIMITED = "limited"
    ACTIVE = "active"
    QUARANTINED = "quarantined"
    RETIRED = "retired"


def within(namespace: str, scope: str) -> bool:
    """Whether `namespace` is `scope` itself or lies below it (`docs/rare` within `docs`)."""
    return namespace == scope or namespace.startswith(scope + "/")


def domain(namespace: str) -> str:
    """The knowledge area a namespace belongs to: its first path segment."""
    return namespace.split("/", 1)[0]


@dataclass(frozen=True)
class Trigger:
    """When an edge opens: always, or when the goal requires every listed sub-goal."""

    all_of: frozenset[str] = frozenset()

    @property
    def always(self) -> bool:
        """An unconditional edge."""
        return not self.all_of

    def fires(self, subgoals: Iterable[str]) -> bool:
        """Whether the edge opens for a goal made of `subgoals`."""
        return self.all_of <= frozenset(subgoals)

    def at_least_as_narrow_as(self, other: Trigger) -> bool:
        """True if this trigger never fires where `other` does not (a conjunction superset)."""
        return other.all_of <= self.all_of

    def to_data(self) -> Any:
        """YAML form: the string `always` or `{all_of: [...]}`."""
        return "always" if self.always else {"all_of": sorted(self.all_of)}

    @classmethod
    def from_data(cls, data: Any) -> Trigger:
        """Parse the YAML form (already schema-validated)."""
        if data == "always":
            return cls()
        return cls(frozenset(str(s) for s in data["all_of"]))

    def __str__(self) -> str:
        return "always" if self.always else "all_of(" + ",".join(sorted(self.all_of)) + ")"


@dataclass(frozen=True)
class Edge:
    """An allowed, directed message path with its contract, fields, trigger and budget."""

    source: str
    target: str
    contract: str
    fields: tuple[str, ...]
    trigger: Trigger = Trigger()
    max_messages: int = 1

    @property
    def id(self) -> str:
        """`source->target`; a structure holds at most one edge per ordered pair."""
        return f"{self.source}->{self.target}"

    def to_data(self) -> dict[str, Any]:
        """YAML form."""
        return {
            "from": self.source,
            "to": self.target,
            "trigger": self.trigger.to_data(),
            "message_schema": self.contract,
            "fields": list(self.fields),
            "max_messages": self.max_messages,
        }


@dataclass(frozen=True)
class Contract:
    """A message schema: field name -> type; `closed` means no other field may travel."""

    name: str
    fields: tuple[tuple[str, str], ...]
    closed: bool = True

    @cached_property
    def types(self) -> dict[str, str]:
        """Field name -> declared type."""
        return dict(self.fields)

    def to_data(self) -> dict[str, Any]:
        """YAML form."""
        return {"closed": self.closed, "fields": dict(self.fields)}


@dataclass(frozen=True)
class Module:
    """A module: what it handles, what it may read, which tools and effects it holds.

    `derived_from` names the parent-structure modules this one descends from (itself
    when unchanged); the no-widening check compares against exactly those.
    """

    id: str
    handles: tuple[str, ...]
    knowledge: tuple[str, ...]
    skills: tuple[str, ...]
    tools: tuple[str, ...] = ()
    effects: tuple[str, ...] = ()
    outputs: tuple[tuple[str, str], ...] = ()
    runtime: str = "skill-module"
    derived_from: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.derived_from:
            object.__setattr__(self, "derived_from", (self.id,))

    @cached_property
    def output_types(self) -> dict[str, str]:
        """Output field -> type."""
        return dict(self.outputs)

    def areas(self) -> frozenset[str]:
        """The knowledge areas activating this module loads."""
        return frozenset(domain(n) for n in self.knowledge)

    def to_data(self) -> dict[str, Any]:
        """YAML form (`derived_from` only when it is not just the module itself)."""
        data: dict[str, Any] = {
            "handles": list(self.handles),
            "knowledge": list(self.knowledge),
            "skills": list(self.skills),
            "allowed_tools": list(self.tools),
            "effects": list(self.effects),
            "outputs": dict(self.outputs),
            "runtime": self.runtime,
        }
        if self.derived_from != (self.id,):
            data["derived_from"] = list(self.derived_from)
        return data


@dataclass(frozen=True)
class Verification:
    """The independent verification path: verifier, its ground-truth namespace, coverage."""

    verifier: str
    namespace: str
    covers: tuple[str, ...]
    error_channel: str

    def to_data(self) -> dict[str, Any]:
        """YAML form."""
        return {
            "verifier": self.verifier,
            "namespace": self.namespace,
            "covers": list(self.covers),
            "error_channel": self.error_channel,
        }


@dataclass(frozen=True)
class Limits:
    """How many modules one cycle may join, and how many messages one episode may carry."""

    max_cycle_modules: int = 0
    max_messages_per_episode: int = 8


@dataclass(frozen=True)
class Pins:
    """Skill ID -> pinned version, and the pinned knowledge-index version."""

    skills: tuple[tuple[str, str], ...]
    index: str

    @cached_property
    def versions(self) -> dict[str, str]:
        """Skill ID -> version string."""
        return dict(self.skills)


@dataclass(frozen=True)
class Structure:
    """Structure G: modules V, edges E, scopes K, contracts C, triggers T, fallback F."""

    structure_id: str
    parent_id: str | None
    lifecycle: Lifecycle
    modules: tuple[Module, ...]
    edges: tuple[Edge, ...]
    contracts: tuple[Contract, ...]
    fallback: str
    verification: Verification
    limits: Limits
    pins: Pins
    description: str = field(default="", compare=False)

    @cached_property
    def module_map(self) -> dict[str, Module]:
        """Module ID -> module."""
        return {m.id: m for m in self.modules}

    @cached_property
    def edge_map(self) -> dict[str, Edge]:
        """Edge ID -> edge."""
        return {e.id: e for e in self.edges}

    @cached_property
    def contract_map(self) -> dict[str, Contract]:
        """Contract name -> contract."""
        return {c.name: c for c in self.contracts}

    @cached_property
    def handler_of(self) -> dict[str, str]:
        """Sub-goal -> the module that handles it."""
        return {g: m.id for m in self.modules for g in m.handles}

    def outgoing(self, module: str) -> tuple[Edge, ...]:
        """Edges leaving `module`, in declaration order."""
        return tuple(e for e in self.edges if e.source == module)

    def to_data(self) -> dict[str, Any]:
        """The YAML document as plain data (key order is the schema's)."""
        data: dict[str, Any] = {
            "structure_id": self.structure_id,
            "parent_id": self.parent_id,
            "lifecycle": self.lifecycle.value,
        }
        if self.description:
            data["description"] = self.description
        data |= {
            "modules": {m.id: m.to_data() for m in self.modules},
            "edges": [e.to_data() for e in self.edges],
            "contracts": {c.name: c.to_data() for c in self.contracts},
            "fallback": self.fallback,
            "verification": self.verification.to_data(),
            "limits": {
                "max_cycle_modules": self.limits.max_cycle_modules,
                "max_messages_per_episode": self.limits.max_messages_per_episode,
            },
            "pins": {"skills": dict(self.pins.skills), "index": self.pins.index},
        }
        return data

    def to_yaml(self) -> str:
        """Serialise as YAML (what is stored, registered and loaded back)."""
        return yaml.safe_dump(self.to_data(), sort_keys=False, allow_unicode=True)

    def fingerprint(self) -> str:
        """SHA-256 of everything that changes behaviour (not ID, parent, lifecycle, text)."""
        data = self.to_data()
        for key in ("structure_id", "parent_id", "lifecycle", "description"):
            data.pop(key, None)
        for module in data["modules"].values():
            module.pop("derived_from", None)
        data["edges"] = sorted(data["edges"], key=lambda e: (e["from"], e["to"]))
        blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def edge_signature(self) -> frozenset[tuple[str, str, str]]:
        """(source, target, trigger) of every edge: the graph without its payloads."""
        return frozenset((e.source, e.target, str(e.trigger)) for e in self.edges)

    def evolve(self, **changes: Any) -> Structure:
        """A copy with some fields replaced (operators build children this way)."""
        return replace(self, **changes)


def structure_from_data(data: Mapping[str, Any]) -> Structure:
    """Build a :class:`Structure` from a schema-valid document."""
    modules = tuple(
        Module(
            id=str(mid),
            handles=tuple(m["handles"]),
            knowledge=tuple(m["knowledge"]),
            skills=tuple(m["skills"]),
            tools=tuple(m.get("allowed_tools", ())),
            effects=tuple(m.get("effects", ())),
            outputs=tuple((str(k), str(v)) for k, v in m.get("outputs", {}).items()),
            runtime=str(m.get("runtime", "skill-module")),
            derived_from=tuple(m.get("derived_from", ())),
        )
        for mid, m in data["modules"].items()
    )
    edges = tuple(
        Edge(
            source=str(e["from"]),
            target=str(e["to"]),
            contract=str(e["message_schema"]),
            fields=tuple(e["fields"]),
            trigger=Trigger.from_data(e.get("trigger", "always")),
            max_messages=int(e.get("max_messages", 1)),
        )
        for e in data["edges"]
    )
    contracts = tuple(
        Contract(
            name=str(name),
            fields=tuple((str(k), str(v)) for k, v in c["fields"].items()),
            closed=bool(c.get("closed", False)),
        )
        for name, c in data["contracts"].items()
    )
    v = data["verification"]
    limits = data["limits"]
    pins = data["pins"]
    return Structure(
        structure_id=str(data["structure_id"]),
        parent_id=None if data.get("parent_id") is None else str(data["parent_id"]),
        lifecycle=Lifecycle(data["lifecycle"]),
        modules=modules,
        edges=edges,
        contracts=contracts,
        fallback=str(data["fallback"]),
        verification=Verification(
            verifier=str(v["verifier"]),
            namespace=str(v["namespace"]),
            covers=tuple(v["covers"]),
            error_channel=str(v["error_channel"]),
        ),
        limits=Limits(
            max_cycle_modules=int(limits["max_cycle_modules"]),
            max_messages_per_episode=int(limits["max_messages_per_episode"]),
        ),
        pins=Pins(
            skills=tuple((str(k), str(val)) for k, val in pins["skills"].items()),
            index=str(pins["index"]),
        ),
        description=str(data.get("description", "")),
    )
