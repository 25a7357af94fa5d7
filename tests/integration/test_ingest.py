from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from reflexmem.ingest.load import ingest_files
from reflexmem.ingest.read import IngestError
from reflexmem.synth import write_stream
from tests.integration.ledger_data import small_stream

TABLES = (
    "trading_decisions",
    "trade_previews",
    "trade_executions",
    "trade_fills",
    "position_lifecycles",
)


def _counts(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one() for t in TABLES}


@pytest.mark.parametrize("fmt", ["parquet", "csv", "jsonl"])
def test_every_format_loads_every_row(engine: sa.Engine, tmp_path: Path, fmt: str) -> None:
    paths = write_stream(small_stream(120), tmp_path, fmt=fmt)
    with engine.begin() as conn:
        report = ingest_files(conn, paths)
    assert report.total_added == 5 * 120
    assert set(_counts(engine).values()) == {120}


def test_reingesting_the_same_files_changes_nothing(engine: sa.Engine, tmp_path: Path) -> None:
    stream = small_stream(80)
    paths = write_stream(stream, tmp_path / "a")
    with engine.begin() as conn:
        ingest_files(conn, paths)
    before = _counts(engine)
    with engine.begin() as conn:
        again = ingest_files(conn, paths)
    assert again.total_added == 0
    assert len(again.skipped_files) == 5
    # the same rows in other files (another format): compared row by row, nothing added
    with engine.begin() as conn:
        copy = ingest_files(conn, write_stream(stream, tmp_path / "b", fmt="csv"))
    assert copy.total_added == 0
    assert copy.unchanged_rows["executions"] == 80
    assert _counts(engine) == before


def test_a_row_that_contradicts_the_stored_one_is_rejected(
    engine: sa.Engine, tmp_path: Path
) -> None:
    stream = small_stream(30)
    with engine.begin() as conn:
        ingest_files(conn, write_stream(stream, tmp_path / "a"))
    changed = stream["decisions"].with_columns(
        pl.when(pl.col("decision_id") == "d00000004")
        .then(pl.lit("risk"))
        .otherwise(pl.col("role_id"))
        .alias("role_id")
    )
    path = write_stream({"decisions": changed}, tmp_path / "b", fmt="csv")[0]
    with (
        pytest.raises(IngestError, match=r"row 5, column 'role_id'.*already stored"),
        engine.begin() as conn,
    ):
        ingest_files(conn, [path])


def _bad_decisions(tmp_path: Path, column: str, value: str) -> Path:
    """decisions.csv whose third data row has `value` in `column`."""
    path = tmp_path / "decisions.csv"
    frame = small_stream(10)["decisions"].with_columns(pl.col(column).cast(pl.String))
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()) == 2)
        .then(pl.lit(value))
        .otherwise(pl.col(column))
        .alias(column)
    )
    frame.write_csv(path)
    return path


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        (
            "direction",
            "sideways",
            r"row 3, column 'direction': 'sideways' is not one of long, short",
        ),
        (
            "decided_at",
            "20x5-01-02",
            r"row 3, column 'decided_at': cannot parse '20x5-01-02' as timestamp",
        ),
        (
            "decision_id",
            "d00000001",
            r"row 3, column 'decision_id': duplicate key 'd00000001' \(also in row 2\)",
        ),
        ("agent_id", "", r"row 3, column 'agent_id': is empty but required"),
        ("evidence", "[{not json", r"row 3, column 'evidence': is not valid JSON"),
    ],
)
def test_bad_input_names_file_row_and_column_and_writes_nothing(
    engine: sa.Engine, tmp_path: Path, column: str, value: str, message: str
) -> None:
    path = _bad_decisions(tmp_path, column, value)
    with pytest.raises(IngestError, match=message) as info, engine.begin() as conn:
        ingest_files(conn, [path])
    assert str(path) in str(info.value)
    assert sum(_counts(engine).values()) == 0


def test_a_missing_column_is_named(engine: sa.Engine, tmp_path: Path) -> None:
    path = tmp_path / "fills.csv"
    small_stream(5)["fills"].drop("price").write_csv(path)
    with (
        pytest.raises(IngestError, match=r"fills\.csv: missing required column\(s\): price"),
        engine.begin() as conn,
    ):
        ingest_files(conn, [path])


def test_a_wrong_type_is_named(engine: sa.Engine, tmp_path: Path) -> None:
    stream = small_stream(5)
    path = tmp_path / "fills.jsonl"
    stream["fills"].with_columns(pl.col("quantity").cast(pl.String)).with_columns(
        pl.when(pl.col("fill_id") == "f00000002")
        .then(pl.lit("ten"))
        .otherwise(pl.col("quantity"))
        .alias("quantity")
    ).write_ndjson(path)
    with (
        pytest.raises(IngestError, match=r"row 3, column 'quantity': cannot parse 'ten' as float"),
        engine.begin() as conn,
    ):
        ingest_files(conn, [path])


def test_a_dangling_reference_fails_the_whole_ingest(engine: sa.Engine, tmp_path: Path) -> None:
    stream = small_stream(20)
    stream["fills"] = stream["fills"].with_columns(
        pl.when(pl.col("fill_id") == "f00000007")
        .then(pl.lit("e-ghost"))
        .otherwise(pl.col("execution_id"))
        .alias("execution_id")
    )
    paths = write_stream(stream, tmp_path)
    with (
        pytest.raises(
            IngestError,
            match=r"fills\.parquet, row 8, column 'execution_id': 'e-ghost' refers to no known",
        ),
        engine.begin() as conn,
    ):
        ingest_files(conn, paths)
    assert sum(_counts(engine).values()) == 0


def test_the_cli_exits_non_zero_and_names_the_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apps.cli import app

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    path = tmp_path / "fills.csv"
    small_stream(5)["fills"].drop("price").write_csv(path)
    assert CliRunner().invoke(app, ["db", "upgrade"]).exit_code == 0
    result = CliRunner().invoke(app, ["ingest", str(path)])
    assert result.exit_code == 2
    assert "missing required column(s): price" in result.output
