from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa

from expectations.runner import run_suite, validate_admission
from reflexmem.admission.admit import admit
from reflexmem.admission.stage import stage_candidates
from reflexmem.ingest.load import ingest_files
from reflexmem.registry import load_registry
from reflexmem.synth import write_stream
from tests.integration.ledger_data import small_stream

ROLES = load_registry().ids

# Every admitted or pending case must satisfy conditions 1-4 when re-derived from the ledger.
VIOLATIONS = """
SELECT rc.case_id FROM role_cases rc
JOIN trade_executions e ON e.execution_id = rc.execution_id
JOIN trading_decisions d ON d.decision_id = e.decision_id
LEFT JOIN trade_previews p ON p.preview_id = e.preview_id
WHERE d.role_id NOT IN ({roles})
   OR e.origin NOT IN ('manual_agent', 'manual_external')
   OR (e.origin = 'manual_external' AND NOT e.origin_verified)
   OR (e.automation_markers IS NOT NULL
       AND CAST(e.automation_markers AS TEXT) NOT IN ('null', '[]'))
   OR p.preview_id IS NULL OR p.consume_count <> 1
   OR p.consumed_by_decision_id <> e.decision_id OR p.decision_id <> e.decision_id
   OR (SELECT COUNT(*) FROM trade_executions e2 WHERE e2.preview_id = e.preview_id) <> 1
   OR d.symbol <> e.symbol OR d.direction <> e.direction OR d.account <> e.account
   OR d.market <> e.market OR p.symbol <> e.symbol OR p.direction <> e.direction
"""


def _load(engine: sa.Engine, tmp_path: Path, n: int = 400) -> dict[str, pl.DataFrame]:
    stream = small_stream(n)
    with engine.begin() as conn:
        ingest_files(conn, write_stream(stream, tmp_path))
    return stream


def test_every_row_ends_admitted_pending_or_quarantined(engine: sa.Engine, tmp_path: Path) -> None:
    _load(engine, tmp_path)
    with engine.begin() as conn:
        result = admit(conn, ROLES, validate_admission, min_points=3)
    assert result.rows_in == 400
    assert result.admitted + result.pending + result.quarantined == 400
    assert sum(result.by_reason.values()) == result.quarantined
    assert sum(result.pending_by_reason.values()) == result.pending
    assert {"automated_origin", "unknown_origin", "unknown_role", "unverified_external"} <= set(
        result.by_reason
    )
    with engine.connect() as conn:
        cases = conn.execute(sa.text("SELECT COUNT(*) FROM role_cases")).scalar_one()
        held = conn.execute(sa.text("SELECT COUNT(*) FROM quarantine")).scalar_one()
        batch = conn.execute(
            sa.text("SELECT rows_in, admitted, pending, quarantined FROM admission_batches")
        ).one()
    assert cases == result.admitted + result.pending
    assert held == result.quarantined
    assert tuple(batch) == (400, result.admitted, result.pending, result.quarantined)


def test_admitted_cases_satisfy_every_condition_in_the_ledger(
    engine: sa.Engine, tmp_path: Path
) -> None:
    _load(engine, tmp_path)
    with engine.begin() as conn:
        admit(conn, ROLES, validate_admission, min_points=3)
        roles = ", ".join(f"'{r}'" for r in ROLES)
        bad = conn.execute(sa.text(VIOLATIONS.format(roles=roles))).fetchall()
    assert bad == []


def test_a_second_batch_admits_only_new_executions(engine: sa.Engine, tmp_path: Path) -> None:
    _load(engine, tmp_path, 100)
    with engine.begin() as conn:
        admit(conn, ROLES, validate_admission, min_points=3)
    with engine.begin() as conn:
        again = admit(conn, ROLES, validate_admission, min_points=3)
    assert again.rows_in == 0


def test_automation_markers_beat_manual_looking_evidence(engine: sa.Engine, tmp_path: Path) -> None:
    stream = small_stream(60)
    stream["executions"] = stream["executions"].with_columns(
        origin=pl.lit("manual_agent"),
        automation_markers=pl.when(pl.int_range(pl.len()) % 2 == 0)
        .then(pl.lit('["autopilot_job_id=42"]'))
        .otherwise(None),
    )
    with engine.begin() as conn:
        ingest_files(conn, write_stream(stream, tmp_path))
        admit(conn, ROLES, validate_admission, min_points=3)
        marked = (
            conn.execute(
                sa.text(
                    "SELECT q.failed_expectations FROM trade_executions e JOIN quarantine q "
                    "ON q.subject_id = e.execution_id WHERE e.automation_markers IS NOT NULL "
                    "AND CAST(e.automation_markers AS TEXT) <> 'null'"
                )
            )
            .scalars()
            .all()
        )
        leaked = conn.execute(
            sa.text(
                "SELECT COUNT(*) FROM role_cases rc JOIN trade_executions e "
                "ON e.execution_id = rc.execution_id WHERE e.automation_markers IS NOT NULL "
                "AND CAST(e.automation_markers AS TEXT) <> 'null'"
            )
        ).scalar_one()
    assert len(marked) == 30
    assert all("origin_manual" in failed.split(",") for failed in marked)
    assert leaked == 0


def test_quarantine_rows_name_the_failed_expectations(engine: sa.Engine, tmp_path: Path) -> None:
    _load(engine, tmp_path)
    with engine.begin() as conn:
        admit(conn, ROLES, validate_admission, min_points=3)
        rows = conn.execute(
            sa.text("SELECT reason_code, failed_expectations FROM quarantine")
        ).fetchall()
    expected = {
        "unknown_role": "role_registered",
        "automated_origin": "origin_manual",
        "unknown_origin": "origin_manual",
        "unverified_external": "origin_manual",
        "preview_missing": "preview_consumed_once",
        "preview_unconsumed": "preview_consumed_once",
        "preview_reused": "preview_consumed_once",
        "identity_mismatch": "identity_matches",
    }
    assert rows
    for reason, failed in rows:
        assert expected[reason] in failed.split(",")


def test_validating_distinct_evidence_equals_validating_every_row(
    engine: sa.Engine, tmp_path: Path
) -> None:
    _load(engine, tmp_path)
    with engine.connect() as conn:
        staged = stage_candidates(conn, min_points=3)
    params = {"registered_roles": list(ROLES)}
    per_row = run_suite(staged, "admission", params, per_row=True).sort(
        "execution_id", "expectation"
    )
    grouped = run_suite(staged, "admission", params).sort("execution_id", "expectation")
    assert per_row.height > 0
    assert per_row.equals(grouped)


@pytest.mark.parametrize("points", [1, 8])
def test_unsettled_or_thin_outcomes_stay_pending(
    engine: sa.Engine, tmp_path: Path, points: int
) -> None:
    stream = small_stream(40)
    stream["executions"] = stream["executions"].with_columns(
        origin=pl.lit("manual_agent"), automation_markers=None
    )
    stream["outcomes"] = stream["outcomes"].with_columns(evaluation_points=pl.lit(points))
    with engine.begin() as conn:
        ingest_files(conn, write_stream(stream, tmp_path))
        result = admit(conn, ROLES, validate_admission, min_points=3)
    if points == 1:
        assert result.admitted == 0
        assert set(result.pending_by_reason) <= {"insufficient_data", "unsettled"}
        assert result.pending_by_reason.get("insufficient_data", 0) > 0
    else:
        assert result.admitted > 0
        assert set(result.pending_by_reason) <= {"unsettled"}
