"""The lessons table of a reflection batch: every verdict beside its case's ledger IDs.

A tracker logs it as the batch's artifact, so a reviewer reads a decision's outcome
class and lesson next to the primary evaluation run that was judged, without the ledger.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from reflexmem.reflection.types import Reflection

COLUMNS = ("case_id", "state", "outcome_class", "lesson", "layer", "error")


def verdict_frame(frame: pl.DataFrame, verdicts: Sequence[Reflection]) -> pl.DataFrame:
    """The lessons table of a batch: each verdict beside its case's ledger IDs."""
    judged = pl.DataFrame(
        {
            "case_id": [r.case_id for r in verdicts],
            "state": [r.case_state.value for r in verdicts],
            "outcome_class": [
                None if r.outcome_class is None else r.outcome_class.value for r in verdicts
            ],
            "lesson": [r.lesson for r in verdicts],
            "layer": [r.layer for r in verdicts],
            "error": [r.error for r in verdicts],
        },
        schema=dict.fromkeys(COLUMNS, pl.String),
    )
    ids = frame.select(
        "case_id",
        "decision_id",
        "role_id",
        "symbol",
        "direction",
        "decided_at",
        pl.col("run_id").alias("evaluation_run_id"),
    )
    return ids.join(judged, on="case_id", how="inner")
