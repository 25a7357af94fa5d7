"""Ingestion refuses impossible values: exit 2 naming file, row and column, nothing written.

Each case writes a real stream with one impossible value planted at a known row, on both
backends, in the format where the value can occur (CSV text, Parquet and JSONL typed).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from reflexmem.ingest.load import ingest_files
from reflexmem.ingest.read import IngestError
from reflexmem.ingest.schemas import SCHEMAS
from reflexmem.ledger.lengths import CODE_CHARS, ID_CHARS
from reflexmem.ledger.models import Base
from reflexmem.synth import write_stream
from tests.integration.ledger_data import small_stream

TABLES = (
    "trading_decisions",
    "trade_previews",
    "trade_executions",
    "trade_fills",
    "position_lifecycles",
)


def _rows(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return sum(conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one() for t in TABLES)


def _plant(kind: str, column: str, value: object, *, row: int = 3) -> dict[str, pl.DataFrame]:
    """The small stream with `value` in `column` of data row `row` of `kind`."""
    stream = small_stream(6)
    frame = stream[kind]
    dtype: pl.DataType | type[pl.DataType] = (
        pl.String if isinstance(value, str) else frame.schema[column]
    )
    if isinstance(value, float) and not frame.schema[column].is_float():
        dtype = pl.Float64
    planted = (
        frame.with_row_index("_i")
        .with_columns(
            pl.when(pl.col("_i") == row - 1)
            .then(pl.lit(value, dtype=dtype))
            .otherwise(pl.col(column).cast(dtype))
            .alias(column)
        )
        .drop("_i")
    )
    stream[kind] = planted
    return stream


CASES = [
    # (kind, column, value, format, message)
    ("decisions", "decision_id", "d\x00bad", "csv", "contains a NUL byte"),
    ("executions", "execution_id", "e\x00bad", "parquet", "contains a NUL byte"),
    ("decisions", "evidence", '[{"kind": "x\\u0000"}]', "jsonl", "contains a NUL byte"),
    ("fills", "quantity", "1e400", "csv", "'1e400' is not a finite number"),
    ("fills", "price", float("nan"), "parquet", "is not a finite number"),
    ("outcomes", "realized_return", float("inf"), "parquet", "is not a finite number"),
    ("outcomes", "realized_return", "NaN", "csv", "is not a finite number"),
    ("fills", "quantity", -5.0, "parquet", "must be greater than 0"),
    ("fills", "quantity", 0.0, "jsonl", "must be greater than 0"),
    ("fills", "price", "-1.5", "csv", "must be greater than 0"),
    ("fills", "fee", -0.01, "parquet", "must be at least 0"),
    ("outcomes", "entry_price", 0.0, "parquet", "must be greater than 0"),
    ("outcomes", "exit_price", -3.0, "jsonl", "must be greater than 0"),
    ("outcomes", "evaluation_points", 2.5, "parquet", "is not a whole number"),
    ("outcomes", "evaluation_points", 7.5, "jsonl", "is not a whole number"),
    ("outcomes", "evaluation_points", "2.5", "csv", "cannot parse '2.5' as int"),
    ("outcomes", "evaluation_points", -1.0, "parquet", "must be at least 0"),
    ("decisions", "decision_id", "d" * (ID_CHARS + 1), "csv", f"longer than {ID_CHARS}"),
    ("decisions", "symbol", "S" * (CODE_CHARS + 1), "parquet", f"longer than {CODE_CHARS}"),
    ("executions", "origin", " manual_agent", "csv", "is not one of"),
    ("executions", "origin", "manual_agent\u00a0", "parquet", "is not one of"),
]


@pytest.mark.parametrize(("kind", "column", "value", "fmt", "message"), CASES)
def test_an_impossible_value_fails_the_ingest_naming_file_row_and_column(
    engine: sa.Engine,
    tmp_path: Path,
    kind: str,
    column: str,
    value: object,
    fmt: str,
    message: str,
) -> None:
    paths = write_stream(_plant(kind, column, value), tmp_path, fmt=fmt)
    with pytest.raises(IngestError) as info, engine.begin() as conn:
        ingest_files(conn, paths)
    text = str(info.value)
    assert f"{kind}.{fmt}, row 3, column '{column}'" in text, text
    assert message in text, text
    assert _rows(engine) == 0


def test_a_broken_jsonl_line_is_named_by_its_number(engine: sa.Engine, tmp_path: Path) -> None:
    path = write_stream(small_stream(6), tmp_path, fmt="jsonl")[0]
    lines = path.read_text().splitlines()
    lines[3] = lines[3][: len(lines[3]) // 2]
    path.write_text("\n".join(lines) + "\n")
    with (
        pytest.raises(IngestError, match=r"decisions\.jsonl, row 4: line 4 is not a JSON"),
        engine.begin() as conn,
    ):
        ingest_files(conn, [path])
    assert _rows(engine) == 0


def test_a_position_naming_another_decisions_execution_is_refused(
    engine: sa.Engine, tmp_path: Path
) -> None:
    stream = small_stream(6)
    stream["outcomes"] = stream["outcomes"].with_columns(
        pl.when(pl.col("position_id") == "pos00000002")
        .then(pl.lit("e00000004"))
        .otherwise(pl.col("decision_id").str.replace("^d", "e"))
        .alias("execution_id")
    )
    paths = write_stream(stream, tmp_path)
    with (
        pytest.raises(IngestError, match=r"row 3, column 'execution_id': execution 'e00000004'"),
        engine.begin() as conn,
    ):
        ingest_files(conn, paths)
    assert _rows(engine) == 0


def test_text_is_stored_exactly_as_given(engine: sa.Engine, tmp_path: Path) -> None:
    """No trimming: a role ID with a non-breaking space is stored with it (admission then
    finds no such role and quarantines it, see test_admission_fail_closed)."""
    paths = write_stream(_plant("decisions", "role_id", "momentum\u00a0", row=2), tmp_path)
    with engine.begin() as conn:
        ingest_files(conn, paths)
        stored = conn.execute(
            sa.text("SELECT role_id FROM trading_decisions WHERE decision_id = 'd00000001'")
        ).scalar_one()
    assert stored == "momentum\u00a0"


def test_schema_lengths_are_the_model_lengths() -> None:
    """Declared once: every text column of a ledger file has its model's length."""
    checked = 0
    for schema in SCHEMAS.values():
        table = Base.metadata.tables[schema.table]
        for col in schema.columns:
            column_type = table.c[col.name].type
            if col.type == "str" and col.enum is None and col.name != "rationale":
                assert col.max_length is not None, (schema.kind, col.name)
                assert getattr(column_type, "length", None) == col.max_length, (
                    schema.kind,
                    col.name,
                )
                checked += 1
    assert checked >= 25


def test_the_cli_exits_2_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from apps.cli import app

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    paths = write_stream(_plant("fills", "quantity", "1e400"), tmp_path / "in", fmt="csv")
    runner = CliRunner()
    assert runner.invoke(app, ["db", "upgrade"]).exit_code == 0
    result = runner.invoke(app, ["ingest", *map(str, paths)])
    assert result.exit_code == 2, result.output
    flat = " ".join(result.output.split())
    assert "fills.csv, row 3, column 'quantity': '1e400' is not a finite number" in flat
    assert "nothing written" in flat
