"""The eight mutation operators of docs/design.md §11 (and `repin`), as pure functions.

Each takes a parent and arguments and returns a :class:`Mutation` recording the step;
arguments that cannot apply raise :class:`MutationRefused`. None of them decides
whether the child is allowed: the static checks do (see `mutations.checked`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reflexmem.structures.model import Contract, Edge, Module, Pins, Structure, Trigger
from reflexmem.structures.steps import (
    RUNTIME_WEIGHT,
    Mutation,
    MutationRefused,
    Step,
    covers_replaced,
    finish_child,
    module_copy,
    redirect_edges,
    require_edge,
    require_module,
    start_child,
)


def delete_edge(parent: Structure, edge: str) -> Mutation:
    """Remove one edge (the counterfactual removal experiment)."""
    require_edge(parent, "delete_edge", edge)
    base = start_child(parent)
    base = base.evolve(edges=tuple(e for e in base.edges if e.id != edge))
    return finish_child(base, [Step("delete_edge", {"edge": edge})], [parent])


def conditionalize_edge(parent: Structure, edge: str, all_of: Sequence[str]) -> Mutation:
    """Give an edge a trigger: it opens only when the goal requires all of `all_of`."""
    old = require_edge(parent, "conditionalize_edge", edge)
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
    base = start_child(parent)
    base = base.evolve(edges=tuple(new if e.id == edge else e for e in base.edges))
    step = Step("conditionalize_edge", {"edge": edge, "all_of": sorted(all_of)})
    return finish_child(base, [step], [parent])


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
    require_module(parent, op, source, "source")
    require_module(parent, op, target, "target")
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
    base = start_child(parent).evolve(edges=(*parent.edges, edge), contracts=contracts)
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
    return finish_child(base, [Step(op, args)], [parent])


def narrow_scope(parent: Structure, module: str, knowledge: Sequence[str]) -> Mutation:
    """Replace a module's knowledge scopes (the checks refuse anything not narrower)."""
    m = require_module(parent, "narrow_scope", module)
    base = start_child(parent)
    mods = tuple(
        module_copy(x, knowledge=tuple(knowledge)) if x.id == m.id else x for x in base.modules
    )
    step = Step("narrow_scope", {"module": module, "knowledge": list(knowledge)})
    return finish_child(base.evolve(modules=mods), [step], [parent])


def split(parent: Structure, module: str, parts: Mapping[str, Mapping[str, Any]]) -> Mutation:
    """Cut a module along a partition of its sub-goals into two or more modules.

    `parts` maps each new module ID to `{"handles": [...]}` plus optional `knowledge`,
    `skills` and `allowed_tools` (default: the module's own). Edges touching the module
    are repeated for every part; the verification covers every part.
    """
    op = "split"
    m = require_module(parent, op, module)
    if len(parts) < 2:
        raise MutationRefused(op, "parts", "a split needs at least two parts")
    handled = [g for p in parts.values() for g in p.get("handles", ())]
    if sorted(handled) != sorted(m.handles):
        raise MutationRefused(op, "parts", f"handles must partition {sorted(m.handles)}")
    clash = sorted(set(parts) & (set(parent.module_map) - {module}))
    if clash:
        raise MutationRefused(op, "parts", f"module(s) {', '.join(clash)} already exist")
    base = start_child(parent)
    new = [
        module_copy(
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
    edges = tuple(redirect_edges(base.edges, module, list(parts)))
    v = base.verification
    ver = type(v)(
        v.verifier, v.namespace, covers_replaced(base, module, list(parts)), v.error_channel
    )
    step = Step(op, {"module": module, "parts": {k: dict(p) for k, p in parts.items()}})
    return finish_child(base.evolve(modules=mods, edges=edges, verification=ver), [step], [parent])


def merge(parent: Structure, modules: Sequence[str], new_id: str) -> Mutation:
    """Join two or more modules into one holding the union of their grants."""
    op = "merge"
    if len(set(modules)) < 2:
        raise MutationRefused(op, "modules", "a merge needs two different modules")
    ms = [require_module(parent, op, name, "modules") for name in modules]
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
    base = start_child(parent)
    edges: list[Edge] = []
    for e in base.edges:
        if e.source in names and e.target in names:
            continue
        s = new_id if e.source in names else e.source
        t = new_id if e.target in names else e.target
        if any(x.id == f"{s}->{t}" for x in edges):
            raise MutationRefused(op, "modules", f"edges collide on {s}->{t}")
        edges.append(Edge(s, t, e.contract, e.fields, e.trigger, e.max_messages))
    mods = (*(x for x in base.modules if x.id not in names), joined)
    v = base.verification
    covers = tuple(dict.fromkeys(new_id if c in names else c for c in v.covers))
    ver = type(v)(v.verifier, v.namespace, covers, v.error_channel)
    step = Step(op, {"modules": list(modules), "new_id": new_id})
    return finish_child(
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
    m = require_module(parent, op, module)
    if subgoal not in m.handles:
        raise MutationRefused(op, "subgoal", f"{module!r} does not handle {subgoal!r}")
    if len(m.handles) < 2:
        raise MutationRefused(op, "subgoal", f"{module!r} would be left with nothing; split it")
    if new_id in parent.module_map:
        raise MutationRefused(op, "new_id", f"module {new_id!r} already exists")
    base = start_child(parent)
    spec = module_copy(
        m,
        (module,),
        id=new_id,
        handles=(subgoal,),
        knowledge=tuple(knowledge if knowledge is not None else m.knowledge),
        tools=tuple(allowed_tools if allowed_tools is not None else m.tools),
    )
    rest = tuple(g for g in m.handles if g != subgoal)
    mods = (*(module_copy(x, handles=rest) if x.id == module else x for x in base.modules), spec)
    extra = [e for e in redirect_edges(base.edges, module, [module, new_id]) if new_id in e.id]
    v = base.verification
    ver = type(v)(v.verifier, v.namespace, (*v.covers, new_id), v.error_channel)
    args: dict[str, Any] = {"module": module, "subgoal": subgoal, "new_id": new_id}
    if knowledge is not None:
        args["knowledge"] = list(knowledge)
    if allowed_tools is not None:
        args["allowed_tools"] = list(allowed_tools)
    child = base.evolve(modules=mods, edges=(*base.edges, *extra), verification=ver)
    return finish_child(child, [Step(op, args)], [parent])


def recombine(first: Structure, second: Structure, modules: Sequence[str]) -> Mutation:
    """`first` with `modules` (and their edges) taken from `second`; both are parents."""
    op = "recombine"
    for name in modules:
        require_module(second, op, name, "modules")
    names = set(modules)
    base = start_child(first)
    taken = tuple(module_copy(second.module_map[n], (n,)) for n in modules)
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
    return finish_child(child, [step], [first, second])


def repin(
    parent: Structure, skills: Mapping[str, str] | None = None, index: str | None = None
) -> Mutation:
    """New pinned skill or index versions (a bundle change, not a search operator)."""
    pins = Pins(
        tuple(sorted({**parent.pins.versions, **(skills or {})}.items())),
        index or parent.pins.index,
    )
    args: dict[str, Any] = {"skills": dict(skills or {}), "index": index}
    return finish_child(start_child(parent).evolve(pins=pins), [Step("repin", args)], [parent])
