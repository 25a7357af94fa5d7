"""Legacy `role_memory` rows mapped to ledger rows: pure functions over polars frames.

The legacy table (documented in docs/operations.md, "Legacy migration") has the columns
`id`, `role`, `content` (required) and `score`, `created_at`, `provenance`,
`decision_id` (optional: a missing one reads as NULL in every row). Each row becomes
exactly one of

* a `legacy_cases` row, when its role is registered: content and provenance kept as
  the legacy table held them, the decision linked when the ledger holds it, the score
  kept for audit only (see `reflexmem.ledger.legacy_models` for why not `role_cases`);
* a `quarantine` row (`legacy_row`, `legacy_unknown_role`), when it is not: the whole
  legacy row stays in its `detail`, so nothing is dropped;
* unchanged, when an earlier run already moved or quarantined its legacy ID: a second
  run writes nothing.

Every row carries a SHA-256 over its seven fields; the retention report chains them in
legacy-ID order per outcome, so two reports over the same input agree digit for digit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from reflexmem.ledger.enums import QuarantineReason, SubjectKind
from reflexmem.ledger.lengths import ID_CHARS

LEGACY_TABLE = "role_memory"
REQUIRED = ("id", "role", "content")
OPTIONAL = ("score", "created_at", "provenance", "decision_id")
COLUMNS = (*REQUIRED, *OPTIONAL)
TEXT_COLUMNS = tuple(c for c in COLUMNS if c != "score")
OUTCOMES = ("rows_in", "moved", "quarantined", "unchanged")


class LegacySchemaError(ValueError):
    """The legacy table cannot be migrated as it is; the message names what is wrong."""


def check_columns(columns: Iterable[str]) -> tuple[str, ...]:
    """The legacy columns present, or `LegacySchemaError` naming a missing required one."""
    present = {c.lower() for c in columns}
    missing = [c for c in REQUIRED if c not in present]
    if missing:
        raise LegacySchemaError(
            f"legacy table {LEGACY_TABLE!r} lacks required column(s) "
            f"{', '.join(repr(c) for c in missing)} (has: {', '.join(sorted(present))})"
        )
    return tuple(c for c in COLUMNS if c in present)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def normalise(frame: pl.DataFrame) -> pl.DataFrame:
    """All seven columns (text, `score` as float; absent ones NULL) and `row_sha256`."""
    check_columns(frame.columns)
    frame = frame.rename({c: c.lower() for c in frame.columns})
    exprs = [
        (pl.col(c).cast(pl.String) if c in frame.columns else pl.lit(None, pl.String)).alias(c)
        for c in TEXT_COLUMNS
    ]
    score = pl.col("score").cast(pl.Float64) if "score" in frame.columns else pl.lit(None)
    out = frame.select(*exprs, score.cast(pl.Float64).alias("score")).select(COLUMNS)
    if out["id"].null_count():
        raise LegacySchemaError(f"legacy table {LEGACY_TABLE!r} has rows with a NULL 'id'")
    too_long = out.filter(pl.col("id").str.len_chars() > ID_CHARS)
    if too_long.height:
        raise LegacySchemaError(
            f"legacy id {too_long['id'][0]!r} is longer than {ID_CHARS} characters"
        )
    if out["content"].null_count():
        out = out.with_columns(pl.col("content").fill_null(""))
    canonical = pl.concat_str(
        [pl.col(c).cast(pl.String).fill_null("\x00") for c in COLUMNS], separator="\x1f"
    )
    return out.with_columns(
        canonical.map_elements(_sha, return_dtype=pl.String).alias("row_sha256")
    )


@dataclass(frozen=True)
class LegacyPlan:
    """One chunk's rows by outcome, in the shapes the ledger tables take."""

    cases: pl.DataFrame
    quarantine: pl.DataFrame
    unchanged: pl.DataFrame
    changed_since: int
    """Unchanged IDs whose legacy row differs from the one migrated first (kept as first)."""


def plan_chunk(
    rows: pl.DataFrame,
    *,
    known_roles: Iterable[str],
    known_decisions: Iterable[str],
    migrated: pl.DataFrame,
    migration_id: str,
    now: datetime,
) -> LegacyPlan:
    """Split normalised legacy rows into moved, quarantined and unchanged.

    `migrated` holds (`legacy_id`, `row_sha256`) of every legacy ID a previous run
    already moved or quarantined.
    """
    ids = rows.select(pl.col("id").alias("legacy_id"), "row_sha256")
    seen = ids.join(migrated.rename({"row_sha256": "first_sha"}), on="legacy_id", how="inner")
    fresh = rows.join(seen.select(pl.col("legacy_id").alias("id")), on="id", how="anti")
    roles = pl.Series("role", list(known_roles), dtype=pl.String)
    known = fresh.filter(pl.col("role").is_in(roles))
    unknown = fresh.filter(~pl.col("role").is_in(roles) | pl.col("role").is_null())
    decisions = pl.Series("d", list(known_decisions), dtype=pl.String)
    cases = known.select(
        pl.col("id").alias("legacy_id"),
        pl.col("role").alias("role_id"),
        "content",
        "provenance",
        pl.col("score").alias("legacy_score"),
        pl.col("created_at").alias("legacy_created_at"),
        pl.col("decision_id").alias("legacy_decision_id"),
        pl.when(pl.col("decision_id").is_in(decisions))
        .then(pl.col("decision_id"))
        .otherwise(None)
        .alias("decision_id"),
        "row_sha256",
        pl.lit(migration_id).alias("migration_id"),
        pl.lit(now).alias("migrated_at"),
    )
    detail = pl.struct(
        "role", "content", "provenance", "score", "created_at", "decision_id", "row_sha256"
    ).struct.json_encode()
    quarantine = unknown.select(
        pl.lit(SubjectKind.LEGACY_ROW.value).alias("subject_kind"),
        pl.col("id").alias("subject_id"),
        pl.col("decision_id").str.slice(0, ID_CHARS).alias("decision_id"),
        pl.col("role").str.slice(0, ID_CHARS).alias("role_id"),
        pl.lit(QuarantineReason.LEGACY_UNKNOWN_ROLE.value).alias("reason_code"),
        pl.lit("role_registered").alias("failed_expectations"),
        detail.alias("detail"),
        pl.lit(migration_id).alias("batch_id"),
        pl.lit(now).alias("created_at"),
    )
    changed = seen.filter(pl.col("row_sha256") != pl.col("first_sha")).height
    return LegacyPlan(cases, quarantine, seen.select("legacy_id", "row_sha256"), changed)


@dataclass
class RetentionTally:
    """Counts and chained SHA-256 digests per outcome, over chunks in legacy-ID order."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    changed_since: int = 0
    _digests: dict[str, Any] = field(
        default_factory=lambda: {k: hashlib.sha256() for k in OUTCOMES}
    )

    def _add(self, outcome: str, shas: pl.Series) -> None:
        self.counts[outcome] += shas.len()
        if shas.len():
            self._digests[outcome].update(("\n".join(shas.to_list()) + "\n").encode())

    def add(self, rows: pl.DataFrame, plan: LegacyPlan) -> None:
        """Count one chunk (`rows` normalised, sorted by ID as read)."""
        self._add("rows_in", rows["row_sha256"])
        self._add("moved", plan.cases["row_sha256"])
        moved_q = plan.quarantine["detail"].str.json_path_match("$.row_sha256")
        self._add("quarantined", moved_q)
        self._add("unchanged", plan.unchanged["row_sha256"])
        self.changed_since += plan.changed_since

    def checksums(self) -> dict[str, str]:
        """SHA-256 per outcome over its rows' checksums, in legacy-ID order."""
        return {k: d.hexdigest() for k, d in self._digests.items()}

    @property
    def conserved(self) -> bool:
        """Rows in = moved + quarantined + unchanged."""
        c = self.counts
        return c["rows_in"] == c["moved"] + c["quarantined"] + c["unchanged"]
