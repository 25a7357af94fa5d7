"""The condition language of skill files, compiled to polars expressions.

Triggers, L0 rules, L1 features and rejection conditions are all lists of conditions
on observation fields, e.g. `{field: form_type, in: ["10-Q", "10-K"]}` or
`{field: fundamentals_as_of, gt_field: decided_at}`. Compiling them to one polars
expression means a skill decides a single routed input and a replay of a hundred
thousand past inputs with the same code, so what was evaluated is what runs.

Observations enter as frames of text columns (`observations_frame`, or
`observations_from_json` for the ledger's JSON column): strings as they are, other
scalars as their JSON text. Equality compares that text (`equals: 10` matches the JSON
number 10); ordering operators (`gt`, `lt_field`, ...) compare numbers when both sides
parse as numbers and text otherwise, which orders ISO-8601 timestamps of one format
correctly. A missing field is null and satisfies no condition except `missing: true`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import polars as pl

VALUE_OPS = ("equals", "not_equals", "in", "not_in", "contains", "contains_any", "matches")
ORDER_OPS = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
FIELD_OPS = {"equals_field": "==", **{f"{op}_field": sym for op, sym in ORDER_OPS.items()}}
OPERATORS = (*VALUE_OPS, *ORDER_OPS, *FIELD_OPS, "missing")
ROW = "_row"
"""Position of each observation in its frame; every observation frame carries it."""


class ConditionError(ValueError):
    """A condition names no operator, several, or an operand of the wrong type."""


def text(value: object) -> str | None:
    """An observation value as the text the conditions compare."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, default=str)


def condition_fields(conditions: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every observation field a list of conditions reads."""
    names: set[str] = set()
    for cond in conditions:
        names.add(str(cond["field"]))
        for op in FIELD_OPS:
            if op in cond:
                names.add(str(cond[op]))
    return names


def observations_frame(rows: Sequence[Mapping[str, Any]], fields: Iterable[str]) -> pl.DataFrame:
    """One text column per field (null when absent), plus `_row`, for mappings."""
    names = sorted(set(fields) - {ROW})
    data: dict[str, Any] = {ROW: range(len(rows))}
    data.update({name: [text(row.get(name)) for row in rows] for name in names})
    return pl.DataFrame(data, schema={ROW: pl.Int64, **dict.fromkeys(names, pl.String)})


def observations_from_json(column: pl.Series, fields: Iterable[str]) -> pl.DataFrame:
    """The same frame from a column of JSON objects (the ledger's `observation`), vectorized."""
    frame = pl.DataFrame({"_obs": column.cast(pl.String)}).with_row_index(ROW)
    return frame.select(
        pl.col(ROW).cast(pl.Int64),
        *(pl.col("_obs").str.json_path_match(f"$.{f}").alias(f) for f in sorted(set(fields))),
    )


def ensure_fields(frame: pl.DataFrame, fields: Iterable[str]) -> pl.DataFrame:
    """Add a null text column for every field the frame lacks."""
    missing = [f for f in sorted(set(fields)) if f not in frame.columns]
    if not missing:
        return frame
    return frame.with_columns(pl.lit(None, dtype=pl.String).alias(f) for f in missing)


def _ordered(left: pl.Expr, right: pl.Expr, symbol: str) -> pl.Expr:
    ln, rn = left.cast(pl.Float64, strict=False), right.cast(pl.Float64, strict=False)
    numeric = ln.is_not_null() & rn.is_not_null()
    ops = {
        ">": (ln > rn, left > right),
        ">=": (ln >= rn, left >= right),
        "<": (ln < rn, left < right),
        "<=": (ln <= rn, left <= right),
        "==": (ln == rn, left == right),
    }
    as_number, as_text = ops[symbol]
    return pl.when(numeric).then(as_number).otherwise(as_text)


def _one(cond: Mapping[str, Any]) -> pl.Expr:
    ops = [op for op in cond if op != "field"]
    if "field" not in cond or len(ops) != 1 or ops[0] not in OPERATORS:
        raise ConditionError(f"a condition needs 'field' and exactly one operator: {dict(cond)}")
    op, value = ops[0], cond[ops[0]]
    col = pl.col(str(cond["field"]))
    if op == "missing":
        return col.is_null() if value else col.is_not_null()
    if op in ("equals", "not_equals"):
        same = col == pl.lit(text(value), dtype=pl.String)
        expr = same if op == "equals" else ~same
    elif op in ("in", "not_in"):
        expr = col.is_in([text(v) for v in value])
        expr = expr if op == "in" else ~expr
    elif op == "contains":
        expr = col.str.to_lowercase().str.contains(str(value).lower(), literal=True)
    elif op == "contains_any":
        lowered = col.str.to_lowercase()
        parts = [lowered.str.contains(str(v).lower(), literal=True) for v in value]
        expr = pl.any_horizontal(parts) if parts else pl.lit(False)
    elif op == "matches":
        expr = col.str.contains(str(value))
    elif op in ORDER_OPS:
        expr = _ordered(col, pl.lit(text(value), dtype=pl.String), ORDER_OPS[op])
    else:
        expr = _ordered(col, pl.col(str(value)), FIELD_OPS[op])
    return expr.fill_null(False)


def compile_all(conditions: Sequence[Mapping[str, Any]]) -> pl.Expr:
    """True where every condition holds (an empty list holds everywhere)."""
    if not conditions:
        return pl.lit(True)
    return pl.all_horizontal([_one(c) for c in conditions])


def compile_any(conditions: Sequence[Mapping[str, Any]]) -> pl.Expr:
    """True where at least one condition holds (an empty list holds nowhere)."""
    if not conditions:
        return pl.lit(False)
    return pl.any_horizontal([_one(c) for c in conditions])


def holds(conditions: Sequence[Mapping[str, Any]], observation: Mapping[str, Any]) -> bool:
    """Whether every condition holds for one observation (the same compiled expression)."""
    frame = observations_frame([observation], condition_fields(conditions))
    return bool(frame.select(compile_all(conditions)).item())
