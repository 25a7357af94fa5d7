from __future__ import annotations

from collections.abc import Callable

import pytest
import yaml

from reflexmem.structures.checks import static_checks
from reflexmem.structures.model import Lifecycle, Structure
from reflexmem.structures.mutations import (
    Mutation,
    MutationRefused,
    Step,
    add_edge,
    checked,
    conditionalize_edge,
    delete_edge,
    merge,
    narrow_scope,
    recombine,
    replay_steps,
    specialize,
    split,
)
from reflexmem.structures.refusals import RefusalKind, StructureRefused
from reflexmem.structures.schema import load_packaged, schema_refusals


@pytest.fixture(scope="module")
def root() -> Structure:
    return load_packaged("office-all-shared")


def resolves_to(other: Structure) -> Callable[[str], Structure]:
    """A resolver that finds `other` whatever ID is asked (the one other parent)."""
    return lambda _id: other


def _merged(root: Structure) -> Structure:
    """A parent with one module handling two sub-goals (to split and specialize)."""
    base = checked(delete_edge(root, "document->schedule")).child
    return checked(merge(base, ["document", "image"], "office")).child


def test_every_operator_records_its_step_and_parent(root: Structure) -> None:
    merged = _merged(root)
    results = [
        delete_edge(root, "schedule->image"),
        conditionalize_edge(root, "image->document", ["extract_fields", "classify_document"]),
        add_edge(
            root,
            "document",
            "image",
            ["document_type"],
            "doc-type-v1",
            all_of=["classify_document"],
            contract_fields={"document_type": "string"},
        ),
        narrow_scope(root, "document", ["docs/common"]),
        merge(root.evolve(edges=()), ["image", "document"], "image-document"),
        split(
            merged,
            "office",
            {
                "office-a": {"handles": ["classify_document"]},
                "office-b": {"handles": ["extract_fields"]},
            },
        ),
        specialize(merged, "office", "extract_fields", "office-ocr"),
        recombine(root, load_packaged("office-conditional", [root]), ["image"]),
    ]
    for m in results:
        assert len(m.steps) == 1
        assert m.child.lifecycle == Lifecycle.CANDIDATE
        assert m.child.parent_id == m.parents[0].structure_id
        assert m.child.structure_id.split(".")[0] == m.parents[0].structure_id.split(".")[0]
        # JSON-able arguments, and the step rebuilds exactly the same child
        again = replay_steps(m.parents[0], m.steps, resolves_to(m.parents[-1]))
        assert again.child.fingerprint() == m.child.fingerprint()
        checked(m)  # every one of these is a legal child of its parent
    assert {m.steps[0].operator for m in results} == {
        "delete_edge",
        "conditionalize_edge",
        "add_edge",
        "narrow_scope",
        "merge",
        "split",
        "specialize",
        "recombine",
    }


def test_split_and_merge_keep_verification_and_lineage(root: Structure) -> None:
    merged = _merged(root)
    office = merged.module_map["office"]
    assert office.derived_from == ("document", "image")
    assert set(office.knowledge) == {"docs", "images"}
    assert "office" in merged.verification.covers
    m = split(
        merged,
        "office",
        {
            "a": {"handles": ["classify_document"], "knowledge": ["docs"]},
            "b": {"handles": ["extract_fields"], "knowledge": ["images"]},
        },
    )
    assert set(m.child.verification.covers) == {"a", "b", "schedule"}
    assert m.child.module_map["a"].derived_from == ("office",)
    assert static_checks(m.child, m.parents, source="split") == []


def test_multi_step_lineage_names_origins_in_the_first_parent(root: Structure) -> None:
    steps = [
        Step("delete_edge", {"edge": "document->schedule"}),
        Step("merge", {"modules": ["document", "image"], "new_id": "office"}),
        Step("specialize", {"module": "office", "subgoal": "extract_fields", "new_id": "ocr"}),
    ]
    m = replay_steps(root, steps)
    assert [s.operator for s in m.steps] == ["delete_edge", "merge", "specialize"]
    assert m.child.module_map["ocr"].derived_from == ("document", "image")
    assert static_checks(m.child, [root], source="x") == []


def test_bad_arguments_are_refused_by_the_operator(root: Structure) -> None:
    with pytest.raises(MutationRefused, match="no edge"):
        delete_edge(root, "image->schedule")
    with pytest.raises(MutationRefused, match="already exists"):
        add_edge(root, "image", "document", ["amount"], "receipt-fields-v1")
    with pytest.raises(MutationRefused, match="partition"):
        split(root, "document", {"a": {"handles": []}, "b": {"handles": ["x"]}})
    with pytest.raises(MutationRefused) as info:
        merge(root, ["document"], "x")
    assert info.value.refusal.kind == RefusalKind.MUTATION
    assert info.value.refusal.source == "merge"


@pytest.mark.parametrize(
    ("make", "field", "check"),
    [
        (
            lambda r: narrow_scope(r, "document", ["docs", "calendar"]),
            "modules.document.knowledge",
            "no_widening",
        ),
        (
            lambda r: specialize(
                _merged(r),
                "office",
                "extract_fields",
                "ocr",
                allowed_tools=["local-ocr", "read-request"],
            ),
            "modules.ocr.allowed_tools",
            "no_widening",
        ),
        (
            lambda r: conditionalize_edge(
                conditionalize_edge(
                    r, "image->document", ["extract_fields", "classify_document"]
                ).child,
                "image->document",
                ["extract_fields"],
            ),
            "edges[0].trigger",
            "no_widening",
        ),
        (
            lambda r: add_edge(r, "document", "image", ["amount"], "receipt-fields-v1"),
            "edges[3].fields",
            "closed_message_schema",
        ),
        (
            lambda r: add_edge(
                load_packaged("office-conditional", [r]),
                "document",
                "image",
                ["document_type"],
                "document-ref-v1",
            ),
            "edges",
            "cycle_limit",
        ),
    ],
)
def test_widening_children_are_refused_with_field_and_check(
    root: Structure, make: Callable[[Structure], Mutation], field: str, check: str
) -> None:
    m = make(root)
    with pytest.raises(StructureRefused) as info:
        checked(m)
    assert (field, check) in {(r.field, r.check) for r in info.value.refusals}
    assert all(r.kind == RefusalKind.MUTATION for r in info.value.refusals)
    assert all(r.source == m.operator for r in info.value.refusals)


def test_a_recombined_child_is_checked_against_both_parents(root: Structure) -> None:
    cond = load_packaged("office-conditional", [root])
    m = recombine(cond, root, ["schedule"])
    assert [p.structure_id for p in m.parents] == [cond.structure_id, root.structure_id]
    # brings root's schedule edges whose ends exist: document->schedule, schedule->image
    assert {e.id for e in m.child.edges} == {
        "image->document",
        "document->schedule",
        "schedule->image",
    }
    found = static_checks(m.child, m.parents, source="recombine")
    assert [(r.check) for r in found] == ["cycle_limit"]  # conditional declares no cycles
    assert schema_refusals(yaml.safe_load(m.child.to_yaml()), "child.yaml") == []
