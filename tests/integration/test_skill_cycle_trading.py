"""End to end on the trading domain: a lesson becomes an active check with a measured effect.

One ledger (the demo's scenario on 20 000 decisions) is walked week by week through the
whole cycle; the tests read what the operations left in it.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
import yaml

from adapters import migrate
from adapters.db import make_engine
from reflexmem.ledger.checksums import table_checksums
from reflexmem.memory.rule_config import RuleConfig
from reflexmem.operations.cycle import run_skills
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.operations.skill_lifecycle import skill_effects, skill_status
from reflexmem.reflex.experience import read_experience
from reflexmem.reflex.outcomes import MAX_HELD, MIN_HELD
from reflexmem.reflex.versions import transitions_of
from tests.integration.skill_data import frame, walk
from tests.support import make_resources

RULE = "momentum_technicals_missing_rule"


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Resources, datetime]]:
    tmp = tmp_path_factory.mktemp("skill-walk")
    engine = make_engine(f"sqlite:///{tmp / 'ledger.sqlite'}")
    migrate.upgrade(engine)
    res = make_resources(engine)
    first = walk(res, tmp)
    yield res, first
    engine.dispose()


def _moves(
    res: Resources, skill: str, version: int
) -> list[tuple[str | None, str, list[dict[str, Any]]]]:
    with res.engine.connect() as conn:
        rows = transitions_of(conn, skill, version)
    return [(r.from_state, r.to_state, list(r.evidence)) for r in rows]


def test_a_lesson_walks_every_state_to_active_on_evidence(
    walked: tuple[Resources, datetime],
) -> None:
    res, _ = walked
    moves = _moves(res, RULE, 1)
    states = [to for _, to, _ in moves]
    assert states[:4] == ["candidate", "validating", "limited", "active"]
    kinds = [[e["kind"] for e in ev] for _, _, ev in moves[1:4]]
    assert kinds == [["evaluation"], ["replay"], ["shadow", "rollout"]]
    for _, _, evidence in moves[1:4]:
        assert all(e["passed"] for e in evidence)
    evaluation = moves[1][2][0]["metrics"]
    assert evaluation["source_overlap"] == 0
    assert evaluation["accuracy"] == 1.0
    assert evaluation["accuracy"] > evaluation["baseline_accuracy"]
    rollout = moves[3][2][1]["metrics"]
    assert min(rollout["treated"], rollout["control"]) >= 30
    sources = frame(res, f"SELECT * FROM skill_sources WHERE skill_id = '{RULE}' AND version = 1")
    lessons = frame(
        res,
        "SELECT DISTINCT rc.lesson FROM skill_sources s "
        f"JOIN role_cases rc ON rc.case_id = s.case_id WHERE s.skill_id = '{RULE}'",
    )
    assert sources.height > 10
    assert lessons.height == 1
    assert "without the required technicals" in str(lessons["lesson"][0])


def test_the_active_check_removes_its_failure_mode_from_decisions_that_go_ahead(
    walked: tuple[Resources, datetime],
) -> None:
    res, _ = walked
    windows = {w.window: w for w in skill_effects(res).windows if w.skill == f"{RULE}@1"}
    off, control, treated, on = (
        windows[k] for k in ("off", "rollout control", "rollout treated", "on")
    )
    assert off.decisions > 100
    assert off.stopped == 0
    assert off.rate_proceeded > 0.05
    assert control.stopped == 0
    assert control.rate_proceeded > 0.05
    assert treated.caught == treated.failure_cases > 0
    assert treated.rate_proceeded == 0.0
    assert on.decisions > 300
    assert on.caught == on.failure_cases > 0
    assert on.false_stops == 0
    assert on.rate_proceeded == 0.0
    learned = frame(
        res,
        "SELECT MAX(d.decided_at) AS last FROM skill_sources s "
        "JOIN trading_decisions d ON d.decision_id = s.decision_id "
        f"WHERE s.skill_id = '{RULE}' AND s.version = 1",
    )
    limited = frame(
        res,
        f"SELECT MIN(at) AS at FROM skill_transitions WHERE skill_id = '{RULE}' "
        "AND version = 1 AND to_state = 'limited'",
    )
    # the rollout and "on" windows start after it was limited: none is a source
    assert str(learned["last"][0]) < str(limited["at"][0])


def test_a_stricter_learned_version_is_judged_on_outcomes_not_labels(
    walked: tuple[Resources, datetime],
) -> None:
    # Version 2 is stricter than its role's evidence rule, so it is learned, not policy:
    # agreement with reflection's labels cannot move it; its realized returns must. On
    # daily bars it holds every decision (technicals are never half a day old), so
    # nothing passes to compare it with: after MAX_HELD held it is rejected, not left
    # holding its rollout's every decision while it waits.
    res, _ = walked
    moves = _moves(res, RULE, 2)
    assert [to for _, to, _ in moves] == ["candidate", "validating", "limited", "rejected"]
    (outcome,) = moves[-1][2]
    assert outcome["kind"] == "outcome"
    assert not outcome["passed"]
    assert outcome["detail"]["verdict"] == "none"
    assert outcome["metrics"]["n_held"] >= MAX_HELD
    assert outcome["metrics"]["n_passed"] < MIN_HELD
    status = {s.view.key: s for s in skill_status(res)}
    v2 = status[f"{RULE}@2"]
    assert v2.kind == "learned"
    assert v2.outcome is not None
    assert v2.outcome.n_passed < MIN_HELD <= MAX_HELD <= v2.outcome.n_held


def test_input_drift_quarantines_the_active_check_and_revalidation_follows(
    walked: tuple[Resources, datetime],
) -> None:
    res, _ = walked
    moves = _moves(res, RULE, 1)
    quarantine = next(ev for _, to, ev in moves if to == "quarantined")
    drift = next(e for e in quarantine if e["kind"] == "drift")
    audit = next(e for e in quarantine if e["kind"] == "audit")
    assert not drift["passed"]
    assert "technicals_age_days" in drift["detail"]["drifted"]
    assert audit["passed"]  # still right: it is its inputs that moved
    after = [to for _, to, _ in moves][
        moves.index(next(m for m in moves if m[1] == "quarantined")) :
    ]
    assert after[:2] == ["quarantined", "validating"]


def test_no_skill_is_generated_from_a_rule_that_restates_a_lesson(
    walked: tuple[Resources, datetime],
) -> None:
    # Generated versions come from episode clusters or from the memory's rules, which are
    # outcome-tested conditions, none of them a lesson's pattern; a rule's check carries
    # the contrast it formed on or its confirmation, and is active only once confirmed.
    res, _ = walked
    versions = frame(res, "SELECT source_yaml, state FROM skill_versions")
    made = [(yaml.safe_load(y)["provenance"], state) for y, state in versions.iter_rows()]
    kinds = {p["kind"] for p, _ in made}
    assert kinds <= {"episode_cluster", "procedural_rule", "file"}  # "file": a person's
    from_rules = [(p, state) for p, state in made if p["kind"] == "procedural_rule"]
    assert from_rules  # the walk forms avoid-rules of conditions a check can read
    assert all(RuleConfig().is_condition(p["pattern"]) for p, _ in from_rules)
    assert all(("formation" in p) != ("confirmation" in p) for p, _ in from_rules)
    rules = frame(res, "SELECT tags, state FROM memory_entries WHERE tier = 'procedural'")
    confirmed = {str(t) for t, state in rules.iter_rows() if state == "active"}
    for p, state in from_rules:
        if state == "active":
            assert any(p["pattern"] in t for t in confirmed)
    tags = rules["tags"]
    assert not any("pattern:" in str(t) for t in tags)


def test_check_episodes_follow_the_contract_and_link_a_trade_to_its_versions(
    walked: tuple[Resources, datetime],
) -> None:
    res, _ = walked
    checks = frame(
        res,
        "SELECT episode_id, decision_id, status, skill_id, skill_version FROM episodes "
        "WHERE agent_id = 'reflex-check' AND status = 'request' LIMIT 20",
    )
    assert checks.height == 20
    with res.engine.connect() as conn:
        for episode_id in checks["episode_id"]:
            record = read_experience(conn, str(episode_id))
            assert record.result
            assert record.result["missing"]
            assert record.skill_id is not None
            assert record.status_reason
    decision = str(checks["decision_id"][0])
    chain = frame(
        res,
        "SELECT DISTINCT e.skill_id, e.skill_version, v.state FROM episodes e "
        "JOIN skill_versions v ON v.skill_id = e.skill_id AND v.version = e.skill_version "
        f"WHERE e.decision_id = '{decision}' AND e.agent_id = 'reflex-check'",
    )
    assert chain.height >= 1


def test_the_skills_reach_a_fixed_point_at_the_last_clock(
    walked: tuple[Resources, datetime],
) -> None:
    res, _ = walked
    runner, newest = DirectRunner(res), res.prices.newest()
    run_skills(runner, newest)  # may take on what the audit revalidated (one step further)
    with res.engine.connect() as conn:
        before = table_checksums(conn)
    again = run_skills(runner, newest)
    with res.engine.connect() as conn:
        after = table_checksums(conn)
    assert {t for t in before if before[t] != after[t]} == set()
    assert again.shadow.checks.decisions == 0
    assert again.generation.registered == ()
