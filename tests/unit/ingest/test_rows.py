"""Rows sent as JSON objects are the rows of a JSONL file: one contract, one result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reflexmem.ingest.read import IngestError, read_ledger_file
from reflexmem.ingest.rows import rows_file
from tests.integration.ledger_data import small_stream


@pytest.mark.parametrize("kind", ["decisions", "previews", "executions", "fills"])
def test_json_rows_coerce_exactly_like_the_same_rows_in_a_jsonl_file(
    kind: str, tmp_path: Path
) -> None:
    frame = small_stream(40)[kind]
    rows = json.loads(frame.write_json())
    path = tmp_path / f"{kind}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    from_file = read_ledger_file(path).frame
    from_rows = rows_file(kind, rows).frame
    assert from_rows.equals(from_file.select(from_rows.columns))


def test_a_bad_row_names_its_row_and_field() -> None:
    rows = json.loads(small_stream(5)["fills"].write_json())
    rows[3]["quantity"] = 0
    with pytest.raises(IngestError) as caught:
        rows_file("fills", rows)
    assert (caught.value.row, caught.value.column) == (4, "quantity")
    rows[3]["quantity"] = [1, 2]
    with pytest.raises(IngestError, match="single value") as caught:
        rows_file("fills", rows)
    assert caught.value.column == "quantity"
    rows[3] = {**rows[0], "colour": "red"}
    with pytest.raises(IngestError, match="unknown field") as caught:
        rows_file("fills", rows)
    assert (caught.value.row, caught.value.column) == (4, "colour")
