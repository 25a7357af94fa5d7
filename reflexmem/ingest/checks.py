"""A file contract's value checks as polars expressions, judged in one pass.

`coerce` used to judge a column at a time, a handful of polars calls per check: cheap on
a million rows, but most of the cost of one row sent to the agent API (70 polars calls,
17 ms, for one decision). Each check is now an expression saying which rows break it;
`first_failure` evaluates every check's `any()` in a single `select` and only when one
fails looks again, at the first failing check in contract order (column by column:
parse, value, length, required, vocabulary, JSON; then the key), for its first row and
the value to quote. Valid input, the common case, costs one pass whatever the width.

The check frame holds `_row`, each given column as read (`raw:<name>`) and each column
as parsed, before its default is filled (`<name>`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl

from reflexmem.ingest.schemas import Column, FileSchema

RAW = "raw:"
"""Prefix of a column as read, beside its parsed form in the check frame."""
NUL = "\x00"
JSON_NUL = "\\u0000"
"""A NUL written as a JSON escape: PostgreSQL cannot store it in text either."""


@dataclass(frozen=True)
class Check:
    """Rows breaking one rule of one column: `bad` is true on them.

    The message is `why` with `{value}` replaced by the repr of the row's `quote` value.
    """

    column: str
    bad: pl.Expr
    why: str
    quote: pl.Expr | None = None


def value(col: Column) -> pl.Expr:
    """The parsed column with its default filled in (what is stored)."""
    expr = pl.col(col.name)
    return expr if col.default is None else expr.fill_null(col.default)


def _number_checks(col: Column, raw_dtype: pl.DataType) -> Iterator[Check]:
    source, parsed = pl.col(RAW + col.name), value(col)
    if col.type == "int" and raw_dtype.is_float():
        whole = source.is_finite() & (source == source.floor()) & (source.abs() < 2.0**63)
        fractional = source.is_not_null() & ~whole.fill_null(False)
        yield Check(col.name, fractional, "{value} is not a whole number", source)
    if col.type == "float":
        infinite = parsed.is_not_null() & ~parsed.is_finite()
        yield Check(col.name, infinite, "{value} is not a finite number", source)
    if col.minimum is not None:
        low = parsed < col.minimum
        if col.exclusive:
            low = low | (parsed == col.minimum)
        bound = "greater than" if col.exclusive else "at least"
        yield Check(
            col.name, low.fill_null(False), f"{{value}} must be {bound} {col.minimum:g}", source
        )


def _value_checks(col: Column, raw_dtype: pl.DataType, *, ledger: bool) -> Iterator[Check]:
    """Values no ledger row can hold.

    NUL bytes in any text; for ledger kinds also non-finite numbers, fractional values
    of integer columns and numbers below their column's minimum (market bars leave
    those to their expectation suite, which quarantines the bar instead).
    """
    parsed = value(col)
    if col.type in ("str", "json"):
        nul = parsed.str.contains(NUL, literal=True).fill_null(False)
        if col.type == "json":
            nul = nul | parsed.str.contains(JSON_NUL, literal=True).fill_null(False)
        yield Check(col.name, nul, "{value} contains a NUL byte", parsed)
    elif col.type in ("float", "int") and ledger:
        yield from _number_checks(col, raw_dtype)


def column_checks(col: Column, raw_dtype: pl.DataType, *, ledger: bool) -> Iterator[Check]:
    """Every rule of one given column, in the order its failures are reported."""
    source, parsed = pl.col(RAW + col.name), value(col)
    given = source.is_not_null()
    if raw_dtype == pl.String:
        given = given & (source.str.strip_chars() != "")
    unparsed = given & pl.col(col.name).is_null()
    yield Check(col.name, unparsed, f"cannot parse {{value}} as {col.type}", source)
    yield from _value_checks(col, raw_dtype, ledger=ledger)
    if col.max_length is not None:
        long = parsed.str.len_chars() > col.max_length
        yield Check(col.name, long, f"{{value}} is longer than {col.max_length} characters", parsed)
    if col.required and not col.empty_ok:
        yield Check(col.name, parsed.is_null(), "is empty but required")
    if col.enum is not None:
        allowed = [m.value for m in col.enum]
        off = parsed.is_not_null() & ~parsed.is_in(allowed)
        yield Check(col.name, off, f"{{value}} is not one of {', '.join(allowed)}", parsed)
    if col.type == "json":
        text = parsed.str.strip_chars()
        invalid = text.is_not_null() & (text != "null") & text.str.json_path_match("$").is_null()
        yield Check(col.name, invalid, "is not valid JSON")


def checks(schema: FileSchema, raw_schema: pl.Schema) -> tuple[Check, ...]:
    """The value checks of every column the file gave, in contract order."""
    return _checks(schema, tuple(raw_schema.items()))


@functools.lru_cache(maxsize=256)
def _checks(schema: FileSchema, given: tuple[tuple[str, pl.DataType], ...]) -> tuple[Check, ...]:
    """Built once per contract and file shape: building costs more than judging a row."""
    dtypes, ledger = dict(given), schema.suite is None
    return tuple(
        check
        for col in schema.columns
        if col.name in dtypes
        for check in column_checks(col, dtypes[col.name], ledger=ledger)
    )


def first_failure(frame: pl.DataFrame, rules: tuple[Check, ...]) -> Check | None:
    """The first rule some row of `frame` breaks, judged in one pass, or None."""
    if not rules:
        return None
    broken = frame.select([rule.bad.any().alias(str(i)) for i, rule in enumerate(rules)]).row(0)
    return next((rule for rule, hit in zip(rules, broken, strict=True) if hit), None)
