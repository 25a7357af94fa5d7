"""Audits of active trading checks (pure): a sample audit and drift against validation.

An active check keeps its place only while what it does still looks like what it was
validated on. For the decisions it checked since its last audit (or its activation)
whose outcome is now known:

* **sample audit**: a fixed-size random sample (`SAMPLE` = 50, seeded by the version and
  the window, so a rerun draws the same sample) of those checks is compared with the
  decisions' independent answers. It fails when an exact one-sided binomial test says
  the check is right less often than its quality floor at `AUDIT_ALPHA` = 0.01.
* **drift**: `monitor.drift_report` compares the recent checks with the validation
  window (the evaluation and replay decisions it was promoted on): the outcome (right
  or wrong) and each input the check reads, both its values and whether it is present,
  at a family-wise 0.01 (Bonferroni).

Either failing quarantines the version; it is revalidated on decisions made after the
quarantine (`evidence.evaluation_evidence` with `after`). 0.01 is stricter than the
promotion tests' 0.05 because an audit repeats every cycle and a false alarm takes a
working check out of service; both levels were fixed a priori. At least `MIN_ROWS`
recent checks are needed before an audit is made at all.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import datetime

import polars as pl

from reflexmem.reflex.conditions import ROW
from reflexmem.reflex.evidence import MIN_ROWS, VersionView, in_scope
from reflexmem.reflex.lifecycle import Evidence, EvidenceKind
from reflexmem.reflex.monitor import drift_report
from reflexmem.reflex.procedures import decide_frame, procedure_fields
from reflexmem.reflex.shadow import EXPECTED
from reflexmem.reflex.trading import PROCEED

SAMPLE = 50
AUDIT_ALPHA = 0.01


@dataclass(frozen=True)
class AuditResult:
    """The evidence of one audit and the window it covered.

    `through` is the newest decision audited, not the clock: a decision whose outcome is
    not known yet is audited by a later run, never skipped.
    """

    evidence: tuple[Evidence, ...]
    after: datetime | None
    through: datetime
    recent: int

    @property
    def passed(self) -> bool:
        """No test failed."""
        return all(e.passed for e in self.evidence)


def _inputs(spec_fields: list[str], frame: pl.DataFrame) -> pl.DataFrame:
    """Each field the check reads, and `<field>__present` (yes / no), as drift inputs."""
    cols = [pl.col(f) for f in spec_fields if f in frame.columns]
    present = [
        pl.when(pl.col(f).is_null())
        .then(pl.lit("no"))
        .otherwise(pl.lit("yes"))
        .alias(f"{f}__present")
        for f in spec_fields
        if f in frame.columns
    ]
    return frame.select(*cols, *present, pl.col("correct"))


def sample_audit(view: VersionView, recent: pl.DataFrame, through: datetime) -> Evidence:
    """Audit a seeded sample of recent checks against the independent answers."""
    from scipy.stats import binomtest

    seed = zlib.crc32(f"{view.key}|{through.isoformat()}".encode())
    sample = recent.sample(n=min(SAMPLE, recent.height), seed=seed, shuffle=True)
    n = sample.height
    right = int(sample["correct"].cast(pl.Int64).sum())
    floor = view.spec.quality_floor
    p_below = float(binomtest(right, n, floor, alternative="less").pvalue) if n else 1.0
    metrics = {
        "n": float(n),
        "correct": float(right),
        "accuracy": right / n if n else 0.0,
        "quality_floor": floor,
        "p_below_floor": p_below,
    }
    detail = {"skill": view.key, "sampled_from": recent.height, "alpha": AUDIT_ALPHA}
    return Evidence(EvidenceKind.AUDIT, p_below >= AUDIT_ALPHA, metrics, detail)


def recent_checks(
    view: VersionView,
    episodes: pl.DataFrame,
    checks: pl.DataFrame,
    *,
    after: datetime | None,
) -> pl.DataFrame:
    """The version's checks since `after` whose decisions' outcomes are known, judged."""
    mine = checks.filter(pl.col("checked_key") == view.key)
    if after is not None:
        mine = mine.filter(pl.col("decided_at_ts") > after)
    rows = in_scope(view.spec, episodes, after=after)
    joined = rows.join(mine.select("decision_id", "stopped"), on="decision_id", how="inner")
    return joined.with_columns(
        (pl.col("stopped") == (pl.col(EXPECTED) != PROCEED)).alias("correct")
    )


def validation_window(view: VersionView, episodes: pl.DataFrame) -> pl.DataFrame:
    """The evaluation and replay decisions the version was promoted on, judged by it.

    A check stops a decision when it confidently answers its verdict, or when it is
    below its floor (it escalates and, with no model, the decision is held).
    """
    rows = in_scope(view.spec, episodes, after=view.quarantined_at, through=view.limited_at)
    rows = rows.filter(pl.col("split").is_in(["evaluation", "replay"]))
    answers = decide_frame(view.spec, rows)
    confident = pl.col("choice").is_not_null() & (
        pl.col("confidence") >= view.spec.confidence_floor
    )
    stopped = answers.select(
        pl.col(ROW), ((confident & (pl.col("choice") != PROCEED)) | ~confident).alias("stopped")
    )
    judged = rows.join(stopped, on=ROW, how="left", maintain_order="left")
    return judged.with_columns(
        (pl.col("stopped") == (pl.col(EXPECTED) != PROCEED)).alias("correct")
    )


def audit(
    view: VersionView,
    episodes: pl.DataFrame,
    checks: pl.DataFrame,
    *,
    after: datetime | None,
    through: datetime,
) -> AuditResult | None:
    """Sample audit and drift of one active version (None: too few recent checks)."""
    recent = recent_checks(view, episodes, checks, after=after)
    if recent.height < MIN_ROWS:
        return None
    validation = validation_window(view, episodes)
    if validation.height == 0:
        return None
    fields = sorted(procedure_fields(view.spec) - {"role_id"})
    old, new = _inputs(fields, validation), _inputs(fields, recent)
    names = [c for c in old.columns if c != "correct"]
    drift = drift_report(view.key, old, new, outcome="correct", inputs=names)
    newest = recent["decided_at_ts"].max()
    end = newest if isinstance(newest, datetime) else through
    evidence = (sample_audit(view, recent, end), drift.evidence())
    return AuditResult(evidence, after, end, recent.height)
