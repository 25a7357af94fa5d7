"""Mutation operators: pure functions from a parent structure to a recorded child.

Each operator returns a :class:`Mutation`: the child (lifecycle `candidate`, its parent
named, an ID derived from its fingerprint), the parent(s) and the step (operator and
arguments, JSON-able) that made it, so any child can be rebuilt from its lineage with
:func:`replay_steps`. An operator refuses arguments that do not make sense (an unknown
module, an edge that is not there) with :class:`MutationRefused`; whether a child is
*allowed* is not its business: :func:`checked` runs the static checks on it, and a
widening child is refused there, with the operator named as the source.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reflexmem.structures.checks import static_checks
from reflexmem.structures.model import Contract, Edge, Lifecycle, Module, Pins, Structure, Trigger
from reflexmem.structures.refusals import Refusal, RefusalKind, StructureRefused

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


def _start(parent: Structure) -> Structure:
    """The parent as the base of a child: every module derives from itself."""
    mods = tuple(Module(**_fields(m, (m.id,))) for m in parent.modules)
    return parent.evolve(modules=mods, parent_id=parent.structure_id)


def _fields(m: Module, derived: tuple[str, ...], **changes: Any) -> dict[str, Any]:
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


def _mod(m: Module, derived: tuple[str, ...] | None = None, **changes: Any) -> Module:
    return Module(**_fields(m, derived or m.derived_from, **changes))


def _finish(
    base: Structure, steps: Sequence[Step], parents: Sequence[Structure]
) -> Mutation:
    stem = parents[0].structure_id.split(".", 1)[0]
    draft = base.evolve(lifecycle=Lifecycle.CANDIDATE, parent_id=parents[0].structure_id)
    child = draft.evolve(structure_id=f"{stem}.{draft.fingerprint()[:10]}")
    return Mutation(child, tuple(parents), tuple(steps))


def _module(parent: Structure, op: str, name: str, arg: str = "module") -> Module:
    if name not in parent.module_map:
        raise MutationRefused(op, arg, f"no module {name!r} in {parent.structure_id}")
    return parent.module_map[name]


def _edge(parent: Structure, op: str, edge: str) -> Edge:
    if edge not in parent.edge_map:
        raise MutationRefused(op, "edge", f"no edge {edge!r} in {parent.structure_id}")
    return parent.edge_map[edge]


def _covers(s: Structure, old: str, new: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for name in s.verification.covers:
        for n in new if name == old else (name,):
            if n not in out:
                out.append(n)
    return tuple(out)


def _redirect(edges: Sequence[Edge], old: str, new: Sequence[str]) -> list[Edge]:
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


def delete_edge(parent: Structure, edge: str) -> Mutation:
    """Remove one edge (the counterfactual removal experiment)."""
    _edge(parent, "delete_edge", edge)
    base = _start(parent)
    base = base.evolve(edges=tuple(e for e in base.edges if e.id != edge))
    return _finish(base, [Step("delete_edge", {"edge": edge})], [parent])


def conditionalize_edge(parent: Structure, edge: str, all_of: Sequence[str]) -> Mutation:
    """Give an edge a trigger: it opens only when the goal requires all of `all_of`."""
    old = _edge(parent, "conditionalize_edge", edge)
    if not all_of:
        raise MutationRefused("conditionalize_edge", "all_of", "a condition needs a sub-goal")
    new = Edge(
        old.source,
        old.target,
        old.contract,
        old.fields,
        Trigger(frozenset(all_of)),
        old.max_messages,
    )
    base = _start(parent)
    base = base.evolve(edges=tuple(new if e.id == edge else e for e in base.edges))
    step = Step("conditionalize_edge", {"edge": edge, "all_of": sorted(all_of)})
    return _finish(base, [step], [parent])


def add_edge(
    parent: Structure,
    source: str,
    target: str,
    fields: Sequence[str],
    contract: str,
    *,
    all_of: Sequence[str] = (),
    max_messages: int = 1,
    contract_fields: Mapping[str, str] | None = None,
) -> Mutation:
    """Open a new edge; a new contract is declared (closed) from `contract_fields`."""
    op = "add_edge"
    _module(parent, op, source, "source")
    _module(parent, op, target, "target")
    if f"{source}->{target}" in parent.edge_map:
        raise MutationRefused(op, "target", f"edge {source}->{target} already exists")
    if max_messages < 1:
        raise MutationRefused(op, "max_messages", "must be at least 1")
    contracts = parent.contracts
    if contract not in parent.contract_map:
        if not contract_fields:
            raise MutationRefused(op, "contract", f"unknown contract {contract!r}")
        contracts += (Contract(contract, tuple(sorted(contract_fields.items())), closed=True),)
    edge = Edge(source, target, contract, tuple(fields), Trigger(frozenset(all_of)), max_messages)
    base = _start(parent).evolve(edges=(*parent.edges, edge), contracts=contracts)
    args: dict[str, Any] = {
        "source": source,
        "target": target,
        "fields": list(fields),
        "contract": contract,
        "all_of": sorted(all_of),
        "max_messages": max_messages,
    }
    if contract_fields:
        args["contract_fields"] = dict(sorted(contract_fields.items()))
    return _finish(base, [Step(op, args)], [parent])


def narrow_scope(parent: Structure, module: str, knowledge: Sequence[str]) -> Mutation:
    """Replace a module's knowledge scopes (the checks refuse anything not narrower)."""
    m = _module(parent, "narrow_scope", module)
    base = _start(parent)
    mods = tuple(_mod(x, knowledge=tuple(knowledge)) if x.id == m.id else x for x in base.modules)
    step = Step("narrow_scope", {"module": module, "knowledge": list(knowledge)})
    return _finish(base.evolve(modules=mods), [step], [parent])


def split(parent: Structure, module: str, parts: Mapping[str, Mapping[str, Any]]) -> Mutation:
    """Cut a module along a partition of its sub-goals into two or more modules.

    `parts` maps each new module ID to `{"handles": [...]}` plus optional `knowledge`,
    `skills` and `allowed_tools` (default: the module's own). Edges touching the module
    are repeated for every part; the verification covers every part.
    """
    op = "split"
    m = _module(parent, op, module)
    if len(parts) < 2:
        raise MutationRefused(op, "parts", "a split needs at least two parts")
    handled = [g for p in parts.values() for g in p.get("handles", ())]
    if sorted(handled) != sorted(m.handles):
        raise MutationRefused(op, "parts", f"handles must partition {sorted(m.handles)}")
    clash = sorted(set(parts) & (set(parent.module_map) - {module}))
    if clash:
        raise MutationRefused(op, "parts", f"module(s) {', '.join(clash)} already exist")
    base = _start(parent)
    new = [
        _mod(
            m,
            (module,),
            id=pid,
            handles=tuple(p["handles"]),
            knowledge=tuple(p.get("knowledge", m.knowledge)),
            skills=tuple(p.get("skills", m.skills)),
            tools=tuple(p.get("allowed_tools", m.tools)),
        )
        for pid, p in parts.items()
    ]
    mods = tuple(x for x in base.modules if x.id != module) + tuple(new)
    edges = tuple(_redirect(base.edges, module, list(parts)))
    v = base.verification
    ver = type(v)(v.verifier, v.namespace, _covers(base, module, list(parts)), v.error_channel)
    step = Step(op, {"module": module, "parts": {k: dict(p) for k, p in parts.items()}})
    return _finish(base.evolve(modules=mods, edges=edges, verification=ver), [step], [parent])


def merge(parent: Structure, modules: Sequence[str], new_id: str) -> Mutation:
    """Join two or more modules into one holding the union of their grants."""
    op = "merge"
    if len(set(modules)) < 2:
        raise MutationRefused(op, "modules", "a merge needs two different modules")
    ms = [_module(parent, op, name, "modules") for name in modules]
    if new_id in parent.module_map and new_id not in modules:
        raise MutationRefused(op, "new_id", f"module {new_id!r} already exists")
    outputs: dict[str, str] = {}
    for x in ms:
        for k, t in x.outputs:
            if outputs.setdefault(k, t) != t:
                raise MutationRefused(op, "modules", f"output {k!r} has two types")

    def union(attr: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for x in ms for v in getattr(x, attr)))

    heaviest = max((x.runtime for x in ms), key=lambda r: RUNTIME_WEIGHT.get(r, 1))
    joined = Module(
        new_id,
        union("handles"),
        union("knowledge"),
        union("skills"),
        union("tools"),
        union("effects"),
        tuple(outputs.items()),
        heaviest,
        tuple(modules),
    )
    names = set(modules)
    base = _start(parent)
    edges: list[Edge] = []
    for e in base.edges:
        if e.source in names and e.target in names:
            continue
        s = new_id if e.source in names else e.source
        t = new_id if e.target in names else e.target
        if any(x.id == f"{s}->{t}" for x in edges):
            raise MutationRefused(op, "modules", f"edges collide on {s}->{t}")
        edges.append(Edge(s, t, e.contract, e.fields, e.trigger, e.max_messages))
    mods = tuple(x for x in base.modules if x.id not in names) + (joined,)
    v = base.verification
    covers = tuple(dict.fromkeys(new_id if c in names else c for c in v.covers))
    ver = type(v)(v.verifier, v.namespace, covers, v.error_channel)
    step = Step(op, {"modules": list(modules), "new_id": new_id})
    return _finish(
        base.evolve(modules=mods, edges=tuple(edges), verification=ver), [step], [parent]
    )


def specialize(
    parent: Structure,
    module: str,
    subgoal: str,
    new_id: str,
    *,
    knowledge: Sequence[str] | None = None,
    allowed_tools: Sequence[str] | None = None,
) -> Mutation:
    """Carve a specialist for one sub-goal out of a module; the generalist keeps the rest."""
    op = "specialize"
    m = _module(parent, op, module)
    if subgoal not in m.handles:
        raise MutationRefused(op, "subgoal", f"{module!r} does not handle {subgoal!r}")
    if len(m.handles) < 2:
        raise MutationRefused(op, "subgoal", f"{module!r} would be left with nothing; split it")
    if new_id in parent.module_map:
        raise MutationRefused(op, "new_id", f"module {new_id!r} already exists")
    base = _start(parent)
    spec = _mod(
        m,
        (module,),
        id=new_id,
        handles=(subgoal,),
        knowledge=tuple(knowledge if knowledge is not None else m.knowledge),
        tools=tuple(allowed_tools if allowed_tools is not None else m.tools),
    )
    rest = tuple(g for g in m.handles if g != subgoal)
    mods = tuple(_mod(x, handles=rest) if x.id == module else x for x in base.modules) + (spec,)
    extra = [e for e in _redirect(base.edges, module, [module, new_id]) if new_id in e.id]
    v = base.verification
    ver = type(v)(v.verifier, v.namespace, (*v.covers, new_id), v.error_channel)
    args: dict[str, Any] = {"module": module, "subgoal": subgoal, "new_id": new_id}
    if knowledge is not None:
        args["knowledge"] = list(knowledge)
    if allowed_tools is not None:
        args["allowed_tools"] = list(allowed_tools)
    child = base.evolve(modules=mods, edges=(*base.edges, *extra), verification=ver)
    return _finish(child, [Step(op, args)], [parent])


def recombine(first: Structure, second: Structure, modules: Sequence[str]) -> Mutation:
    """`first` with `modules` (and their edges) taken from `second`; both are parents."""
    op = "recombine"
    for name in modules:
        _module(second, op, name, "modules")
    names = set(modules)
    base = _start(first)
    taken = tuple(_mod(second.module_map[n], (n,)) for n in modules)
    mods = tuple(x for x in base.modules if x.id not in names) + taken
    ids = {m.id for m in mods}
    keep = [e for e in base.edges if not ({e.source, e.target} & names)]
    bring = [
        e
        for e in second.edges
        if {e.source, e.target} & names and e.source in ids and e.target in ids
    ]
    contracts = dict(base.contract_map)
    for e in bring:
        c = second.contract_map.get(e.contract)
        if c is not None and contracts.setdefault(c.name, c) != c:
            raise MutationRefused(op, "modules", f"contract {c.name!r} differs between parents")
    v = base.verification
    covers = tuple(dict.fromkeys((*v.covers, *(m.id for m in taken))))
    ver = type(v)(v.verifier, v.namespace, covers, v.error_channel)
    child = base.evolve(
        modules=mods,
        edges=tuple(keep + bring),
        contracts=tuple(contracts.values()),
        verification=ver,
    )
    step = Step(op, {"other": second.structure_id, "modules": list(modules)})
    return _finish(child, [step], [first, second])


def repin(
    parent: Structure, skills: Mapping[str, str] | None = None, index: str | None = None
) -> Mutation:
    """New pinned skill or index versions (a bundle change, not a search operator)."""
    pins = Pins(
        tuple(sorted({**parent.pins.versions, **(skills or {})}.items())),
        index or parent.pins.index,
    )
    args: dict[str, Any] = {"skills": dict(skills or {}), "index": index}
    return _finish(_start(parent).evolve(pins=pins), [Step("repin", args)], [parent])


OPERATORS: dict[str, Callable[..., Mutation]] = {
    "split": split,
    "merge": merge,
    "narrow_scope": narrow_scope,
    "delete_edge": delete_edge,
    "add_edge": add_edge,
    "conditionalize_edge": conditionalize_edge,
    "specialize": specialize,
    "recombine": recombine,
}
"""The eight search operators of SPEC 6 by name (`repin` is a bundle change)."""


def apply_step(
    parent: Structure, step: Step, resolve: Callable[[str], Structure] | None = None
) -> Mutation:
    """Apply one recorded step; `resolve` finds a recombination's other parent by ID."""
    if step.operator == "repin":
        return repin(parent, **step.args)
    fn = OPERATORS.get(step.operator)
    if fn is None:
        raise MutationRefused(step.operator, "operator", "unknown operator")
    args = dict(step.args)
    if step.operator == "recombine":
        if resolve is None:
            raise MutationRefused("recombine", "other", "no resolver for the other parent")
        return recombine(parent, resolve(str(args.pop("other"))), **args)
    return fn(parent, **args)


def replay_steps(
    parent: Structure,
    steps: Sequence[Step],
    resolve: Callable[[str], Structure] | None = None,
) -> Mutation:
    """Apply steps in order; one child of `parent` that records every step.

    Each step's `derived_from` points at the intermediate structure; they are composed
    so that the child's modules name their origins in `parent`, which is what the
    static checks compare against.
    """
    current = parent
    parents: tuple[Structure, ...] = (parent,)
    origin: dict[str, tuple[str, ...]] = {m.id: (m.id,) for m in parent.modules}
    done: list[Step] = []
    for i, step in enumerate(steps):
        m = apply_step(current, step, resolve)
        if i == 0:
            parents = m.parents
        elif len(m.parents) > 1:
            parents = (*parents, *m.parents[1:])
        origin = {
            x.id: tuple(dict.fromkeys(o for d in x.derived_from for o in origin.get(d, (d,))))
            for x in m.child.modules
        }
        current, done = m.child, [*done, *m.steps]
    mods = tuple(_mod(x, origin[x.id]) for x in current.modules)
    return _finish(current.evolve(modules=mods), done, parents)


def checked(mutation: Mutation) -> Mutation:
    """The mutation if its child passes the static checks against its parents, else raise."""
    found = static_checks(
        mutation.child,
        mutation.parents,
        source=mutation.operator,
        kind=RefusalKind.MUTATION,
    )
    if found:
        raise StructureRefused(found)
    return mutation
