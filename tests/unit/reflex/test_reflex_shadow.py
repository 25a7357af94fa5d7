"""Shadow primitives: evaluation held apart, replay, shadow comparison, rollout, drift."""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from reflexmem.reflex.filings import corpus
from reflexmem.reflex.lifecycle import EvidenceKind
from reflexmem.reflex.monitor import drift_report, rollout_assign, rollout_report
from reflexmem.reflex.rollout import rollout_bucket
from reflexmem.reflex.shadow import (
    evaluate_declared,
    evaluate_skill,
    held_apart,
    labelled_frame,
    live_choices,
    replay_skill,
    shadow_compare,
)
from tests.unit.reflex.reflex_helpers import MakeSpec


def test_evaluation_counts_confident_answers_and_coverage(make_spec: MakeSpec) -> None:
    report = evaluate_declared(make_spec("filing_kind_policy"))
    assert (report.n, report.answered, report.correct) == (4, 3, 3)
    assert report.coverage == 0.75
    assert report.passed
    ev = report.evidence("run-1")
    assert (ev.kind, ev.passed, ev.run_id) == (EvidenceKind.EVALUATION, True, "run-1")
    assert ev.metrics["source_overlap"] == 0


def test_evaluation_on_the_skills_own_sources_is_counted_and_fails(make_spec: MakeSpec) -> None:
    spec = make_spec("filing_kind_examples")
    examples = spec.procedure["examples"]
    frame = labelled_frame(examples)
    report = evaluate_skill(spec, frame)
    assert report.source_overlap == len(examples)
    assert not report.passed
    assert held_apart(frame, spec).height == 0


def test_a_wrong_confident_counter_example_fails_the_evaluation(make_spec: MakeSpec) -> None:
    def claim_results(raw: dict[str, Any]) -> None:
        raw["decision"]["procedure"]["rules"].append(
            {"when": [{"field": "form_type", "equals": "8-K"}], "choose": "guidance_update"}
        )

    report = evaluate_declared(make_spec("filing_kind_rules", claim_results))
    assert report.accuracy == 1.0
    assert report.counter_errors == 1
    assert not report.passed


def test_replay_reports_agreement_with_the_live_decisions(make_spec: MakeSpec) -> None:
    spec = make_spec("filing_kind_policy")
    frame = labelled_frame(corpus("replay", 30))
    live = frame["expected"].to_list()
    live[0] = "analyst_note"
    report = replay_skill(spec, frame.with_columns(pl.Series("live_choice", live)))
    assert report.kind == EvidenceKind.REPLAY
    assert report.agreement is not None
    assert 0.9 < report.agreement < 1.0
    assert report.confusion["earnings_report"].get("<escalated>", 0) > 0


def test_a_worse_candidate_is_caught_by_the_shadow_and_never_acts(make_spec: MakeSpec) -> None:
    def always_note(raw: dict[str, Any]) -> None:
        raw["decision"]["procedure"] = {
            "kind": "rules",
            "rules": [{"when": [{"field": "title", "missing": False}], "choose": "analyst_note"}],
        }

    bad = make_spec("filing_kind_rules", always_note)
    good = make_spec("filing_kind_examples")
    frame = labelled_frame(corpus("shadow", 60))
    live = live_choices([good], frame)
    report = shadow_compare(bad, frame, live)
    assert report.worse
    assert not report.passed
    assert report.live_only_right == 40
    assert report.candidate_only_right == 0
    assert shadow_compare(make_spec("filing_kind_rules"), frame, live).passed


def test_the_rollout_arms_follow_the_router_and_count_outcomes() -> None:
    n = 200
    frame = pl.DataFrame(
        {
            "account": [f"a{i % 50}" for i in range(n)],
            "symbol": [("AAPL", "MSFT")[i % 2] for i in range(n)],
        }
    )
    assigned = rollout_assign(frame, "s@2", 0.3)
    expected = [
        "treated" if rollout_bucket(a, s, "s@2") < 0.3 else "control" for a, s in frame.iter_rows()
    ]
    assert assigned["arm"].to_list() == expected
    good = assigned.with_columns(pl.lit(True).alias("success"))
    report = rollout_report(good, "s@2")
    assert report.treated + report.control == n
    assert report.passed
    worse = assigned.with_columns((pl.col("arm") == "control").alias("success"))
    assert not rollout_report(worse, "s@2").passed
    assert not rollout_report(good, "s@2", min_per_arm=n).passed


def test_drift_is_found_in_a_shifted_window_and_not_in_a_similar_one() -> None:
    rng = np.random.default_rng(7)

    def window(p_success: float, mean: float, kinds: list[float]) -> pl.DataFrame:
        return pl.DataFrame(
            {
                "success": rng.random(600) < p_success,
                "latency": rng.normal(mean, 1.0, 600),
                "form_type": rng.choice(["10-Q", "8-K", "NOTE"], 600, p=kinds),
            }
        )

    base = window(0.9, 0.0, [0.4, 0.4, 0.2])
    same = drift_report(
        "s@1",
        base,
        window(0.9, 0.0, [0.4, 0.4, 0.2]),
        outcome="success",
        inputs=["latency", "form_type"],
    )
    assert same.drifted == ()
    assert same.evidence().passed
    moved = drift_report(
        "s@1",
        base,
        window(0.7, 0.8, [0.1, 0.3, 0.6]),
        outcome="success",
        inputs=["latency", "form_type"],
    )
    assert set(moved.drifted) == {"outcome", "latency", "form_type"}
    assert moved.threshold == 0.01 / 3
    ev = moved.evidence()
    assert (ev.kind, ev.passed) == (EvidenceKind.DRIFT, False)
    assert all(t.psi is not None and t.psi > 0.1 for t in moved.tests[1:])
