"""Turn expectation failures into verdicts: role case (eligible or pending), quarantine, revocation.

Conservation is checked here, not hoped for: every staged execution judged for the first
time gets exactly one verdict, a re-judged case is either kept or revoked, and a failure
naming an execution that was not staged is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from reflexmem.ledger.enums import CaseState, QuarantineReason

FAILURE_SCHEMA = {"execution_id": pl.String, "expectation": pl.String, "severity": pl.String}
PRIORITY = [r.value for r in QuarantineReason]
R = QuarantineReason
REASONS: dict[str, QuarantineReason] = {
    "role_registered": R.UNKNOWN_ROLE,
    "identity_matches": R.IDENTITY_MISMATCH,
    "markers_well_formed": R.MALFORMED_MARKERS,
    "executed_after_decision": R.EXECUTED_BEFORE_DECISION,
    "preview_before_execution": R.PREVIEW_AFTER_EXECUTION,
    "consumed_before_execution": R.CONSUMPTION_OUT_OF_ORDER,
    "position_identified": R.POSITION_AMBIGUOUS,
    "settled_after_open": R.SETTLED_BEFORE_OPEN,
    "settlement_has_return": R.SETTLEMENT_RETURN_INVALID,
}
"""Expectations whose reason code is fixed (the suite's `meta.reason` says the same)."""
EVIDENCE = (
    "execution_id",
    "decision_id",
    "role_id",
    "origin",
    "origin_class",
    "preview_state",
    "identity_mismatch",
    "automation_markers",
    "case_id",
    "case_state",
    "case_batch_id",
)


CASE_COLUMNS = ("case_id", "case_state", "case_batch_id")


class ConservationError(AssertionError):
    """Rows in != admitted + pending + quarantined: the batch must not be written."""


@dataclass(frozen=True)
class Verdicts:
    """The outcome of one admission batch, ready to persist."""

    cases: pl.DataFrame
    quarantine: pl.DataFrame
    revocations: pl.DataFrame
    rows_in: int

    @property
    def admitted(self) -> int:
        """Cases eligible for reflection now."""
        return int((self.cases["state"] == CaseState.ELIGIBLE.value).sum())

    @property
    def pending(self) -> int:
        """Cases waiting for their outcome."""
        return int((self.cases["state"] == CaseState.PENDING.value).sum())

    @property
    def quarantined(self) -> int:
        """Rows judged for the first time and held back."""
        return self.quarantine.height - self.revocations.height

    @property
    def revoked(self) -> int:
        """Cases of earlier batches this batch took back."""
        return self.revocations.height


def _reason(expectation: pl.Expr) -> pl.Expr:
    """Map a failed expectation plus the row's evidence to a reason code."""
    fixed = pl.lit(None, dtype=pl.String)
    for name, code in REASONS.items():
        fixed = pl.when(expectation == name).then(pl.lit(code.value)).otherwise(fixed)
    origin = pl.col("origin_class")
    preview = pl.col("preview_state")
    return (
        pl.when((expectation == "origin_manual") & (origin == "automated"))
        .then(pl.lit(R.AUTOMATED_ORIGIN.value))
        .when((expectation == "origin_manual") & (origin == "unknown"))
        .then(pl.lit(R.UNKNOWN_ORIGIN.value))
        .when(expectation == "origin_manual")
        .then(pl.lit(R.UNVERIFIED_EXTERNAL.value))
        .when((expectation == "preview_consumed_once") & (preview == "missing"))
        .then(pl.lit(R.PREVIEW_MISSING.value))
        .when((expectation == "preview_consumed_once") & (preview == "unconsumed"))
        .then(pl.lit(R.PREVIEW_UNCONSUMED.value))
        .when(expectation == "preview_consumed_once")
        .then(pl.lit(R.PREVIEW_REUSED.value))
        .otherwise(fixed)
    )


def _held(staged: pl.DataFrame, critical: pl.DataFrame, batch_id: str) -> pl.DataFrame:
    """One quarantine row per staged execution with a critical failure (primary reason first)."""
    flagged = critical.join(staged.select(EVIDENCE), on="execution_id", how="left").with_columns(
        _reason(pl.col("expectation")).alias("reason_code")
    )
    unmapped = flagged.filter(pl.col("reason_code").is_null())
    if unmapped.height:
        names = sorted(set(unmapped["expectation"].to_list()))
        raise ConservationError(f"critical expectations with no reason code: {names}")
    rank = pl.col("reason_code").replace_strict(PRIORITY, list(range(len(PRIORITY))))
    evidence = pl.format(
        "origin={} ({}); preview={}; identity={}; markers={}",
        pl.col("origin").first(),
        pl.col("origin_class").first(),
        pl.col("preview_state").first(),
        pl.col("identity_mismatch").first().fill_null("ok"),
        pl.col("automation_markers").first().fill_null("none"),
    )
    revoking = pl.format(
        "revoked case {} ({}, admitted by batch {}) in batch {}: ",
        pl.col("case_id").first(),
        pl.col("case_state").first(),
        pl.col("case_batch_id").first(),
        pl.lit(batch_id),
    )
    return (
        flagged.with_columns(rank.alias("_rank"))
        .sort("_rank", "expectation")
        .group_by("execution_id", maintain_order=True)
        .agg(
            pl.col("reason_code").first(),
            pl.col("expectation").unique().sort().str.join(",").alias("failed_expectations"),
            pl.col("decision_id").first(),
            pl.col("role_id").first(),
            pl.col("case_id").first(),
            pl.col("case_state").first(),
            pl.col("case_batch_id").first(),
            pl.when(pl.col("case_id").first().is_null())
            .then(evidence)
            .otherwise(pl.concat_str(revoking, evidence))
            .alias("detail"),
        )
        .sort("execution_id")
    )


def decide(staged: pl.DataFrame, failures: pl.DataFrame, *, batch_id: str) -> Verdicts:
    """Verdicts for every staged row; `failures` has execution_id, expectation, severity.

    Staged rows without a `case_id` are judged for the first time: a critical failure
    quarantines them, a warning keeps them pending, otherwise they become eligible.
    Rows with a `case_id` are re-judged cases: a critical failure revokes the case
    (quarantine plus a revocation row), anything else leaves it as it is.
    """
    if "case_id" not in staged.columns:
        staged = staged.with_columns(pl.lit(None, dtype=pl.String).alias(c) for c in CASE_COLUMNS)
    stray = failures.join(staged.select("execution_id"), on="execution_id", how="anti")
    if stray.height:
        raise ConservationError(f"failures name executions that were not staged: {stray.head(3)}")
    held = _held(staged, failures.filter(pl.col("severity") == "critical"), batch_id)
    quarantine = held.select(
        pl.lit("execution").alias("subject_kind"),
        pl.col("execution_id").alias("subject_id"),
        "decision_id",
        "role_id",
        "reason_code",
        "failed_expectations",
        "detail",
        pl.lit(batch_id).alias("batch_id"),
    )
    revocations = held.filter(pl.col("case_id").is_not_null()).select(
        "case_id",
        "execution_id",
        "reason_code",
        "failed_expectations",
        pl.col("case_state").alias("previous_state"),
        pl.col("case_batch_id").alias("admitted_batch_id"),
        pl.lit(batch_id).alias("revoked_by_batch_id"),
        "detail",
    )
    new = staged.filter(pl.col("case_id").is_null())
    deferred = (
        failures.filter(pl.col("severity") != "critical")
        .select("execution_id")
        .unique()
        .with_columns(pl.lit(True).alias("_deferred"))
    )
    passing = new.join(held.select("execution_id"), on="execution_id", how="anti").join(
        deferred, on="execution_id", how="left"
    )
    deferred_flag = pl.col("_deferred").fill_null(False)
    cases = passing.select(
        pl.format("case-{}", pl.col("execution_id")).alias("case_id"),
        "execution_id",
        pl.lit(batch_id).alias("batch_id"),
        pl.when(deferred_flag)
        .then(pl.lit(CaseState.PENDING.value))
        .otherwise(pl.lit(CaseState.ELIGIBLE.value))
        .alias("state"),
        pl.when(deferred_flag).then(pl.col("settlement")).otherwise(None).alias("pending_reason"),
        pl.struct(
            "origin",
            "origin_class",
            "preview_id",
            "position_id",
            pl.lit(batch_id).alias("batch_id"),
        )
        .struct.json_encode()
        .alias("provenance"),
    )
    verdicts = Verdicts(
        cases=cases, quarantine=quarantine, revocations=revocations, rows_in=new.height
    )
    if verdicts.admitted + verdicts.pending + verdicts.quarantined != new.height:
        raise ConservationError(
            f"rows in {new.height} != admitted {verdicts.admitted} + pending "
            f"{verdicts.pending} + quarantined {verdicts.quarantined}"
        )
    return verdicts
