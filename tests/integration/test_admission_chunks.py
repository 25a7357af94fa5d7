"""Chunked admission judges exactly what one pass judges, with memory flat in N.

A batch stages its executions once (`stage.staged_chunks`) and judges the
ledger as of that instant: a row another transaction commits meanwhile waits for the
next batch.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from expectations.runner import validate_admission
from reflexmem.admission.admit import BY_KEY_ONLY, admit
from reflexmem.ledger.checksums import table_checksums
from reflexmem.operations import intake
from reflexmem.synth import write_stream
from tests.conftest import _truncate
from tests.integration.ledger_data import clean_stream, renamed, write_small
from tests.support import make_resources, registry


def _ledger(path: Path, files: list[Path]) -> sa.Engine:
    engine = make_engine(f"sqlite:///{path}")
    migrate.upgrade(engine)
    intake.ingest(make_resources(engine), files)
    return engine


def test_chunks_of_any_size_give_the_verdicts_of_one_pass(tmp_path: Path) -> None:
    files = write_small(tmp_path / "in", 700)
    results = {}
    sums = {}
    for chunk in (1_000_000, 97, 7):
        engine = _ledger(tmp_path / f"chunk-{chunk}.sqlite", files)
        with engine.begin() as conn:
            results[chunk] = admit(
                conn, registry().ids, validate_admission, min_points=3, chunk_rows=chunk
            )
        with engine.connect() as conn:
            sums[chunk] = table_checksums(conn)
        engine.dispose()
    one = results[1_000_000]
    assert one.rows_in == 700
    for chunk in (97, 7):
        got = results[chunk]
        assert (got.rows_in, got.admitted, got.pending, got.quarantined) == (
            one.rows_in,
            one.admitted,
            one.pending,
            one.quarantined,
        )
        assert got.by_reason == one.by_reason
        assert got.pending_by_reason == one.pending_by_reason
        assert sums[chunk] == sums[1_000_000]


def test_chunked_admission_on_both_backends(engine: sa.Engine, tmp_path: Path) -> None:
    res = make_resources(engine)
    intake.ingest(res, write_small(tmp_path / "in", 300))
    pg = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        memory = conn.execute(sa.text("SHOW work_mem")).scalar_one() if pg else None
        result = admit(conn, registry().ids, validate_admission, min_points=3, chunk_rows=41)
        if pg:  # staging's memory and the cases' key lookups leave the session as it was
            assert conn.execute(sa.text("SHOW work_mem")).scalar_one() == memory
            for method in BY_KEY_ONLY:
                assert conn.execute(sa.text(f"SHOW {method}")).scalar_one() == "on"
    assert result.rows_in == 300
    with engine.connect() as conn:
        batches = conn.execute(sa.text("SELECT rows_in FROM admission_batches")).all()
        cases = conn.execute(sa.text("SELECT COUNT(*) FROM role_cases")).scalar_one()
    assert batches == [(300,)]  # one batch however many chunks
    assert cases == result.admitted + result.pending


@pytest.mark.postgres
def test_rows_committed_while_a_batch_runs_are_judged_by_the_next(
    pg_url: str, tmp_path: Path
) -> None:
    # PostgreSQL lets another transaction commit while a batch runs; SQLite has one writer.
    engine = make_engine(pg_url)
    _truncate(engine)
    res = make_resources(engine)
    stream = clean_stream(60, seed=5)
    intake.ingest(res, write_stream(stream, tmp_path / "first"))
    late = write_stream(renamed(stream, "-late"), tmp_path / "late")
    calls = 0

    def validate_while_ingesting(staged: pl.DataFrame, roles: object) -> pl.DataFrame:
        nonlocal calls
        calls += 1
        if calls == 1:  # while the first of several chunks is judged, more rows commit
            intake.ingest(res, late)
        return validate_admission(staged, registry().ids)

    with engine.begin() as conn:
        during = admit(conn, registry().ids, validate_while_ingesting, min_points=3, chunk_rows=7)
    with engine.begin() as conn:
        after = admit(conn, registry().ids, validate_admission, min_points=3, chunk_rows=7)
    assert calls == 9  # 60 executions in chunks of 7
    assert (during.rows_in, during.admitted) == (60, 60)
    assert (after.rows_in, after.admitted, after.revoked) == (60, 60, 0)
    with engine.connect() as conn:
        late_cases = conn.execute(
            sa.text("SELECT COUNT(*) FROM role_cases WHERE execution_id LIKE '%-late'")
        ).scalar_one()
        batches = conn.execute(sa.text("SELECT COUNT(*) FROM admission_batches")).scalar_one()
    assert (late_cases, batches) == (60, 2)
    engine.dispose()
