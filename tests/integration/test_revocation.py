"""A preview backs at most one admitted case, ever; what is taken back is never recalled.

The ledger is seeded through the real cycle (ingest, admit, mature, evaluate, reflect,
record episodes, distil) on D-full prices; then a later file brings an execution that
claims the preview of a case that is already reflected and distilled into memory. The
next admission batch must quarantine the new execution, revoke the earlier case with an
audit row naming the revoking batch, and recall must return neither the case nor any
pattern or rule made from it. Maturation must not mature a case whose own position's
settlement contradicts itself, and a refused preview consumption (CLI) is kept in
quarantine.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from reflexmem.ledger.audit import ledger_counts
from reflexmem.operations import intake
from reflexmem.operations.cycle import run_memory, run_reflection
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices.panel import load_dfull
from reflexmem.recall import RecallConstraints
from reflexmem.recall import recall as recall_cases
from reflexmem.recall.taint import tainted_entries
from reflexmem.synth import generate, write_stream
from tests.integration.ledger_data import clean_stream
from tests.support import make_resources, mature_and_evaluate, scalar, seed_ledger


def _rows(engine: sa.Engine, sql: str, **params: object) -> list[sa.Row[*tuple[object, ...]]]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params))


@pytest.fixture
def learned(engine: sa.Engine, tmp_path: Path) -> Resources:
    res = make_resources(engine)
    seed_ledger(res, tmp_path, n=400)
    mature_and_evaluate(res)
    runner = DirectRunner(res)
    roles = res.registry.ids
    run_reflection(runner, roles)
    run_memory(runner, roles)
    return res


def _claim_again(res: Resources, tmp: Path, case_id: str) -> tuple[str, str]:
    """Ingest a new decision whose execution claims the preview of `case_id`'s execution."""
    (decision_id, execution_id) = _rows(
        res.engine, "SELECT decision_id, execution_id FROM role_cases WHERE case_id = :c", c=case_id
    )[0]
    stream = generate(load_dfull(), 400, seed=5)  # what seed_ledger ingested
    decision = stream["decisions"].filter(pl.col("decision_id") == decision_id)
    execution = stream["executions"].filter(pl.col("execution_id") == execution_id)
    folder = tmp / "later"
    folder.mkdir()
    decision.with_columns(pl.lit("d-again").alias("decision_id")).write_parquet(
        folder / "decisions-later.parquet"
    )
    execution.with_columns(
        pl.lit("e-again").alias("execution_id"), pl.lit("d-again").alias("decision_id")
    ).write_parquet(folder / "executions-later.parquet")
    intake.ingest(res, [folder / "decisions-later.parquet", folder / "executions-later.parquet"])
    return str(execution_id), "e-again"


def test_a_preview_claimed_again_revokes_the_earlier_case_and_recall_never_shows_it(
    learned: Resources, tmp_path: Path
) -> None:
    res = learned
    engine = res.engine
    # A reflected case with a lesson that a live semantic pattern was distilled from.
    found = _rows(
        engine,
        "SELECT rc.case_id, rc.role_id FROM role_cases rc "
        "JOIN memory_sources s ON s.source_id = rc.case_id "
        "JOIN memory_entries m ON m.entry_id = s.entry_id "
        "WHERE rc.state = 'reflected' AND rc.lesson IS NOT NULL "
        "AND m.tier = 'semantic' AND m.state = 'active' ORDER BY rc.case_id LIMIT 1",
    )
    assert found, "the seeded cycle distilled no pattern from a reflected case"
    case_id, role = str(found[0][0]), str(found[0][1])
    constraints = RecallConstraints(role=role)
    with engine.connect() as conn:
        before = recall_cases(conn, constraints, "", k=10_000)
    assert case_id in before.case_ids
    patterns_before = {h.id for h in before.hits if h.kind == "memory"}

    earlier, later = _claim_again(res, tmp_path, case_id)
    result = intake.admit(res)

    assert result.rows_in == 1
    assert result.quarantined == 1
    assert result.by_reason == {"preview_reused": 1}
    assert result.revoked == 1
    assert result.revoked_by_reason == {"preview_reused": 1}
    assert _rows(engine, "SELECT state FROM role_cases WHERE case_id = :c", c=case_id)[0][0] == (
        "revoked"
    )
    audit = _rows(
        engine,
        "SELECT execution_id, reason_code, previous_state, admitted_batch_id, "
        "revoked_by_batch_id, detail FROM case_revocations WHERE case_id = :c",
        c=case_id,
    )
    assert len(audit) == 1
    eid, reason, previous, admitted_by, revoked_by, detail = audit[0]
    assert (eid, reason, previous) == (earlier, "preview_reused", "reflected")
    assert revoked_by == result.batch_id
    assert admitted_by != result.batch_id
    assert result.batch_id in str(detail)
    held = {
        row.subject_id: row.reason_code
        for row in _rows(
            engine,
            "SELECT subject_id, reason_code FROM quarantine WHERE subject_id IN (:a, :b)",
            a=earlier,
            b=later,
        )
    }
    assert held == {earlier: "preview_reused", later: "preview_reused"}
    batch = _rows(
        engine,
        "SELECT rows_in, quarantined, revoked FROM admission_batches WHERE batch_id = :b",
        b=result.batch_id,
    )
    assert tuple(batch[0]) == (1, 1, 1)
    with engine.connect() as conn:
        counts = ledger_counts(conn)
    assert counts.unaccounted_executions == 0
    assert counts.cases_by_state["revoked"] == 1

    with engine.connect() as conn:
        after = recall_cases(conn, constraints, "", k=10_000)
        tainted = tainted_entries(conn, f"role:{role}")
    assert case_id not in after.case_ids
    assert tainted, "no pattern or rule was made from the revoked case"
    returned = {h.id for h in after.hits if h.kind == "memory"}
    assert returned.isdisjoint(tainted)
    assert tainted & patterns_before, "the tainted pattern was recallable before the revocation"
    # A second batch finds nothing left to do and writes nothing.
    batches = scalar(engine, "SELECT COUNT(*) FROM admission_batches")
    again = intake.admit(res)
    assert (again.rows_in, again.revoked) == (0, 0)
    assert scalar(engine, "SELECT COUNT(*) FROM admission_batches") == batches


def test_maturation_never_matures_a_self_contradicting_settlement(
    engine: sa.Engine, tmp_path: Path
) -> None:
    """An open position is admitted pending; its settlement arrives contradicting itself."""
    res = make_resources(engine)
    stream = clean_stream(8)
    target = "d00000003"
    stream["outcomes"] = stream["outcomes"].filter(pl.col("decision_id") != target)
    intake.ingest(res, write_stream(stream, tmp_path / "first"))
    intake.admit(res)
    assert _rows(
        engine, "SELECT state, pending_reason FROM role_cases WHERE decision_id = :d", d=target
    )[0] == ("pending", "unsettled")
    late = (
        clean_stream(8)["outcomes"]
        .filter(pl.col("decision_id") == target)
        .with_columns((pl.col("opened_at") - pl.duration(days=1)).alias("settled_at"))
    )
    (tmp_path / "second").mkdir()
    late.write_parquet(tmp_path / "second" / "outcomes-late.parquet")
    intake.ingest(res, [tmp_path / "second" / "outcomes-late.parquet"])
    mature_and_evaluate(res)
    state = _rows(engine, "SELECT state FROM role_cases WHERE decision_id = :d", d=target)[0][0]
    assert state == "pending"
    result = intake.admit(res)
    assert result.revoked_by_reason == {"settled_before_open": 1}
    assert _rows(engine, "SELECT state FROM role_cases WHERE decision_id = :d", d=target)[0][0] == (
        "revoked"
    )


def test_a_refused_preview_consumption_is_kept_in_quarantine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apps.cli import app

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    stream = clean_stream(4)
    stream["previews"] = stream["previews"].with_columns(
        pl.lit(None, dtype=stream["previews"].schema["consumed_at"]).alias("consumed_at"),
        pl.lit(None, dtype=pl.String).alias("consumed_by_decision_id"),
    )
    paths = write_stream(stream, tmp_path / "in")
    runner = CliRunner()
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    assert runner.invoke(app, ["ingest", *map(str, paths)]).exit_code == 0
    ok = runner.invoke(app, ["preview", "consume", "p00000001", "d00000001"])
    assert ok.exit_code == 0, ok.output
    refusals = [
        (["preview", "consume", "p00000001", "d00000001"], "preview_double_consume"),
        (["preview", "consume", "p-ghost", "d00000001"], "preview_missing"),
        (["preview", "consume", "p00000002", "d-ghost"], "unknown_decision"),
    ]
    for args, _ in refusals:
        out = runner.invoke(app, args)
        assert out.exit_code == 1, out.output
        assert "kept in quarantine" in out.output
    from adapters.db import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'home' / 'ledger.sqlite'}")
    try:
        rows = _rows(
            engine,
            "SELECT reason_code, detail FROM quarantine "
            "WHERE subject_kind = 'preview_consumption' ORDER BY quarantine_id",
        )
    finally:
        engine.dispose()
    assert [r[0] for r in rows] == [code for _, code in refusals]
    assert "p-ghost" in str(rows[1][1])
    assert "d-ghost" in str(rows[2][1])
