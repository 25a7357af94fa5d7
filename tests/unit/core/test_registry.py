from pathlib import Path

import pytest

from reflexmem.registry import SKILLS_DIR, RegistryError, load_registry

ROLE = """
  - id: {id}
    description: d
    failure_modes: [a]
    maturation: {{days: 1}}
    outcome_probe: {{kind: forward_return, horizon_days: 1}}
    reflection_prompt: compare the thesis with the outcome
"""


def _skill(path: Path, *roles: str, uses: str = "") -> Path:
    body = "skill: s\nversion: 1\nroles:\n" + "".join(ROLE.format(id=r) for r in roles)
    if uses:
        body += f"uses: [{uses}]\n"
    path.write_text(body)
    return path


def test_shipped_skills_declare_the_four_core_roles() -> None:
    registry = load_registry()
    assert {"valuation", "momentum", "cycle_analysis", "risk"} <= set(registry.ids)
    policy = registry.get("valuation").policy
    assert policy.failure_modes
    assert policy.maturation.days > 0
    assert policy.reflection_prompt


def test_a_role_declared_twice_names_the_file_and_the_id(tmp_path: Path) -> None:
    a = _skill(tmp_path / "a.yaml", "alpha")
    b = _skill(tmp_path / "b.yaml", "alpha")
    with pytest.raises(RegistryError, match=r"b\.yaml.*'alpha'.*declared twice.*a\.yaml"):
        load_registry([a, b])


def test_a_used_but_undeclared_role_names_the_file_and_the_id(tmp_path: Path) -> None:
    a = _skill(tmp_path / "a.yaml", "alpha", uses="ghost")
    with pytest.raises(RegistryError, match=r"a\.yaml.*'ghost'.*declared in no skill file"):
        load_registry([a])


def test_a_malformed_policy_names_the_file_and_the_role(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "skill: s\nversion: 1\nroles:\n  - id: beta\n    description: d\n    failure_modes: []\n"
        "    maturation: {days: 1}\n    outcome_probe: {kind: forward_return, horizon_days: 1}\n"
        "    reflection_prompt: compare the thesis\n"
    )
    with pytest.raises(RegistryError, match=r"bad\.yaml.*'beta'"):
        load_registry([path])


def test_unknown_roles_have_no_generic_fallback() -> None:
    registry = load_registry()
    assert "generic" not in registry
    with pytest.raises(KeyError, match="'sentiment' is not registered"):
        registry.get("sentiment")


def test_skill_files_ship_inside_the_package() -> None:
    assert SKILLS_DIR.is_dir()
    assert any(SKILLS_DIR.glob("*.yaml"))
