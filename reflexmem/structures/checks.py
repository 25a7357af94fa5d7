"""Static checks on a structure, alone and against its parent(s), before anything runs.

A structure that fails is refused with the file (or operator), the field and the check:

- `references`: edges join declared modules (never a module to itself, one edge per
  ordered pair), every sub-goal has exactly one handler, every skill is pinned, the
  verification covers only declared modules.
- `closed_message_schema`: every edge names a declared contract that is closed, and
  carries only fields of that contract which its source module emits with that type.
- `cycle_limit`: no strongly connected set of modules is larger than
  `limits.max_cycle_modules` (0 means acyclic). The size of a strongly connected set
  bounds the length of every cycle in it, so this is conservative and linear to check.
- `verification_path`: the verifier, its ground-truth namespace and the error channel
  are the parent's; every module is covered; no module can read the ground truth.
- `no_widening`: each module holds only tools, effects, skills, sub-goals and knowledge
  scopes that the parent modules it derives from held; existing edges, contracts and
  limits never grow; an existing edge's trigger never fires more often.
- `parent`: a child names its parent.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from reflexmem.structures.model import Structure, within
from reflexmem.structures.refusals import Refusal, RefusalKind, StructureRefused


class _Collector:
    def __init__(self, source: str, kind: RefusalKind, structure_id: str) -> None:
        self.source, self.kind, self.sid = source, kind, structure_id
        self.found: list[Refusal] = []

    def add(self, field: str, check: str, reason: str) -> None:
        self.found.append(Refusal(self.kind, self.source, field, check, reason, self.sid))


def _references(s: Structure, out: _Collector) -> None:
    modules = s.module_map
    seen: set[str] = set()
    for i, e in enumerate(s.edges):
        for end, name in (("from", e.source), ("to", e.target)):
            if name not in modules:
                out.add(f"edges[{i}].{end}", "references", f"unknown module {name!r}")
        if e.source == e.target:
            out.add(f"edges[{i}]", "references", f"edge from {e.source!r} to itself")
        if e.id in seen:
            out.add(f"edges[{i}]", "references", f"second edge {e.id}")
        seen.add(e.id)
    owner: dict[str, str] = {}
    for m in s.modules:
        for g in m.handles:
            if g in owner:
                out.add(
                    f"modules.{m.id}.handles",
                    "references",
                    f"sub-goal {g!r} is already handled by {owner[g]!r}",
                )
            owner.setdefault(g, m.id)
        for skill in m.skills:
            if skill not in s.pins.versions:
                out.add(f"modules.{m.id}.skills", "references", f"skill {skill!r} is not pinned")
    for name in s.verification.covers:
        if name not in modules:
            out.add("verification.covers", "references", f"unknown module {name!r}")


def _contracts(s: Structure, out: _Collector) -> None:
    for i, e in enumerate(s.edges):
        contract = s.contract_map.get(e.contract)
        if contract is None:
            out.add(
                f"edges[{i}].message_schema",
                "closed_message_schema",
                f"{e.id}: no contract {e.contract!r}",
            )
            continue
        if not contract.closed:
            out.add(
                f"contracts.{contract.name}.closed",
                "closed_message_schema",
                f"{e.id}: contract {contract.name!r} is open (closed: false)",
            )
        source = s.module_map.get(e.source)
        for f in e.fields:
            if f not in contract.types:
                out.add(
                    f"edges[{i}].fields",
                    "closed_message_schema",
                    f"{e.id}: field {f!r} is not in contract {contract.name!r}",
                )
            elif source is not None and source.output_types.get(f) != contract.types[f]:
                out.add(
                    f"edges[{i}].fields",
                    "closed_message_schema",
                    f"{e.id}: {e.source!r} does not emit {f!r} as {contract.types[f]}",
                )


def strongly_connected_sizes(s: Structure) -> dict[str, int]:
    """For each module, the size of its strongly connected set (1 if on no cycle)."""
    ids = [m.id for m in s.modules]
    index = {m: i for i, m in enumerate(ids)}
    n = len(ids)
    reach = np.eye(n, dtype=bool)
    for e in s.edges:
        if e.source in index and e.target in index:
            reach[index[e.source], index[e.target]] = True
    for _ in range(max(1, int(np.ceil(np.log2(max(n, 2)))))):
        reach = (reach.astype(np.int32) @ reach.astype(np.int32)) > 0
    sizes = (reach & reach.T).sum(axis=1)
    return {m: int(sizes[index[m]]) for m in ids}


def _cycles(s: Structure, out: _Collector) -> None:
    sizes = strongly_connected_sizes(s)
    largest = max(sizes.values(), default=1)
    if largest >= 2 and largest > s.limits.max_cycle_modules:
        members = sorted(m for m, k in sizes.items() if k == largest)
        out.add(
            "edges",
            "cycle_limit",
            f"a cycle joins {largest} modules ({', '.join(members)}); "
            f"limits.max_cycle_modules is {s.limits.max_cycle_modules}",
        )


def _verification(s: Structure, parents: Sequence[Structure], out: _Collector) -> None:
    v = s.verification
    missing = sorted(set(s.module_map) - set(v.covers))
    if missing:
        out.add(
            "verification.covers",
            "verification_path",
            f"module(s) {', '.join(missing)} would run without independent verification",
        )
    for m in s.modules:
        for scope in m.knowledge:
            if within(v.namespace, scope) or within(scope, v.namespace):
                out.add(
                    f"modules.{m.id}.knowledge",
                    "verification_path",
                    f"{scope!r} reaches the verifier's ground truth {v.namespace!r}",
                )
    for p in parents:
        pv = p.verification
        for attr in ("verifier", "namespace", "error_channel"):
            if getattr(v, attr) != getattr(pv, attr):
                out.add(
                    f"verification.{attr}",
                    "verification_path",
                    f"{getattr(v, attr)!r} replaces the parent's {getattr(pv, attr)!r}",
                )


def _widening(s: Structure, parents: Sequence[Structure], out: _Collector) -> None:
    """Grants of each module against the union of what its origins held in any parent."""
    for m in s.modules:
        origins = [p.module_map[o] for p in parents for o in m.derived_from if o in p.module_map]
        known = {o.id for o in origins}
        unknown = [o for o in m.derived_from if o not in known]
        where = f"modules.{m.id}"
        if unknown:
            out.add(
                f"{where}.derived_from",
                "no_widening",
                f"derives from {', '.join(unknown)}, not a module of the parent",
            )
        for attr, label in (
            ("tools", "allowed_tools"),
            ("effects", "effects"),
            ("skills", "skills"),
            ("handles", "handles"),
        ):
            held = {x for o in origins for x in getattr(o, attr)}
            extra = sorted(set(getattr(m, attr)) - held)
            if extra:
                out.add(f"{where}.{label}", "no_widening", f"gains {', '.join(extra)}")
        scopes = sorted({sc for o in origins for sc in o.knowledge})
        for scope in m.knowledge:
            if not any(within(scope, held) for held in scopes):
                out.add(
                    f"{where}.knowledge",
                    "no_widening",
                    f"scope {scope!r} is not within the parent's {scopes}",
                )
    for attr in ("max_cycle_modules", "max_messages_per_episode"):
        ceiling = max(getattr(p.limits, attr) for p in parents)
        if getattr(s.limits, attr) > ceiling:
            out.add(
                f"limits.{attr}",
                "no_widening",
                f"{getattr(s.limits, attr)} exceeds the parent's {ceiling}",
            )
    for i, e in enumerate(s.edges):
        olds = [p.edge_map[e.id] for p in parents if e.id in p.edge_map]
        if not olds:
            continue
        if extra := sorted(set(e.fields) - {f for o in olds for f in o.fields}):
            out.add(f"edges[{i}].fields", "no_widening", f"{e.id} gains {', '.join(extra)}")
        if e.max_messages > max(o.max_messages for o in olds):
            out.add(
                f"edges[{i}].max_messages",
                "no_widening",
                f"{e.id}: {e.max_messages} exceeds the parent's "
                f"{max(o.max_messages for o in olds)}",
            )
        if not any(e.trigger.at_least_as_narrow_as(o.trigger) for o in olds):
            out.add(
                f"edges[{i}].trigger",
                "no_widening",
                f"{e.id}: {e.trigger} fires where the parent's {olds[0].trigger} does not",
            )
    for c in s.contracts:
        held_c = [p.contract_map[c.name] for p in parents if c.name in p.contract_map]
        if held_c and (extra := sorted(set(c.types) - {f for o in held_c for f in o.types})):
            out.add(f"contracts.{c.name}.fields", "no_widening", f"gains {', '.join(extra)}")


def static_checks(
    structure: Structure,
    parents: Sequence[Structure] = (),
    *,
    source: str,
    kind: RefusalKind = RefusalKind.FILE,
) -> list[Refusal]:
    """Every static-check failure of `structure` (empty when it passes).

    `parents` are the structures it derives from (two for a recombination); without
    them only the checks that need no parent run.
    """
    out = _Collector(source, kind, structure.structure_id)
    _references(structure, out)
    _contracts(structure, out)
    _cycles(structure, out)
    _verification(structure, parents, out)
    if parents:
        if structure.parent_id != parents[0].structure_id:
            out.add(
                "parent_id",
                "parent",
                f"{structure.parent_id!r} is not the parent {parents[0].structure_id!r}",
            )
        _widening(structure, parents, out)
    return out.found


def require_valid(
    structure: Structure,
    parents: Sequence[Structure] = (),
    *,
    source: str,
    kind: RefusalKind = RefusalKind.FILE,
) -> Structure:
    """Return `structure` if it passes, else raise :class:`StructureRefused`."""
    found = static_checks(structure, parents, source=source, kind=kind)
    if found:
        raise StructureRefused(found)
    return structure
