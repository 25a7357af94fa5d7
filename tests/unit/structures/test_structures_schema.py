from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reflexmem.structures.checks import static_checks, strongly_connected_sizes
from reflexmem.structures.model import Limits, Trigger, structure_from_data
from reflexmem.structures.refusals import RefusalKind, StructureRefused
from reflexmem.structures.schema import load_packaged, load_structure, packaged, parse_structure


@pytest.fixture(scope="module")
def root_data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(packaged("office-all-shared"))
    return data


def _write(tmp_path: Path, data: dict[str, Any], name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_packaged_candidates_load_and_round_trip() -> None:
    root = load_packaged("office-all-shared")
    iso = load_packaged("office-isolated", [root])
    cond = load_packaged("office-conditional", [root])
    assert [len(s.edges) for s in (root, iso, cond)] == [3, 0, 1]
    assert cond.edges[0].trigger == Trigger(frozenset({"classify_document", "extract_fields"}))
    again = parse_structure(root.to_yaml(), "round-trip")
    assert again == root
    assert again.fingerprint() == root.fingerprint()
    assert iso.fingerprint() != root.fingerprint()


def test_schema_refusal_names_file_field_and_check(
    tmp_path: Path, root_data: dict[str, Any]
) -> None:
    data = {**root_data, "modules": dict(root_data["modules"])}
    data["modules"]["image"] = {**data["modules"]["image"], "allowed_tool": ["x"]}
    del data["fallback"]
    path = _write(tmp_path, data)
    with pytest.raises(StructureRefused) as info:
        load_structure(path)
    found = {(r.source, r.field, r.check) for r in info.value.refusals}
    assert (str(path), "(document)", "schema") in found  # fallback is required
    assert (str(path), "modules.image", "schema") in found  # misspelt key, no extra keys
    assert all(r.kind == RefusalKind.FILE for r in info.value.refusals)
    assert "fallback" in " ".join(r.reason for r in info.value.refusals)


def test_yaml_error_is_refused_with_a_position(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("structure_id: [unclosed\n")
    with pytest.raises(StructureRefused) as info:
        load_structure(path)
    refusal = info.value.refusals[0]
    assert refusal.check == "yaml"
    assert refusal.field.startswith("line ")


def test_open_contract_and_unknown_fields_fail_closed_message_schema(
    root_data: dict[str, Any],
) -> None:
    data = yaml.safe_load(yaml.safe_dump(root_data))
    data["contracts"]["receipt-fields-v1"]["closed"] = False
    data["edges"][1]["fields"] = ["document_type", "raw_text"]
    with pytest.raises(StructureRefused) as info:
        parse_structure(yaml.safe_dump(data), "f.yaml")
    found = {(r.field, r.check) for r in info.value.refusals}
    assert ("contracts.receipt-fields-v1.closed", "closed_message_schema") in found
    assert ("edges[1].fields", "closed_message_schema") in found


def test_cycle_limit_is_enforced() -> None:
    root = load_packaged("office-all-shared")
    assert set(strongly_connected_sizes(root).values()) == {3}
    found = static_checks(root.evolve(limits=Limits(2, 6)), source="f.yaml")
    assert [(r.field, r.check) for r in found] == [("edges", "cycle_limit")]
    acyclic = load_packaged("office-conditional", [root])
    assert set(strongly_connected_sizes(acyclic).values()) == {1}


def test_widening_and_lost_verification_are_refused_against_the_parent(
    root_data: dict[str, Any],
) -> None:
    root = structure_from_data(root_data)
    data = yaml.safe_load(packaged("office-conditional"))
    data["modules"]["document"]["allowed_tools"] = ["read-text", "local-ocr"]
    data["modules"]["schedule"]["knowledge"] = ["calendar", "docs"]
    data["verification"]["covers"] = ["document", "image"]
    data["limits"]["max_messages_per_episode"] = 99
    with pytest.raises(StructureRefused) as info:
        parse_structure(yaml.safe_dump(data), "child.yaml", [root])
    found = {(r.field, r.check) for r in info.value.refusals}
    assert found == {
        ("modules.document.allowed_tools", "no_widening"),
        ("modules.schedule.knowledge", "no_widening"),
        ("verification.covers", "verification_path"),
        ("limits.max_messages_per_episode", "no_widening"),
    }


def test_a_module_may_not_reach_the_ground_truth(root_data: dict[str, Any]) -> None:
    data = yaml.safe_load(yaml.safe_dump(root_data))
    data["modules"]["document"]["knowledge"] = ["docs", "ground-truth"]
    with pytest.raises(StructureRefused) as info:
        parse_structure(yaml.safe_dump(data), "f.yaml")
    assert [(r.field, r.check) for r in info.value.refusals] == [
        ("modules.document.knowledge", "verification_path")
    ]


def test_references_are_checked(root_data: dict[str, Any]) -> None:
    data = yaml.safe_load(yaml.safe_dump(root_data))
    data["edges"][0]["to"] = "calendar"
    data["modules"]["schedule"]["handles"] = ["schedule_event", "classify_document"]
    del data["pins"]["skills"]["schedule-event"]
    with pytest.raises(StructureRefused) as info:
        parse_structure(yaml.safe_dump(data), "f.yaml")
    found = {(r.field, r.check) for r in info.value.refusals}
    assert ("edges[0].to", "references") in found
    assert ("modules.schedule.handles", "references") in found
    assert ("modules.schedule.skills", "references") in found
