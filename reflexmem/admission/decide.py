"""Turn expectation failures into verdicts: role case (eligible or pending) or quarantine.

Conservation is checked here, not hoped for: every staged execution gets exactly one
verdict, and a failure naming an execution that was not staged is an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from reflexmem.ledger.enums import CaseState, QuarantineReason

FAILURE_SCHEMA = {"execution_id": pl.String, "expectation": pl.String, "severity": pl.String}
PRIORITY = [r.value for r in QuarantineReason]


class ConservationError(AssertionError):
    """Rows in != admitted + pending + quarantined: the batch must not be written."""


@dataclass(frozen=True)
class Verdicts:
    """The outcome of one admission batch, ready to persist."""

    cases: pl.DataFrame
    quarantine: pl.DataFrame
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
        """Rows held back."""
        return self.quarantine.height


def _reason(expectation: pl.Expr) -> pl.Expr:
    """Map a failed expectation plus the row's evidence to a reason code."""
    return (
        pl.when(expectation == "role_registered")
        .then(pl.lit(QuarantineReason.UNKNOWN_ROLE.value))
        .when((expectation == "origin_manual") & (pl.col("origin_class") == "automated"))
        .then(pl.lit(QuarantineReason.AUTOMATED_ORIGIN.value))
        .when((expectation == "origin_manual") & (pl.col("origin_class") == "unknown"))
        .then(pl.lit(QuarantineReason.UNKNOWN_ORIGIN.value))
        .when(expectation == "origin_manual")
        .then(pl.lit(QuarantineReason.UNVERIFIED_EXTERNAL.value))
        .when((expectation == "preview_consumed_once") & (pl.col("preview_state") == "missing"))
        .then(pl.lit(QuarantineReason.PREVIEW_MISSING.value))
        .when((expectation == "preview_consumed_once") & (pl.col("preview_state") == "unconsumed"))
        .then(pl.lit(QuarantineReason.PREVIEW_UNCONSUMED.value))
        .when(expectation == "preview_consumed_once")
        .then(pl.lit(QuarantineReason.PREVIEW_REUSED.value))
        .when(expectation == "identity_matches")
        .then(pl.lit(QuarantineReason.IDENTITY_MISMATCH.value))
        .otherwise(pl.lit(None, dtype=pl.String))
    )


def decide(staged: pl.DataFrame, failures: pl.DataFrame, *, batch_id: str) -> Verdicts:
    """Verdicts for every staged row; `failures` has execution_id, expectation, severity."""
    stray = failures.join(staged.select("execution_id"), on="execution_id", how="anti")
    if stray.height:
        raise ConservationError(f"failures name executions that were not staged: {stray.head(3)}")
    critical = failures.filter(pl.col("severity") == "critical")
    evidence = staged.select(
        "execution_id",
        "decision_id",
        "role_id",
        "origin",
        "origin_class",
        "preview_state",
        "identity_mismatch",
        "automation_markers",
    )
    flagged = critical.join(evidence, on="execution_id", how="left").with_columns(
        _reason(pl.col("expectation")).alias("reason_code")
    )
    rank = pl.col("reason_code").replace_strict(PRIORITY, list(range(len(PRIORITY))))
    quarantine = (
        flagged.with_columns(rank.alias("_rank"))
        .sort("_rank")
        .group_by("execution_id", maintain_order=True)
        .agg(
            pl.col("reason_code").first(),
            pl.col("expectation")
            .unique(maintain_order=True)
            .sort()
            .str.join(",")
            .alias("failed_expectations"),
            pl.col("decision_id").first(),
            pl.col("role_id").first(),
            pl.format(
                "origin={} ({}); preview={}; identity={}; markers={}",
                pl.col("origin").first(),
                pl.col("origin_class").first(),
                pl.col("preview_state").first(),
                pl.col("identity_mismatch").first().fill_null("ok"),
                pl.col("automation_markers").first().fill_null("none"),
            ).alias("detail"),
        )
        .rename({"execution_id": "subject_id"})
        .with_columns(pl.lit("execution").alias("subject_kind"), pl.lit(batch_id).alias("batch_id"))
    )
    deferred = (
        failures.filter(pl.col("severity") != "critical")
        .select("execution_id")
        .unique()
        .with_columns(pl.lit(True).alias("_deferred"))
    )
    passing = staged.join(
        quarantine.select(pl.col("subject_id").alias("execution_id")),
        on="execution_id",
        how="anti",
    ).join(deferred, on="execution_id", how="left")
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
            pl.lit(batch_id).alias("batch_id"),
        )
        .struct.json_encode()
        .alias("provenance"),
    )
    verdicts = Verdicts(cases=cases, quarantine=quarantine, rows_in=staged.height)
    if verdicts.admitted + verdicts.pending + verdicts.quarantined != staged.height:
        raise ConservationError(
            f"rows in {staged.height} != admitted {verdicts.admitted} + pending "
            f"{verdicts.pending} + quarantined {verdicts.quarantined}"
        )
    return verdicts
