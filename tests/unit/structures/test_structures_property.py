"""Random sequences of mutations (and hostile hand edits): no child that passes the
static checks ever holds a grant its root ancestors lacked or loses the verification."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from reflexmem.structures.model import Limits, Structure, Verification, within
from reflexmem.structures.mutations import Mutation, MutationRefused, Step, apply_step, checked
from reflexmem.structures.refusals import StructureRefused
from reflexmem.structures.schema import load_packaged
from reflexmem.structures.steps import finish_child, module_copy, start_child

ROOT = load_packaged("office-all-shared")
TOOLS = ["read-text", "local-ocr", "read-request", "place-order", "send-mail"]
SCOPES = ["docs", "docs/common", "docs/rare", "images", "calendar", "ground-truth", "secrets"]
SUBGOALS = ["classify_document", "extract_fields", "schedule_event", "pay_invoice"]
FIELDS = ["amount", "merchant", "date", "source_ref", "document_type", "slot", "password"]
OPS = [
    "merge",
    "specialize",
    "split",
    "merge",
    "narrow_scope",
    "delete_edge",
    "add_edge",
    "conditionalize_edge",
    "specialize",
    "recombine",
    "raw_edit",
]


def resolves_to(other: Structure) -> Callable[[str], Structure]:
    """A resolver that finds `other` whatever ID is asked (the one other parent)."""
    return lambda _id: other


def _args(draw: Any, s: Structure, op: str) -> dict[str, Any]:
    mods = [m.id for m in s.modules] + ["ghost"]
    edges = [e.id for e in s.edges] + ["image->schedule"]
    some = st.lists(st.sampled_from(SUBGOALS), min_size=1, max_size=3, unique=True)
    if op == "delete_edge":
        return {"edge": draw(st.sampled_from(edges))}
    if op == "conditionalize_edge":
        return {"edge": draw(st.sampled_from(edges)), "all_of": draw(some)}
    if op == "narrow_scope":
        return {
            "module": draw(st.sampled_from(mods)),
            "knowledge": draw(st.lists(st.sampled_from(SCOPES), max_size=3, unique=True)),
        }
    if op == "add_edge":
        source = draw(st.sampled_from(mods))
        emitted = [f for f, _ in s.module_map[source].outputs] if source in s.module_map else []
        pool = emitted if emitted and draw(st.booleans()) else FIELDS
        fields = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
        types = dict(s.module_map[source].outputs) if source in s.module_map else {}
        return {
            "source": source,
            "target": draw(st.sampled_from(mods)),
            "fields": fields,
            "contract": draw(st.sampled_from(["receipt-fields-v1", f"new-{len(s.edges)}-v1"])),
            "all_of": draw(st.lists(st.sampled_from(SUBGOALS), max_size=2, unique=True)),
            "max_messages": draw(st.integers(1, 9)),
            "contract_fields": {
                f: types.get(f) or draw(st.sampled_from(["string", "number"])) for f in fields
            },
        }
    if op == "merge":
        return {
            "modules": draw(st.lists(st.sampled_from(mods), min_size=2, max_size=3, unique=True)),
            "new_id": draw(st.sampled_from(["merged", "image"])),
        }
    if op == "split":
        m = draw(st.sampled_from(mods))
        handles = list(s.module_map[m].handles) if m in s.module_map else ["x"]
        cut = draw(st.integers(0, len(handles)))
        return {
            "module": m,
            "parts": {
                "part-a": {
                    "handles": handles[:cut],
                    "allowed_tools": draw(st.lists(st.sampled_from(TOOLS), max_size=2)),
                },
                "part-b": {
                    "handles": handles[cut:],
                    "knowledge": draw(st.lists(st.sampled_from(SCOPES), max_size=2)),
                },
            },
        }
    if op == "specialize":
        wide = [m.id for m in s.modules if len(m.handles) > 1]
        return {
            "module": draw(st.sampled_from(wide or mods)),
            "subgoal": draw(st.sampled_from(SUBGOALS)),
            "new_id": "specialist",
            "allowed_tools": draw(st.lists(st.sampled_from(TOOLS), max_size=2, unique=True)),
            "knowledge": draw(st.lists(st.sampled_from(SCOPES), max_size=2, unique=True)),
        }
    return {}


def _raw_edit(draw: Any, s: Structure) -> Mutation:
    """A hostile hand edit of the YAML: the checks are all that stands in the way."""
    base = start_child(s)
    kind = draw(st.sampled_from(["tool", "scope", "uncover", "verifier", "limit", "effect"]))
    m = draw(st.sampled_from(base.modules))
    if kind in ("tool", "scope", "effect"):
        attr, pool = {
            "tool": ("tools", TOOLS),
            "scope": ("knowledge", SCOPES),
            "effect": ("effects", ["read", "write_memory", "move_funds"]),
        }[kind]
        new = module_copy(m, None, **{attr: (*getattr(m, attr), draw(st.sampled_from(pool)))})
        base = base.evolve(modules=tuple(new if x.id == m.id else x for x in base.modules))
    elif kind == "uncover":
        v = base.verification
        base = base.evolve(
            verification=Verification(
                v.verifier, v.namespace, tuple(c for c in v.covers if c != m.id), v.error_channel
            )
        )
    elif kind == "verifier":
        v = base.verification
        base = base.evolve(
            verification=Verification("self-check", v.namespace, v.covers, v.error_channel)
        )
    else:
        base = base.evolve(limits=Limits(9, 99))
    return finish_child(base, [Step("raw_edit", {"kind": kind})], [s])


def _origins(
    child: Structure, parents: list[Structure], maps: dict[str, dict[str, set[str]]]
) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m in child.modules:
        roots: set[str] = set()
        for o in m.derived_from:
            for p in parents:
                if o in p.module_map:
                    roots |= maps[p.structure_id][o]
        out[m.id] = roots
    return out


def _assert_within_root(child: Structure, origins: dict[str, set[str]]) -> None:
    rv, cv = ROOT.verification, child.verification
    assert (cv.verifier, cv.namespace, cv.error_channel) == (
        rv.verifier,
        rv.namespace,
        rv.error_channel,
    )
    assert set(child.module_map) <= set(cv.covers)
    assert child.limits.max_cycle_modules <= ROOT.limits.max_cycle_modules
    assert child.limits.max_messages_per_episode <= ROOT.limits.max_messages_per_episode
    for m in child.modules:
        held = [ROOT.module_map[o] for o in origins[m.id]]
        assert held, m.id
        for attr in ("tools", "effects", "skills", "handles"):
            assert set(getattr(m, attr)) <= {x for h in held for x in getattr(h, attr)}, attr
        for scope in m.knowledge:
            assert any(within(scope, k) for h in held for k in h.knowledge), scope
            assert not within(scope, rv.namespace)
            assert not within(rv.namespace, scope)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_no_accepted_child_widens_a_permission_or_loses_verification(data: st.DataObject) -> None:
    draw = data.draw
    chain = [ROOT]
    maps = {ROOT.structure_id: {m.id: {m.id} for m in ROOT.modules}}
    for _ in range(draw(st.integers(1, 6))):
        current = chain[-1]
        op = draw(st.sampled_from(OPS))
        try:
            if op == "raw_edit":
                mutation = _raw_edit(draw, current)
            elif op == "recombine":
                other = draw(st.sampled_from(chain))
                mods = draw(
                    st.lists(
                        st.sampled_from([m.id for m in other.modules]), min_size=1, unique=True
                    )
                )
                mutation = apply_step(
                    current,
                    Step(op, {"other": other.structure_id, "modules": mods}),
                    resolves_to(other),
                )
            else:
                mutation = apply_step(current, Step(op, _args(draw, current, op)))
        except MutationRefused:
            event("arguments refused")
            continue
        try:
            checked(mutation)
        except StructureRefused as exc:
            event(f"refused: {sorted({r.check for r in exc.refusals})}")
            continue
        event(f"accepted {op}")
        child = mutation.child
        origins = _origins(child, list(mutation.parents), maps)
        _assert_within_root(child, origins)
        maps[child.structure_id] = origins
        chain.append(child)
