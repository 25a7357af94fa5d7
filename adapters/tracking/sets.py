"""A batch's decisions as an MLflow dataset input, and the tags that make the batch findable.

One run per batch scales (a run or a tag per decision would not), so every batch run
says *which* decisions it covers in two ways: a dataset input (name, a digest of the
sorted decision IDs, source = the ledger and the exact query that returns the set,
schema and row count), and searchable tags: `reflexmem.roles`, `reflexmem.symbols` and
`reflexmem.decided_dates` as `,a,b,` sets, `reflexmem.first_decided_at` /
`reflexmem.last_decided_at`, and `reflexmem.n_decisions`. A reviewer holding a decision
(role, symbol, day) finds its batches with
`tags.reflexmem.symbols LIKE '%,AAPL,%' AND tags.reflexmem.decided_dates LIKE '%,2025-01-14,%'`.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import polars as pl

from adapters.tracking.context import member_tag

SOURCE_TYPE = "reflexmem-ledger"
CHUNK = 200_000
"""Decision IDs hashed per step: the digest never materialises one huge string."""

_MLFLOW_TYPES: dict[object, str] = {
    pl.String: "string",
    pl.Int64: "long",
    pl.Int32: "integer",
    pl.Float64: "double",
    pl.Boolean: "boolean",
}


def digest(decision_ids: pl.Series) -> str:
    """A stable digest of a set of decision IDs (order and duplicates do not matter)."""
    ids = decision_ids.cast(pl.String).drop_nulls().unique().sort()
    h = hashlib.sha256()
    for start in range(0, ids.len(), CHUNK):
        h.update("\n".join(ids.slice(start, CHUNK).to_list()).encode())
        h.update(b"\n")
    return h.hexdigest()[:32]


def _iso(value: Any) -> str:
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def set_tags(frame: pl.DataFrame) -> dict[str, str]:
    """Searchable tags of a batch from its decision rows (role_id, symbol, decided_at)."""
    tags: dict[str, str] = {"reflexmem.n_decisions": str(frame["decision_id"].n_unique())}
    if "role_id" in frame.columns:
        tags["reflexmem.roles"] = member_tag(frame["role_id"].unique().to_list())
    if "symbol" in frame.columns:
        tags["reflexmem.symbols"] = member_tag(frame["symbol"].unique().to_list())
    if "decided_at" in frame.columns and frame.height:
        stamps = frame["decided_at"].drop_nulls()
        if stamps.len():
            tags["reflexmem.first_decided_at"] = _iso(stamps.min())
            tags["reflexmem.last_decided_at"] = _iso(stamps.max())
            days = stamps.dt.strftime("%Y-%m-%d").unique().to_list()
            tags["reflexmem.decided_dates"] = member_tag(days)
    return {k: v for k, v in tags.items() if v}


def _schema(frame: pl.DataFrame) -> str:
    cols = [
        {"name": name, "type": _MLFLOW_TYPES.get(dtype, "string")}
        for name, dtype in frame.schema.items()
    ]
    return json.dumps({"mlflow_colspec": cols})


def log_decision_set(
    client: Any,
    run_id: str,
    frame: pl.DataFrame,
    *,
    name: str,
    context: str,
    ledger_url: str,
    query: str,
) -> str:
    """Log the batch's decision set as the run's dataset input; returns its digest."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    value = digest(frame["decision_id"])
    source = json.dumps({"ledger": ledger_url, "query": " ".join(query.split())})
    profile = json.dumps(
        {"num_rows": frame.height, "num_decisions": frame["decision_id"].n_unique()}
    )
    dataset = Dataset(
        name=name,
        digest=value,
        source_type=SOURCE_TYPE,
        source=source,
        schema=_schema(frame),
        profile=profile,
    )
    tags = [InputTag("mlflow.data.context", context)]
    client.log_inputs(run_id, datasets=[DatasetInput(dataset, tags)])
    return value
