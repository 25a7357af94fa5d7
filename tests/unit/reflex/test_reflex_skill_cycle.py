"""The skill learning path on trading decisions: clusters, candidates, checks, evidence."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TypedDict, Unpack

import polars as pl
import pytest
import yaml

from reflexmem.ledger.reflex_enums import EpisodeStatus, Layer, SkillState
from reflexmem.reflex.candidates import candidate_files, quality_floor
from reflexmem.reflex.clusters import describe
from reflexmem.reflex.effect import measure_effect
from reflexmem.reflex.evidence import (
    VersionView,
    evaluation_evidence,
    replay_evidence,
    shadow_rollout_evidence,
)
from reflexmem.reflex.gate import check_frame
from reflexmem.reflex.monitor import drift_report
from reflexmem.reflex.router import Task, route
from reflexmem.reflex.skills import SkillLoadError, SkillSpec, parse_skill
from reflexmem.reflex.snapshot import PinnedSkill, SkillSnapshot
from reflexmem.reflex.trading import (
    TRADE_ENVIRONMENT,
    TRADE_FAMILY,
    observation_json,
    observations,
)
from reflexmem.registry import RoleRegistry
from tests.unit.reflex.trading_data import START, episodes, raw_decisions

NOW = START + timedelta(days=30)


def _specs(registry: RoleRegistry, frame: pl.DataFrame) -> dict[str, SkillSpec]:
    fit = frame.filter(pl.col("split") == "fit")
    pattern = str(frame.filter(pl.col("pattern").is_not_null())["pattern"][0])
    cluster = describe(
        registry, fit, "momentum", pattern, gist="decided without technicals", outcome_class="md"
    )
    files = candidate_files(cluster, fit, registry, now=NOW, taken=set())
    return {spec.layer.value: spec for spec in (parse_skill(t, s, registry) for s, t in files)}


class Moves(TypedDict, total=False):
    """The optional fields of a `VersionView`: when its windows start."""

    rollout_fraction: float | None
    limited_at: datetime | None
    active_at: datetime | None
    quarantined_at: datetime | None
    retired_at: datetime | None


def _view(
    spec: SkillSpec, state: SkillState = SkillState.CANDIDATE, **times: Unpack[Moves]
) -> VersionView:
    return VersionView(spec=spec, state=state, changed_at=NOW, **times)


def test_observations_carry_evidence_ages_and_the_record_in_words(registry: RoleRegistry) -> None:
    raw = raw_decisions(3, gap=2)
    leak = raw["evidence"][1].replace(
        '2025-01-06T15:30:00+00:00"}]', '2026-03-15T00:00:00+00:00"}]'
    )
    assert leak != raw["evidence"][1]
    raw = raw.with_columns(pl.Series("evidence", [raw["evidence"][0], leak, raw["evidence"][2]]))
    obs = observations(raw, registry)
    assert obs["technicals_age_days"].to_list()[0] is None  # absent
    assert obs["technicals_age_days"][1] < 0  # dated after the decision
    assert obs["price_history_age_days"].to_list() == [0.0, 0.0, 0.0]
    assert "technicals dated after the decision" in obs["summary"][1]
    first = json.loads(observation_json(obs, registry)[0])
    assert "technicals_age_days" not in first
    assert first["price_history_age_days"] == 0.0


def test_a_cluster_separates_fixed_conditions_from_variable_arguments(
    registry: RoleRegistry,
) -> None:
    frame = episodes(registry, 400)
    fit = frame.filter(pl.col("split") == "fit")
    pattern = str(frame.filter(pl.col("pattern").is_not_null())["pattern"][0])
    cluster = describe(registry, fit, "momentum", pattern, gist="g", outcome_class="md")
    assert [a.name for a in cluster.conjunction] == ["technicals_missing"]
    assert cluster.fixed[0].name == "technicals_missing"
    assert cluster.fixed[0].contrast_rate == 0
    assert set(cluster.variable) == {"account", "symbol"}  # every 8th: always short
    assert "direction_short" in {a.name for a in cluster.fixed}
    assert (cluster.precision, cluster.recall) == (1.0, 1.0)
    assert cluster.members == fit.filter(pl.col("pattern") == pattern).height


def test_candidates_are_valid_skill_files_at_every_layer(registry: RoleRegistry) -> None:
    specs = _specs(registry, episodes(registry, 400))
    assert set(specs) == {"L0", "L1", "L2"}
    rule = specs["L0"]
    assert rule.procedure["kind"] == "rules"
    assert specs["L1"].procedure["kind"] == "scores"
    assert specs["L2"].procedure["kind"] == "examples"
    assert rule.verdicts == {
        "request_evidence": {
            "status": "request",
            "reason": "technicals_missing",
            "missing": ["technicals"],
            "note": rule.verdicts["request_evidence"]["note"],
        }
    }
    assert "{symbol}" in rule.verdicts["request_evidence"]["note"]
    assert rule.trigger == [{"field": "role_id", "equals": "momentum"}]
    assert rule.provenance["kind"] == "episode_cluster"
    assert rule.quality_floor == quality_floor(1 - rule.provenance["fit_members"] / (
        rule.provenance["fit_members"] + rule.provenance["fit_contrast"]))  # fmt: skip
    assert quality_floor(0.99) == 0.995
    assert quality_floor(0.5) == 0.9
    assert set(rule.source_experiences) < set(specs["L2"].source_experiences)
    assert rule.tools == frozenset()
    assert {str(e) for e in rule.effects} == {"read"}


def test_evaluation_and_replay_pass_a_check_that_stops_exactly_its_lesson(
    registry: RoleRegistry,
) -> None:
    frame = episodes(registry, 600)
    rule = _specs(registry, frame)["L0"]
    found = evaluation_evidence(_view(rule), frame)
    assert found is not None
    assert found.passed
    assert found.metrics["accuracy"] == 1.0 > found.metrics["baseline_accuracy"]
    assert found.metrics["source_overlap"] == 0.0
    empty = pl.DataFrame(schema={"decision_id": pl.String, "checked_id": pl.String,
                                 "stopped": pl.Boolean})  # fmt: skip
    replayed = replay_evidence(_view(rule, SkillState.VALIDATING), frame, empty, [rule.skill_id])
    assert replayed is not None
    assert replayed.passed
    assert replayed.metrics["agreement_with_live"] < 1.0  # live let every decision through


def test_a_check_no_better_than_always_proceeding_fails_its_evaluation(
    registry: RoleRegistry,
) -> None:
    frame = episodes(registry, 800, gap=10**6)  # technicals never absent
    lesson = frame["episode_index"] % 16 == 0  # a lesson that no condition of the record explains
    frame = frame.with_columns(
        pl.when(lesson).then(pl.lit("pattern:unexplained")).otherwise(None).alias("pattern")
    )
    specs = _specs(registry, frame)
    assert "L0" not in specs  # no conjunction of fixed conditions is right often enough
    found = evaluation_evidence(_view(specs["L1"]), frame)
    assert found is not None
    assert not found.passed
    assert found.detail["better_than_proceeding"] is False


def test_too_few_held_apart_decisions_wait_instead_of_deciding(registry: RoleRegistry) -> None:
    frame = episodes(registry, 600)
    rule = _specs(registry, frame)["L0"]
    assert evaluation_evidence(_view(rule), frame.head(40)) is None


def test_a_verdict_routes_to_a_request_naming_the_missing_evidence(
    registry: RoleRegistry,
) -> None:
    frame = episodes(registry, 400)
    rule = _specs(registry, frame)["L0"]
    snapshot = SkillSnapshot((PinnedSkill(rule, SkillState.ACTIVE, None),), NOW)
    obs = observations(raw_decisions(2), registry)
    tasks = [_task(obs, i, registry) for i in range(2)]
    missing, present = (route(t, snapshot) for t in tasks)
    assert missing.status == EpisodeStatus.REQUEST
    assert missing.missing == ("technicals",)
    assert missing.status_reason == "technicals_missing"
    assert missing.layer == Layer.L0
    assert "request technicals before short AAPL for acct-main" in missing.rationale
    assert present.status is None
    assert present.choice == "proceed"


def _task(obs: pl.DataFrame, i: int, registry: RoleRegistry) -> Task:
    row = obs.row(i, named=True)
    return Task(
        episode_id=f"t{i}",
        task_family=TRADE_FAMILY,
        environment_version=TRADE_ENVIRONMENT,
        observation=json.loads(observation_json(obs.slice(i, 1), registry)[0]),
        account=row["account"],
        symbol=row["symbol"],
        at=row["decided_at"],
    )


def test_checks_agree_with_the_router_decision_by_decision(registry: RoleRegistry) -> None:
    frame = episodes(registry, 400)
    specs = _specs(registry, frame)
    pinned = (
        PinnedSkill(specs["L0"], SkillState.ACTIVE, None),
        PinnedSkill(specs["L1"], SkillState.LIMITED, 0.5),
        PinnedSkill(specs["L2"], SkillState.ACTIVE, None),
    )
    obs = observations(raw_decisions(120, start=START + timedelta(days=40)), registry)
    gap = pl.int_range(pl.len()) == 5  # a record without its direction: a request, not a guess
    obs = obs.with_columns(
        pl.when(gap).then(None).otherwise(pl.col("direction")).alias("direction")
    )
    rows = check_frame(SkillSnapshot(pinned, NOW), obs, registry)
    assert 120 * 2 < rows.height < 120 * 3  # L1 has no active version: only its rollout
    by_key = {(r["decision_id"], r["checked"].split("@")[0]): r for r in rows.iter_rows(named=True)}
    compared = 0
    for i in range(obs.height):
        task = _task(obs, i, registry)
        for pin in pinned:
            routed = route(task, SkillSnapshot((pin,), NOW))
            row = by_key.get((obs["decision_id"][i], pin.spec.skill_id))
            if routed.skill is None and routed.layer == Layer.L3 and not routed.trail[:-1]:
                assert row is None  # not this skill's task (outside its rollout)
                continue
            assert row is not None
            status = "success" if routed.status is None else str(routed.status)
            layer = None if routed.layer is None else str(routed.layer)
            assert (row["layer"], row["status"]) == (layer, status)
            if routed.missing:
                assert json.loads(row["result"])["missing"] == list(routed.missing)
            assert row["status_reason"] == (routed.status_reason if routed.status else None)
            assert row["skill_id"] == (routed.skill.spec.skill_id if routed.skill else None)
            assert json.loads(row["result"])["choice"] == routed.choice
            compared += 1
    assert compared == rows.height
    assert rows.filter(pl.col("status_reason") == "missing_information").height >= 2


def test_skill_files_refuse_a_verdict_that_is_no_option_or_a_request_naming_nothing(
    registry: RoleRegistry,
) -> None:
    rule = _specs(registry, episodes(registry, 400))["L0"]
    raw = yaml.safe_load(rule.source_yaml)
    raw["decision"]["verdicts"] = {"halt": {"status": "hold", "reason": "x"}}
    with pytest.raises(SkillLoadError) as bad:
        parse_skill(yaml.safe_dump(raw), "bad.yaml", registry)
    assert bad.value.field == "decision.verdicts.halt"
    raw["decision"]["verdicts"] = {"request_evidence": {"status": "request", "reason": "x"}}
    with pytest.raises(SkillLoadError) as empty:
        parse_skill(yaml.safe_dump(raw), "bad.yaml", registry)
    assert empty.value.field == "decision.verdicts.request_evidence.missing"


def test_two_windows_both_always_right_show_no_outcome_drift() -> None:
    same = pl.DataFrame({"correct": [True] * 80})
    report = drift_report("s@1", same, same.head(40), outcome="correct")
    assert report.drifted == ()
    assert report.tests[0].p_value == 1.0


def _checks(rows: pl.DataFrame, obs: pl.DataFrame) -> pl.DataFrame:
    """Check rows as `trading.read_checks` returns them."""
    return rows.join(obs.select("decision_id", "decided_at"), on="decision_id").select(
        "decision_id",
        pl.col("decided_at").alias("decided_at_ts"),
        pl.col("checked").alias("checked_key"),
        pl.col("checked").str.split("@").list.first().alias("checked_id"),
        pl.col("status").is_in(["hold", "request"]).alias("stopped"),
    )


def test_shadow_rejects_a_stricter_version_that_is_worse_on_new_decisions(
    registry: RoleRegistry,
) -> None:
    past = episodes(registry, 600)
    v1 = _specs(registry, past)["L0"]
    raw = yaml.safe_load(v1.source_yaml)
    rules = raw["decision"]["procedure"]["rules"]
    rules.insert(
        1, {"when": [{"field": "technicals_age_days", "gt": 0.5}], "choose": rules[0]["choose"]}
    )
    raw.update(version=2, fallback={**raw["fallback"], "previous_version": 1})
    v2 = parse_skill(yaml.safe_dump(raw), "v2.yaml", registry)
    evaluated = evaluation_evidence(_view(v2), past)
    assert evaluated is not None
    assert evaluated.passed
    limited_at = START + timedelta(days=30)
    new = episodes(registry, 400, start=limited_at + timedelta(hours=1), lag_days=2)
    both = pl.concat([past, new], how="vertical_relaxed")
    snapshot = SkillSnapshot(
        (PinnedSkill(v1, SkillState.ACTIVE, None), PinnedSkill(v2, SkillState.LIMITED, 0.5)), NOW
    )
    decisions = observations(raw_decisions(400, start=limited_at + timedelta(hours=1), lag_days=2),
                             registry)  # fmt: skip
    checks = _checks(check_frame(snapshot, decisions, registry), decisions)
    view = _view(v2, SkillState.LIMITED, limited_at=limited_at, rollout_fraction=0.5)
    found = shadow_rollout_evidence(view, both, checks, [v1])
    assert found is not None
    shadow, rollout = found
    assert not shadow.passed
    assert shadow.metrics["p_worse"] < 0.05
    assert shadow.metrics["live_accuracy"] == 1.0 > shadow.metrics["candidate_accuracy"]
    assert not rollout.passed


def test_the_effect_is_the_failure_rate_of_decisions_that_went_ahead(
    registry: RoleRegistry,
) -> None:
    past = episodes(registry, 600)
    rule = _specs(registry, past)["L0"]
    limited_at = START + timedelta(days=30)
    active_at = limited_at + timedelta(days=10)
    later = raw_decisions(500, start=limited_at + timedelta(hours=1))
    new = episodes(registry, 500, start=limited_at + timedelta(hours=1))
    # checks: limited during the first 10 days (half the pairs), active after
    obs = observations(later, registry)
    early = obs.filter(pl.col("decided_at") <= active_at)
    late = obs.filter(pl.col("decided_at") > active_at)
    limited = SkillSnapshot((PinnedSkill(rule, SkillState.LIMITED, 0.5),), NOW)
    active = SkillSnapshot((PinnedSkill(rule, SkillState.ACTIVE, None),), NOW)
    rows = pl.concat([check_frame(limited, early, registry), check_frame(active, late, registry)])
    checks = _checks(rows, obs)
    both = pl.concat([past, new], how="vertical_relaxed")
    view = replace(
        _view(rule, SkillState.ACTIVE),
        limited_at=limited_at,
        active_at=active_at,
        history=(("candidate", NOW), ("limited", limited_at), ("active", active_at)),
    )
    effect = measure_effect(view, both, checks, through=active_at + timedelta(days=60))
    windows = {w.window: w for w in effect}
    assert set(windows) == {"off", "rollout control", "rollout treated", "on"}
    off, on = windows["off"], windows["on"]
    assert off.stopped == 0
    assert off.rate_proceeded == off.rate_without_check > 0.1
    assert on.caught == on.failure_cases > 0
    assert on.false_stops == 0
    assert on.rate_proceeded == 0
    assert (
        windows["rollout treated"].rate_proceeded == 0 < windows["rollout control"].rate_proceeded
    )
