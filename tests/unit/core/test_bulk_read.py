"""The columnar SQLite read gives exactly the frame of the row-wise `bulk.read_frame`."""

from __future__ import annotations

import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from reflexmem.ledger.bulk import read_frame as row_read
from reflexmem.ledger.bulk_read import read_frame

_VALUE = st.one_of(
    st.none(),
    st.integers(min_value=-(2**62), max_value=2**62),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
_COLUMN = st.lists(_VALUE, min_size=1, max_size=12)


def _engine_with(columns: list[list[object]]) -> sa.Engine:
    engine = sa.create_engine("sqlite://")
    n = min(len(c) for c in columns)
    names = ", ".join(f"c{i}" for i in range(len(columns)))
    marks = ", ".join("?" for _ in columns)
    with engine.begin() as conn:
        conn.exec_driver_sql(f"CREATE TABLE t (k INTEGER, {names})")
        raw = conn.connection.driver_connection
        rows = [(k, *(c[k] for c in columns)) for k in range(n)]
        raw.executemany(f"INSERT INTO t VALUES (?, {marks})", rows)  # type: ignore[union-attr]
    return engine


def test_mixed_types_match_the_row_read() -> None:
    engine = _engine_with([[1, 2.0, None], [1, "z", 3], [2.0, "z", None], ["a", None, "b"]])
    with engine.connect() as conn:
        for sql in ("SELECT * FROM t ORDER BY k", "SELECT * FROM t WHERE k > 9"):
            expected, got = row_read(conn, sql), read_frame(conn, sql)
            assert got.schema == expected.schema
            assert got.equals(expected)
    assert read_frame(engine.connect(), "SELECT c0 FROM t ORDER BY k")["c0"].to_list() == [
        "1.0",
        "2.0",
        None,
    ]


@settings(max_examples=60, deadline=None)
@given(st.lists(_COLUMN, min_size=1, max_size=4))
def test_any_sqlite_values_match_the_row_read(columns: list[list[object]]) -> None:
    engine = _engine_with(columns)
    with engine.connect() as conn:
        sql = "SELECT * FROM t ORDER BY k"
        expected, got = row_read(conn, sql), read_frame(conn, sql)
    assert got.schema == expected.schema
    assert got.equals(expected)
