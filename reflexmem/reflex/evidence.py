"""The evidence of each lifecycle step of a trading check, from the ledger's episodes (pure).

Every step is judged on decisions the step before did not see:

* candidate -> validating: the `evaluation` split, held apart from the sources; passes
  when accuracy reaches the quality floor, no counter-example is held, and the check is
  right more often than always proceeding would be;
* validating -> limited: the `replay` split, past decisions replayed beside what was
  live for them; the same test;
* limited -> active: every decision made since it became limited, in a shadow run
  beside the cluster's active checks (not worse: McNemar) and in its sticky rollout
  (the treated arm not worse: two-proportion test).

A check's independent answer is the reflection of the decision once its outcome was
known: the check should stop exactly the decisions in which reflection found its lesson
(`expected` is its verdict option there, `proceed` elsewhere). Counter-examples are the
role's decisions with another lesson: a check must not claim them. A step with too
little data returns None and the version waits: at least `MIN_ROWS` (30, the usual
floor for a proportion) decisions and `MIN_POSITIVES` (5) with the lesson, so that
"better than always proceeding" can be observed at all. Both were fixed a priori.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

import polars as pl

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.conditions import compile_all
from reflexmem.reflex.lifecycle import Evidence, EvidenceKind
from reflexmem.reflex.monitor import rollout_assign, rollout_report
from reflexmem.reflex.shadow import (
    EXPECTED,
    EvaluationReport,
    evaluate_skill,
    held_apart,
    live_choices,
    replay_skill,
    shadow_compare,
)
from reflexmem.reflex.skills import SkillSpec
from reflexmem.reflex.trading import PROCEED

MIN_ROWS = 30
MIN_POSITIVES = 5
ROLLOUT_FRACTION = 0.5
"""Share of account/symbol pairs a limited check decides: both arms equally large."""


@dataclass(frozen=True)
class VersionView:
    """A trading skill version with the times of the moves its windows start from."""

    spec: SkillSpec
    state: SkillState
    changed_at: datetime
    rollout_fraction: float | None = None
    limited_at: datetime | None = None
    active_at: datetime | None = None
    quarantined_at: datetime | None = None
    retired_at: datetime | None = None
    mlflow_model_version: str | None = None
    history: tuple[tuple[str, datetime], ...] = ()
    """Every move as (state entered, when), oldest first."""

    @property
    def key(self) -> str:
        """`skill_id@version`."""
        return self.spec.key

    @property
    def cluster(self) -> tuple[str, str]:
        """(namespace, pattern): the lesson this check was learned from."""
        p = self.spec.provenance
        return str(p.get("namespace", "")), str(p.get("pattern", ""))

    @property
    def left_active_at(self) -> datetime | None:
        """When it stopped being active after its last activation (quarantine, retirement)."""
        if self.active_at is None:
            return None
        ends = [t for t in (self.quarantined_at, self.retired_at) if t and t > self.active_at]
        return min(ends) if ends else None

    @property
    def verdict(self) -> str:
        """The option that stops a decision."""
        return next(o for o in self.spec.options if o != PROCEED)


def expected_for(spec: SkillSpec) -> pl.Expr:
    """The independent answer of each episode row for this check (see the module doc)."""
    pattern = str(spec.provenance.get("pattern", ""))
    verdict = next(o for o in spec.options if o != PROCEED)
    return (
        pl.when(pl.col("pattern") == pattern).then(pl.lit(verdict)).otherwise(pl.lit(PROCEED))
    ).alias(EXPECTED)


def in_scope(
    spec: SkillSpec,
    episodes: pl.DataFrame,
    *,
    after: datetime | None = None,
    through: datetime | None = None,
    split: str | None = None,
) -> pl.DataFrame:
    """Labelled rows the check applies to, held apart from its sources, in a window."""
    rows = episodes
    if split is not None:
        rows = rows.filter(pl.col("split") == split)
    if after is not None:
        rows = rows.filter(pl.col("decided_at_ts") > after)
    if through is not None:
        rows = rows.filter(pl.col("decided_at_ts") <= through)
    rows = held_apart(rows.filter(compile_all(spec.trigger)), spec)
    return rows.with_columns(expected_for(spec))


def stopped_by(checks: pl.DataFrame, skill_ids: Sequence[str], name: str) -> pl.DataFrame:
    """Per decision: whether any recorded check of these skills stopped it (`name`)."""
    mine = checks.filter(pl.col("checked_id").is_in(list(skill_ids)))
    return mine.group_by("decision_id").agg(pl.col("stopped").any().alias(name))


def _beats_baseline(report: EvaluationReport, rows: pl.DataFrame, kind: EvidenceKind) -> Evidence:
    baseline = float(rows.select((pl.col(EXPECTED) == PROCEED).mean()).item() or 0.0)
    positives = int((rows[EXPECTED] != PROCEED).sum())
    base = report.evidence()
    better = report.accuracy > baseline
    metrics = {
        **base.metrics,
        "baseline_accuracy": baseline,
        "positives": float(positives),
        "quality_floor": report.quality_floor,
    }
    detail = {**base.detail, "better_than_proceeding": better, "split": str(kind)}
    return Evidence(kind, base.passed and better, metrics, detail)


def _enough(rows: pl.DataFrame) -> bool:
    return rows.height >= MIN_ROWS and int((rows[EXPECTED] != PROCEED).sum()) >= MIN_POSITIVES


def evaluation_evidence(
    view: VersionView, episodes: pl.DataFrame, *, after: datetime | None = None
) -> Evidence | None:
    """Independent evaluation on the held-apart evaluation split (None: too little yet)."""
    spec = view.spec
    rows = in_scope(spec, episodes, after=after, split="evaluation")
    if not _enough(rows):
        return None
    others = rows.filter(pl.col("pattern").is_not_null() & (pl.col(EXPECTED) == PROCEED))
    report = evaluate_skill(spec, rows, counter_examples=others if others.height else None)
    return _beats_baseline(report, rows, EvidenceKind.EVALUATION)


def replay_evidence(
    view: VersionView,
    episodes: pl.DataFrame,
    checks: pl.DataFrame,
    cluster_ids: Sequence[str],
    *,
    after: datetime | None = None,
) -> Evidence | None:
    """Replay of the past decisions of the replay split, beside what was live for them."""
    spec = view.spec
    rows = in_scope(spec, episodes, after=after, split="replay")
    if not _enough(rows):
        return None
    live = stopped_by(checks, cluster_ids, "live_stopped")
    rows = rows.join(live, on="decision_id", how="left").with_columns(
        pl.when(pl.col("live_stopped").fill_null(False))
        .then(pl.lit(view.verdict))
        .otherwise(pl.lit(PROCEED))
        .alias("live_choice")
    )
    report = replay_skill(spec, rows, live_col="live_choice")
    return _beats_baseline(report, rows, EvidenceKind.REPLAY)


def shadow_rollout_evidence(
    view: VersionView,
    episodes: pl.DataFrame,
    checks: pl.DataFrame,
    champions: Sequence[SkillSpec],
) -> list[Evidence] | None:
    """Shadow beside the cluster's active checks and the sticky rollout, since `limited`."""
    spec = view.spec
    rows = in_scope(spec, episodes, after=view.limited_at)
    if rows.height < MIN_ROWS:
        return None
    live = live_choices(champions, rows).fill_null(PROCEED) if champions else None
    if live is None:
        live = pl.Series("live", [PROCEED] * rows.height, dtype=pl.String)
    shadow = shadow_compare(spec, rows, live)
    fraction = view.rollout_fraction or ROLLOUT_FRACTION
    assigned = rollout_assign(rows, spec.key, fraction)
    treated = stopped_by(checks, [spec.skill_id], "treated_stopped")
    control = stopped_by(checks, [c.skill_id for c in champions], "control_stopped")
    arms = assigned.join(treated, on="decision_id", how="left").join(
        control, on="decision_id", how="left"
    )
    stopped = (
        pl.when(pl.col("arm") == "treated")
        .then(pl.col("treated_stopped"))
        .otherwise(pl.col("control_stopped"))
        .fill_null(False)
    )
    arms = arms.with_columns((stopped == (pl.col(EXPECTED) != PROCEED)).alias("success"))
    rollout = rollout_report(arms, spec.key)
    if min(rollout.treated, rollout.control) < rollout.min_per_arm:
        return None
    return [shadow.evidence(), rollout.evidence()]


def with_run(evidence: Sequence[Evidence], run_id: str | None) -> list[Evidence]:
    """The same evidence naming the run that recorded it."""
    return [replace(e, run_id=run_id) for e in evidence]
