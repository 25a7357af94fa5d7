"""Run an expectation suite on a staged batch and return one failure row per failed check.

Great Expectations is imported lazily (it takes seconds) and its context is ephemeral:
the suites are files in this folder, versioned with the code. Failures are read from the
COMPLETE result format with the batch's key as index column, so each failing row is
known individually. A result that cannot account for every unexpected row raises: the
admission is fail-closed, and a partial report must not admit anything.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

SUITES = Path(__file__).parent
KEY = "execution_id"


class SuiteError(RuntimeError):
    """The suite could not be evaluated completely; nothing may be admitted."""


def load_suite_spec(name: str) -> dict[str, Any]:
    """The suite's JSON document."""
    spec: dict[str, Any] = json.loads((SUITES / f"{name}.json").read_text(encoding="utf-8"))
    return spec


def expectation_names(name: str = "admission") -> list[str]:
    """The named expectations of a suite, in order."""
    return [e["meta"]["name"] for e in load_suite_spec(name)["expectations"]]


@functools.cache
def _context() -> Any:
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    ctx = gx.get_context(mode="ephemeral")
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    return ctx


@functools.cache
def _batch_definition(name: str) -> tuple[Any, Any]:
    import great_expectations as gx

    ctx = _context()
    source = ctx.data_sources.add_pandas(f"staged_{name}")
    definition = source.add_dataframe_asset(f"{name}_batch").add_batch_definition_whole_dataframe(
        "whole"
    )
    spec = load_suite_spec(name)
    suite = ctx.suites.add(
        gx.ExpectationSuite(name=spec["name"], expectations=spec["expectations"], meta=spec["meta"])
    )
    return definition, suite


def _validate(pdf: Any, name: str, parameters: dict[str, Any], key: str) -> pl.DataFrame:
    definition, suite = _batch_definition(name)
    batch = definition.get_batch(batch_parameters={"dataframe": pdf})
    result = batch.validate(
        suite,
        expectation_parameters=parameters,
        result_format={
            "result_format": "COMPLETE",
            "unexpected_index_column_names": [key],
            "return_unexpected_index_query": False,
        },
    )
    keys: list[Any] = []
    names: list[str] = []
    severities: list[str] = []
    for item in result.results:
        config = item.expectation_config
        label = (config.meta or {}).get("name", config.type)
        if item.exception_info and item.exception_info.get("raised_exception"):
            raise SuiteError(f"{name}.{label}: {item.exception_info.get('exception_message')}")
        if item.success:
            continue
        index = item.result.get("unexpected_index_list") or []
        if len(index) != item.result.get("unexpected_count", -1):
            raise SuiteError(f"{name}.{label}: unexpected rows were not all reported")
        keys.extend(row[key] for row in index)
        names.extend([label] * len(index))
        severities.extend([str(config.severity.value)] * len(index))
    return pl.DataFrame(
        {key: keys, "expectation": names, "severity": severities},
        schema_overrides={"expectation": pl.String, "severity": pl.String},
    )


def validate_rows(pdf: Any, name: str, parameters: dict[str, Any], key: str) -> pl.DataFrame:
    """Failures of a pandas batch under suite `name`: (key, expectation, severity) rows."""
    return _validate(pdf, name, parameters, key)


def checked_columns(name: str) -> list[str]:
    """The columns a suite's expectations read."""
    _, suite = _batch_definition(name)
    return sorted({e.column for e in suite.expectations})


def run_suite(
    frame: pl.DataFrame,
    name: str,
    parameters: dict[str, Any],
    *,
    key: str = KEY,
    per_row: bool = False,
) -> pl.DataFrame:
    """Failures of `frame` under suite `name`: one row per (key, expectation).

    Every expectation in these suites is a row-wise function of the columns it names,
    so by default each distinct combination of checked values is validated once and its
    failures are mapped back to every row that carries it: the same verdicts as
    validating row by row (a test holds the two paths equal), at a cost that no longer
    grows with the batch. `per_row=True` validates the rows themselves.
    """
    columns = checked_columns(name)
    if per_row:
        failures = _validate(frame.select([key, *columns]).to_pandas(), name, parameters, key)
        return failures.with_columns(pl.col(key).cast(frame.schema[key]))
    profiles = frame.select(columns).unique().with_row_index("_profile")
    failures = _validate(profiles.to_pandas(), name, parameters, "_profile")
    failures = failures.with_columns(pl.col("_profile").cast(pl.UInt32))
    rows = frame.select([key, *columns]).join(profiles, on=columns, nulls_equal=True)
    return (
        rows.join(failures, on="_profile")
        .select(key, "expectation", "severity")
        .sort(key, "expectation")
    )


def validate_admission(staged: pl.DataFrame, role_ids: Sequence[str]) -> pl.DataFrame:
    """The admission validator the core's `admit` expects."""
    return run_suite(staged, "admission", {"registered_roles": list(role_ids)})
