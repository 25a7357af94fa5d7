from datetime import UTC, datetime

import polars as pl
import pytest

from reflexmem.ledger.legacy import LegacySchemaError, RetentionTally, normalise, plan_chunk

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "ID": [1, 2, 3],
            "role": ["risk", "ghost", None],
            "content": ["a", "b", "c"],
            "decision_id": ["d1", "d2", None],
        }
    )


def test_missing_required_column_is_named() -> None:
    with pytest.raises(LegacySchemaError, match="'content'"):
        normalise(pl.DataFrame({"id": [1], "role": ["risk"]}))


def test_rows_split_into_moved_quarantined_and_unchanged_with_conservation() -> None:
    rows = normalise(_frame())
    assert rows["score"].null_count() == 3  # optional columns absent -> NULL
    migrated = pl.DataFrame({"legacy_id": ["3"], "row_sha256": [rows["row_sha256"][2]]})
    plan = plan_chunk(
        rows,
        known_roles=["risk"],
        known_decisions=["d1"],
        migrated=migrated,
        migration_id="m",
        now=NOW,
    )
    assert plan.cases["legacy_id"].to_list() == ["1"]
    assert plan.cases["decision_id"].to_list() == ["d1"]
    assert plan.quarantine["subject_id"].to_list() == ["2"]
    assert plan.quarantine["reason_code"].to_list() == ["legacy_unknown_role"]
    assert plan.unchanged["legacy_id"].to_list() == ["3"]
    assert plan.changed_since == 0
    tally = RetentionTally()
    tally.add(rows, plan)
    assert tally.conserved
    assert tally.counts == {"rows_in": 3, "moved": 1, "quarantined": 1, "unchanged": 1}


def test_checksums_do_not_depend_on_chunking() -> None:
    rows = normalise(_frame())
    empty = pl.DataFrame(schema={"legacy_id": pl.String, "row_sha256": pl.String})
    whole, parts = RetentionTally(), RetentionTally()
    kw = {"known_roles": ["risk"], "known_decisions": [], "migrated": empty, "migration_id": "m"}
    whole.add(rows, plan_chunk(rows, now=NOW, **kw))  # type: ignore[arg-type]
    for start in range(3):
        part = rows.slice(start, 1)
        parts.add(part, plan_chunk(part, now=NOW, **kw))  # type: ignore[arg-type]
    assert whole.checksums() == parts.checksums()
