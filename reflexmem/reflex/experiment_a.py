"""Experiment A of the REFLEX design: experience stage x input condition -> layer, answer, hold.

The filing task (`reflexmem.reflex.filings`) is run at four experience stages. Each
stage adds one skill, promoted through the real lifecycle with real evidence
(independent evaluation on its file's evaluation set, replay of past filings, shadow
comparison against the stage before on new filings, a sticky limited rollout), then
routes the same fixed inputs through the router and the common executor:

| stage | skills active |
|---|---|
| novice | none: every input reaches L3 |
| examples | L2 `filing_kind_examples` |
| policy | + L1 `filing_kind_policy` |
| rules | + L0 `filing_kind_rules` |

The inputs cover familiar filings of each kind, an ambiguous one, one with a missing
field, one in a new format and one from a changed environment. The report shows, per
stage and input, which layer decided, how the filing was classified against its
independent answer, and which holds, requests and review items were recorded. No model
is configured unless one is passed: L3 then holds, it never pretends to answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.executor import ToolExecutor
from reflexmem.executor_ledger import LedgerIdempotency
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.deliberate import Deliberator
from reflexmem.reflex.episode import run_episode
from reflexmem.reflex.filings import ENVIRONMENT, TASK_FAMILY, corpus, filing_tool
from reflexmem.reflex.lifecycle import Evidence
from reflexmem.reflex.monitor import rollout_assign, rollout_report
from reflexmem.reflex.review import ReviewEntry, list_reviews
from reflexmem.reflex.router import Task
from reflexmem.reflex.shadow import (
    EXPECTED,
    evaluate_declared,
    labelled_frame,
    live_choices,
    replay_skill,
    shadow_compare,
)
from reflexmem.reflex.skills import SKILLS_DIR, SkillSpec, load_skill_file
from reflexmem.reflex.snapshot import load_snapshot
from reflexmem.reflex.versions import register_skill, transition
from reflexmem.registry import RoleRegistry, load_registry

STAGES: tuple[tuple[str, str | None], ...] = (
    ("novice", None),
    ("examples", "filing_kind_examples"),
    ("policy", "filing_kind_policy"),
    ("rules", "filing_kind_rules"),
)
ROLLOUT_FRACTION = 0.5
ACTOR = "experiment-a"

# fmt: off
INPUTS: tuple[tuple[str, str, dict[str, Any], str, str | None], ...] = (
    # (name, condition, observation, environment, independent answer)
    ("10-Q", "familiar", {"doc_id": "a-10q", "form_type": "10-Q", "title": "Quarterly report",
     "body": "Revenue for the quarter rose and earnings per share grew.", "source": "sec"},
     ENVIRONMENT, "earnings_report"),
    ("8-K guidance", "familiar", {"doc_id": "a-8kg", "form_type": "8-K",
     "title": "Company raises full-year guidance", "body": "Management raises its outlook.",
     "source": "company"}, ENVIRONMENT, "guidance_update"),
    ("8-K results", "familiar", {"doc_id": "a-8kr", "form_type": "8-K",
     "title": "Fourth quarter results", "body": "Quarterly revenue and earnings per share.",
     "source": "company"}, ENVIRONMENT, "earnings_report"),
    ("broker note", "familiar", {"doc_id": "a-note", "form_type": "NOTE",
     "title": "Upgrade to overweight", "body": "We upgrade and raise our price target.",
     "source": "broker"}, ENVIRONMENT, "analyst_note"),
    ("CEO change", "ambiguous", {"doc_id": "a-ceo", "form_type": "8-K",
     "title": "Chief executive transition", "body": "The board appointed a new chief executive.",
     "source": "company"}, ENVIRONMENT, None),
    ("no body", "missing_field", {"doc_id": "a-nobody", "form_type": "10-Q",
     "title": "Quarterly report"}, ENVIRONMENT, "earnings_report"),
    ("XBRL feed", "new_format", {"id": "a-xbrl", "form": "10-Q", "facts": {"Revenues": 4.1e9}},
     ENVIRONMENT, "earnings_report"),
    ("EDGAR v2", "environment_change", {"doc_id": "a-v2", "form_type": "10-Q",
     "title": "Quarterly report", "body": "Revenue for the quarter rose.", "source": "sec"},
     "filings-v2", "earnings_report"),
)
# fmt: on


@dataclass(frozen=True)
class ExperimentRow:
    """One input at one stage."""

    stage: str
    input: str
    condition: str
    layer: str | None
    skill: str | None
    choice: str | None
    expected: str | None
    correct: bool | None
    status: str
    reason: str | None
    trail: str


@dataclass(frozen=True)
class ExperimentAReport:
    """Every row, the promotions made on the way, and the review queue at the end."""

    rows: tuple[ExperimentRow, ...]
    promotions: tuple[tuple[str, str, str], ...]
    reviews: tuple[ReviewEntry, ...]

    def frame(self) -> pl.DataFrame:
        """The rows as a table."""
        return pl.DataFrame([r.__dict__ for r in self.rows])

    def holds(self) -> pl.DataFrame:
        """Rows that ended as hold or request, with their reasons."""
        return self.frame().filter(pl.col("status").is_in(["hold", "request"]))


def promote_to_active(
    conn: sa.Connection, spec: SkillSpec, live: list[SkillSpec], now: datetime
) -> list[tuple[str, str, str]]:
    """Register `spec` and walk it to active on real evidence; returns (key, move, verdict).

    Stops at the first failing evidence, recording the rejection instead.
    """
    register_skill(conn, spec, actor=ACTOR, now=now)
    moves: list[tuple[str, str, str]] = []

    def move(to: SkillState, evidence: list[Evidence], **kw: Any) -> bool:
        ok = all(e.passed for e in evidence)
        target = to if ok else SkillState.REJECTED
        transition(conn, spec.skill_id, spec.version, target, evidence, actor=ACTOR, now=now, **kw)
        moves.append((spec.key, str(target), "; ".join(_summary(e) for e in evidence)))
        return ok

    if not move(SkillState.VALIDATING, [evaluate_declared(spec).evidence()]):
        return moves
    past = labelled_frame(corpus("replay", 60))
    replayed = replay_skill(spec, past).evidence()
    if not move(SkillState.LIMITED, [replayed], rollout_fraction=ROLLOUT_FRACTION):
        return moves
    new = labelled_frame(corpus("shadow", 60))
    shadow = shadow_compare(spec, new, live_choices(live, new))
    items = corpus("rollout", 120)
    frame = labelled_frame(items).with_columns(
        pl.Series("account", [i["account"] for i in items]),
        pl.Series("symbol", [i["symbol"] for i in items]),
    )
    assigned = rollout_assign(frame, spec.key, ROLLOUT_FRACTION)
    mine = live_choices([spec, *live], assigned)
    theirs = live_choices(live, assigned)
    decided = pl.when(pl.col("arm") == "treated").then(mine).otherwise(theirs)
    assigned = assigned.with_columns(
        (decided == pl.col(EXPECTED)).fill_null(False).alias("success")
    )
    rollout = rollout_report(assigned, spec.key)
    move(SkillState.ACTIVE, [shadow.evidence(), rollout.evidence()])
    return moves


def _summary(e: Evidence) -> str:
    keys = ("accuracy", "coverage", "agreement", "treated", "control", "p_worse")
    shown = ", ".join(f"{k}={e.metrics[k]:.3g}" for k in keys if k in e.metrics)
    return f"{e.kind} {'passed' if e.passed else 'failed'} ({shown})"


def run_experiment_a(
    engine: sa.Engine,
    root: Path,
    *,
    registry: RoleRegistry | None = None,
    deliberator: Deliberator | None = None,
    start: datetime | None = None,
) -> ExperimentAReport:
    """Run every stage on `engine` (an empty or fresh ledger), filing under `root`."""
    registry = registry or load_registry()
    now = start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    executor = ToolExecutor.with_tools([filing_tool(root)], idempotency=LedgerIdempotency(engine))
    rows: list[ExperimentRow] = []
    promotions: list[tuple[str, str, str]] = []
    live: list[SkillSpec] = []
    for n, (stage, skill_id) in enumerate(STAGES):
        at = now + timedelta(days=n)
        if skill_id is not None:
            spec = load_skill_file(SKILLS_DIR / f"{skill_id}.yaml", registry)
            with engine.begin() as conn:
                made = promote_to_active(conn, spec, live, at)
            promotions.extend(made)
            if made and made[-1][1] == SkillState.ACTIVE:
                live.append(spec)
        with engine.begin() as conn:
            snapshot = load_snapshot(conn, task_family=TASK_FAMILY, now=at)
        for i, (name, condition, observation, env, expected) in enumerate(INPUTS):
            task = Task(
                episode_id=f"exp-a-{stage}-{i:02d}",
                task_family=TASK_FAMILY,
                environment_version=env,
                observation=observation,
                goal="file the filing as valuation evidence of the right kind",
                agent_id=ACTOR,
                account="research",
                symbol="AAPL",
                expected=expected,
                at=at,
            )
            with engine.begin() as conn:
                result = run_episode(conn, task, snapshot, executor, deliberator=deliberator)
            rec = result.record
            feedback = rec.feedback or {}
            rows.append(
                ExperimentRow(
                    stage=stage,
                    input=name,
                    condition=condition,
                    layer=None if rec.layer is None else str(rec.layer),
                    skill=None if rec.skill_id is None else f"{rec.skill_id}@{rec.skill_version}",
                    choice=(rec.result or {}).get("choice"),
                    expected=expected,
                    correct=feedback.get("correct") if rec.status != "hold" else None,
                    status=str(rec.status),
                    reason=rec.status_reason,
                    trail=" > ".join(f"{s['layer']}:{s['outcome']}" for s in rec.escalations),
                )
            )
    with engine.connect() as conn:
        reviews = tuple(list_reviews(conn, status=None))
    return ExperimentAReport(tuple(rows), tuple(promotions), reviews)


def format_experiment_a(report: ExperimentAReport) -> str:
    """The report as plain text: one line per stage and input, then promotions and reviews."""
    head = f"{'stage':<9} {'input':<14} {'condition':<18} {'layer':<5} {'skill':<24} "
    lines = [head + f"{'choice':<16} {'expected':<16} {'status':<7} reason"]
    for r in report.rows:
        mark = {True: "ok", False: "WRONG", None: ""}[r.correct]
        lines.append(
            f"{r.stage:<9} {r.input:<14} {r.condition:<18} {r.layer or '-':<5} "
            f"{r.skill or '-':<24} {r.choice or '-':<16} {r.expected or '-':<16} "
            f"{r.status:<7} {r.reason or mark}"
        )
    lines.append("")
    lines.extend(f"promotion {key} -> {to}: {why}" for key, to, why in report.promotions)
    lines.extend(
        f"review #{e.review_id} {e.kind} {e.task_family} env={e.environment_version} "
        f"seen {e.occurrences}x ({e.status})"
        for e in report.reviews
    )
    return "\n".join(lines)
