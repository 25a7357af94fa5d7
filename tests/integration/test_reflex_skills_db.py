"""Skill versions in the ledger: registration checks, every move with evidence, pinning."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypedDict

import pytest
import sqlalchemy as sa

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.experience import ExperienceRecord, read_experience, write_experiences
from reflexmem.reflex.lifecycle import Evidence, EvidenceKind, LifecycleError
from reflexmem.reflex.skills import SkillLoadError, SkillSpec
from reflexmem.reflex.snapshot import load_snapshot
from reflexmem.reflex.versions import register_skill, transition, transitions_of, version_info
from tests.integration.reflex_data import bad, next_version, ok, spec

S, K = SkillState, EvidenceKind


class Move(TypedDict, total=False):
    """Keyword arguments of one move along the path."""

    rollout_fraction: float


PATH: list[tuple[SkillState, list[Evidence], Move]] = [
    (S.VALIDATING, [ok(K.EVALUATION)], {}),
    (S.LIMITED, [ok(K.REPLAY)], {"rollout_fraction": 0.25}),
    (S.ACTIVE, [ok(K.SHADOW), ok(K.ROLLOUT)], {}),
]


def walk_to_active(conn: sa.Connection, skill: SkillSpec) -> None:
    register_skill(conn, skill, actor="t")
    for to, evidence, kw in PATH:
        transition(conn, skill.skill_id, skill.version, to, evidence, actor="t", **kw)


def state(conn: sa.Connection, skill_id: str, version: int) -> SkillState:
    return version_info(conn, skill_id, version).state


def test_a_version_walks_candidate_to_active_with_every_move_recorded(engine: sa.Engine) -> None:
    skill = spec()
    with engine.begin() as conn:
        info = register_skill(conn, skill, actor="loader")
        assert info.state == S.CANDIDATE
        for to, evidence, kw in PATH:
            transition(conn, skill.skill_id, 1, to, evidence, actor="reviewer", **kw)
            assert state(conn, skill.skill_id, 1) == to
    with engine.connect() as conn:
        moves = transitions_of(conn, skill.skill_id)
        row = conn.execute(sa.text("SELECT * FROM skill_versions")).mappings().one()
    assert [(m.from_state, m.to_state) for m in moves] == [
        (None, S.CANDIDATE),
        (S.CANDIDATE, S.VALIDATING),
        (S.VALIDATING, S.LIMITED),
        (S.LIMITED, S.ACTIVE),
    ]
    assert moves[3].evidence[1]["kind"] == "rollout"
    assert moves[3].evidence[1]["metrics"]["treated"] == 40.0
    assert moves[1].actor == "reviewer"
    assert row["rollout_fraction"] is None  # only a limited version has a rollout
    for field in (
        "trigger",
        "input_contract",
        "options",
        "argument_schema",
        "procedure",
        "evaluation_set",
        "counter_examples",
        "post_conditions",
        "permissions",
        "budget",
        "idempotency",
        "rejection_conditions",
        "source_experiences",
    ):
        assert row[field] is not None, field
    assert (row["escalation_target"], row["retry_limit"], row["quality_floor"]) == ("L1", 2, 0.95)


@pytest.mark.parametrize(
    ("setup", "to", "evidence"),
    [
        ([], S.ACTIVE, [ok(K.SHADOW), ok(K.ROLLOUT)]),
        ([], S.LIMITED, [ok(K.REPLAY)]),
        ([], S.VALIDATING, [bad(K.EVALUATION)]),
        ([], S.VALIDATING, [ok(K.EVALUATION, accuracy=0.5)]),
        ([(S.VALIDATING, [ok(K.EVALUATION)])], S.ACTIVE, [ok(K.SHADOW), ok(K.ROLLOUT)]),
        ([(S.VALIDATING, [ok(K.EVALUATION)])], S.QUARANTINED, [bad(K.DRIFT)]),
        ([(S.REJECTED, [bad(K.EVALUATION)])], S.VALIDATING, [ok(K.EVALUATION)]),
    ],
)
def test_a_refused_move_changes_nothing(
    engine: sa.Engine,
    setup: list[tuple[SkillState, list[Evidence]]],
    to: SkillState,
    evidence: list[Evidence],
) -> None:
    skill = spec()
    with engine.begin() as conn:
        register_skill(conn, skill)
        for step, ev in setup:
            transition(conn, skill.skill_id, 1, step, ev, actor="t")
    with engine.connect() as conn:
        before = (state(conn, skill.skill_id, 1), len(transitions_of(conn, skill.skill_id)))
    with pytest.raises(LifecycleError), engine.begin() as conn:
        transition(conn, skill.skill_id, 1, to, evidence, actor="t")
    with engine.connect() as conn:
        after = (state(conn, skill.skill_id, 1), len(transitions_of(conn, skill.skill_id)))
    assert after == before


def test_limited_needs_a_rollout_fraction(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        register_skill(conn, spec())
        transition(conn, "filing_kind_rules", 1, S.VALIDATING, [ok(K.EVALUATION)], actor="t")
        with pytest.raises(LifecycleError, match="rollout fraction"):
            transition(conn, "filing_kind_rules", 1, S.LIMITED, [ok(K.REPLAY)], actor="t")


def test_quarantine_revalidation_and_retirement(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        walk_to_active(conn, spec())
        transition(conn, "filing_kind_rules", 1, S.QUARANTINED, [bad(K.DRIFT)], actor="audit")
        transition(conn, "filing_kind_rules", 1, S.VALIDATING, [ok(K.EVALUATION)], actor="t")
        transition(conn, "filing_kind_rules", 1, S.REJECTED, [bad(K.REPLAY)], actor="t")
        assert state(conn, "filing_kind_rules", 1) == S.REJECTED
        with pytest.raises(LifecycleError, match="terminal state"):
            transition(conn, "filing_kind_rules", 1, S.VALIDATING, [ok(K.EVALUATION)], actor="t")


def test_a_new_active_version_retires_the_old_one_in_the_same_move(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        walk_to_active(conn, spec())
        register_skill(conn, next_version())
        for to, evidence, kw in PATH[:2]:
            transition(conn, "filing_kind_rules", 2, to, evidence, actor="t", **kw)
        records = transition(
            conn, "filing_kind_rules", 2, S.ACTIVE, [ok(K.SHADOW), ok(K.ROLLOUT)], actor="t"
        )
        assert [(r.version, r.to_state) for r in records] == [(1, S.RETIRED), (2, S.ACTIVE)]
        assert records[0].evidence[0] == {
            "kind": "superseded",
            "passed": True,
            "metrics": {},
            "detail": {"by": "filing_kind_rules@2"},
            "run_id": None,
        }
        assert state(conn, "filing_kind_rules", 1) == S.RETIRED


def test_the_database_allows_one_active_version_per_skill(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        walk_to_active(conn, spec())
        register_skill(conn, next_version())
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(sa.text("UPDATE skill_versions SET state = 'active' WHERE version = 2"))


@pytest.mark.parametrize(
    ("make", "field", "reason"),
    [
        (lambda: spec(state="active"), "state", "would skip candidate -> validating -> limited"),
        (lambda: next_version(version=3), "fallback.previous_version", "not registered"),
    ],
)
def test_registration_refuses_skips_and_missing_parents(
    engine: sa.Engine, make: Callable[[], SkillSpec], field: str, reason: str
) -> None:
    with pytest.raises(SkillLoadError) as info, engine.begin() as conn:
        register_skill(conn, make())
    assert (info.value.field, reason in info.value.reason) == (field, True)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM skill_versions")).scalar_one() == 0


def test_a_version_cannot_hold_a_permission_its_parent_lacks(engine: sa.Engine) -> None:
    def narrow(raw: dict[str, Any]) -> None:
        raw["bounds"]["permissions"] = {"tools": [], "effects": ["read"]}
        raw["decision"]["action"] = None

    with engine.begin() as conn:
        register_skill(conn, spec(edit=narrow))
    with pytest.raises(SkillLoadError) as info, engine.begin() as conn:
        register_skill(conn, next_version())
    assert info.value.field == "bounds.permissions.tools"
    assert "parent filing_kind_rules@1" in info.value.reason
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM skill_versions")).scalar_one() == 1


def test_a_registered_version_is_never_rewritten_and_its_state_never_edited(
    engine: sa.Engine,
) -> None:
    with engine.begin() as conn:
        register_skill(conn, spec())
        assert register_skill(conn, spec()).state == S.CANDIDATE  # same file: a no-op
        with pytest.raises(SkillLoadError, match="other content"):
            register_skill(conn, spec(edit=lambda r: r["validation"].update(quality_floor=0.5)))
        with pytest.raises(SkillLoadError, match="never by editing the file"):
            register_skill(conn, spec(state="validating"))


def test_an_episode_pins_the_version_it_started_with(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        walk_to_active(conn, spec())
        pinned = load_snapshot(conn, task_family="classify_filing")
        register_skill(conn, next_version())
        for to, evidence, kw in PATH:
            transition(conn, "filing_kind_rules", 2, to, evidence, actor="t", **kw)
        later = load_snapshot(conn, task_family="classify_filing")
    running = [s.key for s in pinned.usable("classify_filing")]
    assert running == ["filing_kind_rules@1"]  # the running episode keeps version 1
    assert [s.key for s in later.usable("classify_filing")] == ["filing_kind_rules@2"]


def base_record(**kw: object) -> ExperienceRecord:
    values: dict[str, object] = {
        "episode_id": "e1",
        "agent_id": "a",
        "task_family": "classify_filing",
        "status": "success",
        "layer": "L0",
        "skill_id": "filing_kind_rules",
        "skill_version": 1,
        "recorded_at": datetime(2026, 1, 5, tzinfo=UTC),
    }
    values.update(kw)
    return ExperienceRecord.model_validate(values)


def test_an_episode_round_trips_and_must_pin_a_registered_version(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        register_skill(conn, spec())
        write_experiences(conn, [base_record(feedback={"correct": True}, cost=0.5, retries=1)])
    with engine.connect() as conn:
        back = read_experience(conn, "e1")
    assert (back.skill_id, back.skill_version, back.retries, back.feedback) == (
        "filing_kind_rules",
        1,
        1,
        {"correct": True},
    )
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        write_experiences(conn, [base_record(episode_id="e2", skill_version=9)])


@pytest.mark.parametrize(
    "values",
    [
        {"status": "failure"},  # a failure must name its kind
        {"status": "success", "failure_kind": "policy"},  # and nothing else may
        {"status": "guess"},
        {"status": "hold"},  # a hold must say why
        {"status": "success", "layer": "L9"},
        {"status": "success", "retries": -1},
        {"status": "success", "confidence": 2.0},
        {"status": "success", "skill_id": "filing_kind_rules"},  # a version is pinned whole
    ],
)
def test_the_database_refuses_episodes_that_break_the_contract(
    engine: sa.Engine, values: dict[str, object]
) -> None:
    row = {
        "episode_id": "e9",
        "agent_id": "a",
        "task_family": "t",
        "recorded_at": datetime(2026, 1, 5, tzinfo=UTC),
        **values,
    }
    columns = ", ".join(row)
    marks = ", ".join(f":{k}" for k in row)
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO episodes ({columns}) VALUES ({marks})"), row)
