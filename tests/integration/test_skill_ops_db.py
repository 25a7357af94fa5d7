"""The skill operations on both backends: generation, checks, promotion, sources, MLflow."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import sqlalchemy as sa

from reflexmem.operations import skill_lifecycle, skills
from reflexmem.reflex.rule_checks import FIELDS as CHECKABLE
from reflexmem.reflex.skills import SkillLoadError
from reflexmem.reflex.versions import transitions_of
from tests.integration.skill_data import clock_between, frame, reflected
from tests.support import AS_OF, make_resources, scalar


def test_generation_checks_and_promotion_on_the_ledger(engine: sa.Engine, tmp_path: Path) -> None:
    res = make_resources(engine)
    first = reflected(res, tmp_path)
    middle = clock_between(first, 0.6)
    generated = skills.generate_candidates(res, as_of=middle)
    assert any(k.endswith("_rule@1") for k in generated.registered)
    again = skills.generate_candidates(res, as_of=middle)
    assert again.registered == ()  # a lesson is generalised once
    opened = skills.check_decisions(res, as_of=middle)
    assert opened.decisions > 0
    assert opened.episodes == 0  # nothing usable yet
    early = skill_lifecycle.advance_skills(res, as_of=middle)
    limited = [m.skill for m in early.moves if m.to == "limited"]
    assert limited
    late_checks = skills.check_decisions(res, as_of=AS_OF)
    assert late_checks.after == opened.as_of  # the window starts where the last one ended
    assert late_checks.episodes > 0
    assert skills.check_decisions(res, as_of=AS_OF).decisions == 0  # checked once
    late = skill_lifecycle.advance_skills(res, as_of=AS_OF)
    judged = {m.skill for m in late.moves if m.to in ("active", "rejected")}
    for key in limited:  # judged on the later decisions, or waiting for more of them
        assert key in judged or late.waiting[key] == "too few decisions since it became limited"
    promoted = [m.skill for m in late.moves if m.to == "active" and m.skill in limited]
    assert promoted
    skill_id, version = promoted[0].split("@")
    with engine.connect() as conn:
        states = [t.to_state for t in transitions_of(conn, skill_id, int(version))]
    assert states == ["candidate", "validating", "limited", "active"]
    sources = frame(
        res,
        "SELECT s.episode_id, e.case_id, e.decision_id FROM skill_sources s "
        f"JOIN episodes e ON e.episode_id = s.episode_id WHERE s.skill_id = '{skill_id}'",
    )
    assert sources.height > 0
    assert sources["case_id"].null_count() == 0
    checks = scalar(engine, "SELECT COUNT(*) FROM skill_checks WHERE kind = 'gate'")
    assert checks == 2  # two windows; the third call had no new window and recorded none
    moves = scalar(engine, "SELECT COUNT(*) FROM skill_checks WHERE moved_to IS NOT NULL")
    assert moves == len(early.moves) + len(late.moves)


def test_a_proposal_that_breaks_its_contract_is_refused_and_nothing_is_written(
    engine: sa.Engine, tmp_path: Path
) -> None:
    res = make_resources(engine)
    text = (
        "skill_id: widened\nversion: 1\nowner: momentum\nsource_experiences: []\n"
        "state: active\napplicability: {task_family: trade_decision, environment_version: t,"
        " input_contract: {type: object}}\ndecision: {layer: L0, options: [proceed],"
        " procedure: {kind: rules, rules: [{when: [{field: x, equals: 1}], choose: proceed}]}}\n"
        "validation: {evaluation_set: [], quality_floor: 0.9}\n"
        "bounds: {permissions: {tools: [place_order], effects: [move_funds]}, retry_limit: 0}\n"
        "fallback: {escalation_target: L1}\n"
    )
    with pytest.raises(SkillLoadError) as refused:
        skills.propose_skill(res, text, "widened.yaml", as_of=AS_OF)
    assert refused.value.field == "bounds.permissions.tools"
    assert scalar(engine, "SELECT COUNT(*) FROM skill_versions") == 0


def test_every_skill_version_is_in_the_mlflow_registry_with_parent_and_evidence(
    engine: sa.Engine, tmp_path: Path, mlflow_uri: str
) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("the registry does not depend on the ledger's backend")
    from adapters.tracking.skills import SkillTracker, model_name
    from apps.demo.skills import stricter_variant

    tracker = SkillTracker(mlflow_uri, artifact_root=tmp_path / "artifacts")
    res = replace(make_resources(engine), skill_tracker=tracker)
    first = reflected(res, tmp_path)
    middle = clock_between(first, 0.6)
    generated = skills.generate_candidates(res, as_of=middle)
    skills.check_decisions(res, as_of=middle)
    skill_lifecycle.advance_skills(res, as_of=middle)
    rule = next(k for k in generated.registered if k.endswith("_rule@1")).split("@")[0]
    yaml_v1 = frame(res, f"SELECT source_yaml FROM skill_versions WHERE skill_id = '{rule}'")
    made = skills.propose_skill(res, stricter_variant(str(yaml_v1["source_yaml"][0])), "v2.yaml",
                                as_of=middle)  # fmt: skip
    assert made.skill == f"{rule}@2"
    skill_lifecycle.advance_skills(res, as_of=middle)
    client = tracker.client
    versions = frame(
        res, "SELECT skill_id, version, state, mlflow_model_version FROM skill_versions"
    )
    assert versions["mlflow_model_version"].null_count() == 0
    for skill_id, version, state, mv in versions.iter_rows():
        found = client.get_model_version(model_name(skill_id), mv)
        assert found.tags["reflexmem.skill_version"] == str(version)
        assert found.tags["reflexmem.lifecycle_state"] == state
        assert int(found.tags["reflexmem.source_experience_count"]) > 0
        if found.tags["reflexmem.provenance.kind"] == "procedural_rule":  # a confirmed rule's
            assert found.tags["reflexmem.provenance.rule"].startswith("proc:role:")
            assert found.tags["reflexmem.provenance.pattern"].split(":")[0] in CHECKABLE
        else:
            assert found.tags["reflexmem.provenance.pattern"].startswith("pattern:")
        parent = "1" if version == 2 else "none"
        assert found.tags["reflexmem.parent_version"] == parent
        with engine.connect() as conn:
            moves = transitions_of(conn, skill_id, version)
        for move in moves[1:]:
            run = client.get_run(move.mlflow_run_id)
            kinds = {e["kind"] for e in move.evidence}
            assert {f"{k}.passed" for k in kinds} <= set(run.data.metrics)
            assert run.info.status == "FINISHED"
    for skill_id in set(versions["skill_id"]):
        mine = versions.filter(
            (versions["skill_id"] == skill_id) & (versions["state"] == "limited")
        )
        aliases = client.get_registered_model(model_name(skill_id)).aliases
        if mine.height:  # the newest limited version is the challenger
            newest = mine.sort("version")["mlflow_model_version"][-1]
            assert str(aliases.get("challenger")) == str(newest)
        else:
            assert "challenger" not in aliases
    assert client.download_artifacts(
        client.get_model_version(model_name(rule), "2").run_id,
        f"skill/{rule}.yaml",
        str(tmp_path),
    )
