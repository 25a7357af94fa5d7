"""Typed row models of the record tools, generated from the ingest file contracts.

An MCP client (an LLM agent) reads a tool's input schema to know what to send, so each
`record_<kind>` tool declares every column of its kind (`reflexmem.ingest.schemas`):
its JSON type, whether it is required, its enum values, length and numeric bounds, and
its description. The schema is generated from the same contract the loader enforces,
so the two cannot disagree.

Validation stays with the loader: each field accepts any value at the protocol layer
(`WithJsonSchema` documents the type without enforcing it), so a bad row is refused by
the one validator with the status, code and field every surface reports (`422
invalid_row: 0.direction: ...`), not by a second validator with other words.
"""

from __future__ import annotations

from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, WithJsonSchema, create_model

from reflexmem.ingest.schemas import SCHEMAS, Column

JSON_TYPES = {
    "str": {"type": "string"},
    "float": {"type": "number"},
    "int": {"type": "integer"},
    "bool": {"type": "boolean"},
    "timestamp": {"type": "string", "format": "date-time"},
    "json": {},
}


def column_schema(column: Column) -> dict[str, Any]:
    """The JSON Schema of one column: type, enum, bounds and description."""
    out: dict[str, Any] = dict(JSON_TYPES[column.type])
    if column.enum is not None:
        out["enum"] = [e.value for e in column.enum]
    if column.max_length is not None:
        out["maxLength"] = column.max_length
    if column.minimum is not None:
        out["exclusiveMinimum" if column.exclusive else "minimum"] = column.minimum
    words = [column.doc] if column.doc else []
    if column.type == "timestamp":
        words.append("ISO-8601, naive means UTC")
    if column.day_end:
        words.append("a bare date means the end of that day")
    if column.references:
        words.append(f"must name a recorded row of `{column.references}`")
    if not column.required and column.default is not None:
        words.append(f"default {column.default!r}")
    described = {"description": "; ".join(words)} if words else {}
    if column.required:
        return out | described
    return {"anyOf": [out, {"type": "null"}], **described}


@cache
def row_model(kind: str) -> type[BaseModel]:
    """The row model of a record kind, its schema the kind's contract (see module doc)."""
    schema = SCHEMAS[kind]
    required = [c.name for c in schema.columns if c.required]
    fields: dict[str, Any] = {
        c.name: (Annotated[Any, WithJsonSchema(column_schema(c))], None) for c in schema.columns
    }

    def contract(out: dict[str, Any]) -> None:
        for prop in out.get("properties", {}).values():
            prop.pop("default", None)  # fields default to None only so the loader judges
        out["required"] = required
        out["additionalProperties"] = False

    config = ConfigDict(
        extra="allow",  # an unknown column is the loader's to refuse, by name
        json_schema_extra=contract,
        title=f"{kind} row",
    )
    model: type[BaseModel] = create_model(
        f"{kind.title()}Row", __config__=config, __doc__=schema.doc or None, **fields
    )
    return model


def as_rows(rows: list[BaseModel]) -> list[dict[str, Any]]:
    """The rows as the loader takes them: only the fields the caller sent."""
    return [r.model_dump(exclude_unset=True) for r in rows]
