"""Skill files: the shipped ones load; a bad one is refused with file, field and reason."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from reflexmem.executor import Effect
from reflexmem.ledger.reflex_enums import Layer
from reflexmem.reflex.skills import SKILLS_DIR, SkillLoadError, load_skill_files, parse_skill
from reflexmem.registry import RoleRegistry
from tests.unit.reflex.reflex_helpers import MakeSpec

Edit = Callable[[dict[str, Any]], object]


def test_the_shipped_skills_load_with_every_contract_field(registry: RoleRegistry) -> None:
    specs = {s.skill_id: s for s in load_skill_files(SKILLS_DIR.glob("*.yaml"), registry)}
    assert set(specs) == {"filing_kind_rules", "filing_kind_policy", "filing_kind_examples"}
    rules = specs["filing_kind_rules"]
    assert (rules.layer, rules.owner, rules.version, rules.previous_version) == (
        Layer.L0,
        "valuation",
        1,
        None,
    )
    assert rules.options == ("earnings_report", "guidance_update", "analyst_note")
    assert rules.escalation_target == Layer.L1
    assert rules.tools == frozenset({"file_filing"})
    assert rules.effects == frozenset({Effect.WRITE_FILES})
    assert rules.idempotency_template == "file_filing:{episode_id}"
    assert rules.source_experiences[0] == "exp-a-src-01"
    caller = rules.caller()
    assert caller.name == "skill:filing_kind_rules@1"
    assert caller.argument_schemas["file_filing"]["required"] == ["doc_id", "kind", "content"]


def _refused(
    make_spec: MakeSpec, edit: Edit | None, name: str = "filing_kind_rules", **top: Any
) -> SkillLoadError:
    with pytest.raises(SkillLoadError) as info:
        make_spec(name, edit, **top)
    return info.value


@pytest.mark.parametrize(
    ("edit", "field", "reason"),
    [
        (lambda r: r.pop("owner"), "<root>", "'owner' is a required property"),
        (lambda r: r["decision"].update(layer="L3"), "decision.layer", "'L3' is not one of"),
        (
            lambda r: r["bounds"].update(retry_limit=-1),
            "bounds.retry_limit",
            "less than the minimum",
        ),
        (lambda r: r.update(surprise=1), "<root>", "Additional properties"),
        (
            lambda r: r["decision"]["procedure"]["rules"][0]["when"][0].update(lt=3),
            "decision.procedure.rules.0.when.0",
            "",
        ),
    ],
)
def test_a_schema_violation_names_the_field(
    make_spec: MakeSpec, edit: Edit, field: str, reason: str
) -> None:
    error = _refused(make_spec, edit)
    assert error.path == "filing_kind_rules.yaml"
    assert error.field == field
    assert reason in error.reason
    assert str(error).startswith(f"filing_kind_rules.yaml: {field}: ")


def test_an_unknown_role_is_refused(make_spec: MakeSpec) -> None:
    error = _refused(make_spec, None, owner="astrology")
    assert (error.field, "not registered") == ("owner", "not registered")
    assert "valuation" in error.reason  # the known roles are listed


def test_a_tool_the_role_lacks_widens_the_permissions_and_is_refused(make_spec: MakeSpec) -> None:
    def widen(raw: dict[str, Any]) -> None:
        raw["bounds"]["permissions"]["tools"].append("place_order")

    error = _refused(make_spec, widen)
    assert error.field == "bounds.permissions.tools"
    assert "place_order" in error.reason
    assert "widen the permissions of role 'valuation'" in error.reason


def test_an_effect_the_role_lacks_is_refused(make_spec: MakeSpec) -> None:
    error = _refused(
        make_spec, lambda r: r["bounds"]["permissions"]["effects"].append("move_funds")
    )
    assert error.field == "bounds.permissions.effects"
    assert "move_funds" in error.reason


def test_a_role_without_permissions_grants_only_reading(make_spec: MakeSpec) -> None:
    error = _refused(make_spec, None, owner="momentum")
    assert error.field == "bounds.permissions.tools"


@pytest.mark.parametrize(
    ("edit", "field", "reason"),
    [
        (lambda r: r["decision"]["action"].update(tool="other"), "decision.action.tool", "not in"),
        (
            lambda r: r["decision"]["procedure"]["rules"][0].update(choose="buy"),
            "decision.procedure.rules.0.choose",
            "'buy' is not an option",
        ),
        (
            lambda r: r["validation"]["evaluation_set"][0].update(expected="buy"),
            "validation.evaluation_set.0.expected",
            "not an option",
        ),
        (
            lambda r: r["decision"].update(layer="L1"),
            "fallback.escalation_target",
            "above the skill's layer",
        ),
        (
            lambda r: r["decision"]["action"]["arguments"].update(extra="{ticker}"),
            "decision.action.arguments",
            "['ticker']",
        ),
        (
            lambda r: r["applicability"]["input_contract"].update(type="banana"),
            "applicability.input_contract",
            "not a valid JSON Schema",
        ),
        (
            lambda r: r["applicability"].update(valid_until="2024-01-01T00:00:00+00:00"),
            "applicability.valid_until",
            "after valid_from",
        ),
    ],
)
def test_a_contract_that_contradicts_itself_is_refused(
    make_spec: MakeSpec, edit: Edit, field: str, reason: str
) -> None:
    error = _refused(make_spec, edit)
    assert error.field == field
    assert reason in error.reason


def test_a_later_version_must_name_its_parent(make_spec: MakeSpec) -> None:
    error = _refused(make_spec, None, version=2)
    assert error.field == "fallback.previous_version"


def test_invalid_yaml_and_duplicate_versions_are_refused(
    registry: RoleRegistry, tmp_path: Path
) -> None:
    with pytest.raises(SkillLoadError, match="not valid YAML"):
        parse_skill("a: [unclosed", "broken.yaml", registry)
    text = (SKILLS_DIR / "filing_kind_rules.yaml").read_text()
    (tmp_path / "a.yaml").write_text(text)
    (tmp_path / "b.yaml").write_text(text)
    with pytest.raises(SkillLoadError, match="filing_kind_rules@1 is also in"):
        load_skill_files(tmp_path.glob("*.yaml"), registry)


def test_the_digest_ignores_the_state_and_nothing_else(make_spec: MakeSpec) -> None:
    base = make_spec()
    assert make_spec(state="active").sha256 == base.sha256
    other = make_spec(edit=lambda r: r["validation"].update(quality_floor=0.5))
    assert other.sha256 != base.sha256
