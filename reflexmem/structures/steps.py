"""Steps and mutations: the records operators produce, and the helpers they share.

A :class:`Step` is an operator name with JSON-able arguments; a :class:`Mutation` is a
child structure with its parent(s) and steps. The helpers build a child from a parent
(every module first derives from itself; the child's ID comes from its fingerprint).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reflexmem.structures.model import Edge, Lifecycle, Module, Structure
from reflexmem.structures.refusals import Refusal, RefusalKind

RUNTIME_WEIGHT = {"function": 0, "skill-module": 1, "independent-agent": 2}


@dataclass(frozen=True)
class Step:
    """One operator application: its name and JSON-able arguments."""

    operator: str
    args: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __str__(self) -> str:
        inner = ", ".join(f"{k}={v}" for k, v in sorted(self.args.items()))
        return f"{self.operator}({inner})"

    def to_dict(self) -> dict[str, Any]:
        """Plain form for JSON, ledger rows and MLflow tags."""
        return {"operator": self.operator, "args": dict(self.args)}


@dataclass(frozen=True)
class Mutation:
    """A child with the parent(s) and the steps that produced it."""

    child: Structure
    parents: tuple[Structure, ...]
    steps: tuple[Step, ...]

    @property
    def operator(self) -> str:
        """The operators joined by `+` (one name for a single step)."""
        return "+".join(s.operator for s in self.steps)


class MutationRefused(ValueError):
    """An operator was given arguments it cannot apply."""

    def __init__(self, operator: str, arg: str, reason: str) -> None:
        self.refusal = Refusal(RefusalKind.MUTATION, operator, arg, "arguments", reason)
        super().__init__(f"{operator}: {arg}: {reason}")


def start_child(parent: Structure) -> Structure:
    """The parent as the base of a child: every module derives from itself."""
    mods = tuple(Module(**module_fields(m, (m.id,))) for m in parent.modules)
    return parent.evolve(modules=mods, parent_id=parent.structure_id)


def module_fields(m: Module, derived: tuple[str, ...], **changes: Any) -> dict[str, Any]:
    """A module's constructor arguments, with some replaced."""
    data = {
        "id": m.id,
        "handles": m.handles,
        "knowledge": m.knowledge,
        "skills": m.skills,
        "tools": m.tools,
        "effects": m.effects,
        "outputs": m.outputs,
        "runtime": m.runtime,
        "derived_from": derived,
    }
    return data | changes


def module_copy(m: Module, derived: tuple[str, ...] | None = None, **changes: Any) -> Module:
    """A copy of a module with some fields replaced."""
    return Module(**module_fields(m, derived or m.derived_from, **changes))


def finish_child(base: Structure, steps: Sequence[Step], parents: Sequence[Structure]) -> Mutation:
    """Seal a child: lifecycle `candidate`, parent named, ID from its fingerprint."""
    stem = parents[0].structure_id.split(".", 1)[0]
    draft = base.evolve(lifecycle=Lifecycle.CANDIDATE, parent_id=parents[0].structure_id)
    child = draft.evolve(structure_id=f"{stem}.{draft.fingerprint()[:10]}")
    return Mutation(child, tuple(parents), tuple(steps))


def require_module(parent: Structure, op: str, name: str, arg: str = "module") -> Module:
    """The named module, or :class:`MutationRefused`."""
    if name not in parent.module_map:
        raise MutationRefused(op, arg, f"no module {name!r} in {parent.structure_id}")
    return parent.module_map[name]


def require_edge(parent: Structure, op: str, edge: str) -> Edge:
    """The named edge, or :class:`MutationRefused`."""
    if edge not in parent.edge_map:
        raise MutationRefused(op, "edge", f"no edge {edge!r} in {parent.structure_id}")
    return parent.edge_map[edge]


def covers_replaced(s: Structure, old: str, new: Sequence[str]) -> tuple[str, ...]:
    """Verification coverage with module `old` replaced by `new`."""
    out: list[str] = []
    for name in s.verification.covers:
        for n in new if name == old else (name,):
            if n not in out:
                out.append(n)
    return tuple(out)


def redirect_edges(edges: Sequence[Edge], old: str, new: Sequence[str]) -> list[Edge]:
    """Edges touching `old` repeated for each module in `new`."""
    out: list[Edge] = []
    for e in edges:
        sources = new if e.source == old else (e.source,)
        targets = new if e.target == old else (e.target,)
        out += [
            Edge(s, t, e.contract, e.fields, e.trigger, e.max_messages)
            for s in sources
            for t in targets
            if s != t
        ]
    return out
