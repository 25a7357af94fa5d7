"""Ingest read in tiny chunks gives the ledger of one whole-file pass, and refuses the same."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from reflexmem.ingest.load import ingest_files
from reflexmem.ingest.read import IngestError
from reflexmem.ledger.checksums import table_checksums
from reflexmem.synth import write_stream
from tests.integration.ledger_data import small_stream, write_small


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_tiny_chunks_give_the_ledger_of_one_pass(tmp_path: Path, fmt: str) -> None:
    files = write_small(tmp_path / "in", 230, fmt=fmt)
    sums = {}
    rows = {}
    for chunk in (1_000_000, 17, 1):
        engine = make_engine(f"sqlite:///{tmp_path / f'chunk-{chunk}.sqlite'}")
        migrate.upgrade(engine)
        with engine.begin() as conn:
            report = ingest_files(conn, files, chunk_rows=chunk)
        assert report.added["decisions"] == 230
        with engine.connect() as conn:
            sums[chunk] = table_checksums(conn)
            ingested = conn.execute(sa.text("SELECT kind, rows FROM ingested_files")).all()
        heights = {p.stem: pl.read_parquet(p).height for p in files} if fmt == "parquet" else {}
        assert all(heights.get(k, r) == r for k, r in ingested)
        rows[chunk] = sorted(ingested)
        engine.dispose()
    assert sums[17] == sums[1_000_000]
    assert sums[1] == sums[1_000_000]
    assert rows[17] == rows[1] == rows[1_000_000]


def test_a_key_repeated_in_another_chunk_is_refused_as_in_one_pass(
    engine: sa.Engine, tmp_path: Path
) -> None:
    frame = small_stream(40)["decisions"]
    repeated = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 30)
        .then(pl.lit("d00000002"))
        .otherwise(pl.col("decision_id"))
        .alias("decision_id")
    )
    path = write_stream({"decisions": repeated}, tmp_path)[0]
    message = r"row 31, column 'decision_id': duplicate key 'd00000002' \(also in row 3\)"
    for chunk in (1_000_000, 8):
        with pytest.raises(IngestError, match=message), engine.begin() as conn:
            ingest_files(conn, [path], chunk_rows=chunk)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT COUNT(*) FROM trading_decisions")).scalar() == 0


def test_a_conflict_in_a_later_chunk_is_refused(engine: sa.Engine, tmp_path: Path) -> None:
    stream = small_stream(40)
    with engine.begin() as conn:
        ingest_files(conn, write_stream({"decisions": stream["decisions"]}, tmp_path / "a"))
    changed = stream["decisions"].with_columns(
        pl.when(pl.col("decision_id") == "d00000035")
        .then(pl.lit("a different rationale"))
        .otherwise(pl.col("rationale"))
        .alias("rationale")
    )
    path = write_stream({"decisions": changed}, tmp_path / "b", fmt="jsonl")[0]
    with (
        pytest.raises(IngestError, match=r"row 36, column 'rationale'.*already stored"),
        engine.begin() as conn,
    ):
        ingest_files(conn, [path], chunk_rows=6)
    same = write_stream({"decisions": stream["decisions"]}, tmp_path / "c", fmt="csv")[0]
    with engine.begin() as conn:
        report = ingest_files(conn, [same], chunk_rows=6)
    assert report.added["decisions"] == 0
    assert report.unchanged_rows["decisions"] == 40
