"""Evaluation runs in the ledger: evaluate matured cases, replay, never overwrite.

A batch computes its components in one vectorized pass, asks the caller's `open_run`
for a tracking ID (the MLflow run that will describe the batch; the core never imports
MLflow), then writes runs, components, lineage and the batch row with bulk loads in the
caller's transaction. Runs are born non-primary: only `promote` makes a run count.

A replay evaluates decisions that already have a primary run under the profile again,
as new rows pointing at the run they replay (`replay_of`). Old rows are never updated,
so what a past statistic was computed from stays inspectable.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

import polars as pl
import sqlalchemy as sa

from reflexmem.evaluation.components import compute_components, long_components
from reflexmem.evaluation.profiles import COMPONENTS, BenchmarkProfile
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.bulk_read import read_frame
from reflexmem.ledger.sqlio import UTC_US, drop_stage, parse_utc, stage
from reflexmem.prices.providers import PriceProvider

BatchKind = Literal["evaluate", "replay", "promote"]

SELECT_SQL = """
SELECT rc.case_id, rc.decision_id, rc.role_id, rc.execution_id,
       d.symbol, d.direction, d.decided_at,
       p.position_id, p.opened_at, p.settled_at, p.entry_price, p.exit_price,
       p.realized_return{extra}
FROM role_cases rc
JOIN trading_decisions d ON d.decision_id = rc.decision_id
JOIN (SELECT decision_id, MIN(position_id) AS position_id FROM position_lifecycles
      WHERE status = 'settled' GROUP BY decision_id) sp ON sp.decision_id = rc.decision_id
JOIN position_lifecycles p ON p.position_id = sp.position_id
{join}
WHERE {where}
"""


@dataclass(frozen=True)
class BatchInfo:
    """What a tracking backend needs to open the run describing one batch."""

    kind: BatchKind
    batch_id: str
    profile: str
    profile_version: int
    roles: tuple[str, ...]
    n_runs: int


RunOpener = Callable[[BatchInfo], str | None]
"""Called once per non-empty batch, before the ledger write; returns the tracking run ID."""


@dataclass(frozen=True)
class EvaluationResult:
    """One written batch: its ID, tracking run and the runs as a wide frame."""

    info: BatchInfo
    mlflow_run_id: str | None
    runs: pl.DataFrame

    @property
    def n_runs(self) -> int:
        """How many runs the batch wrote."""
        return self.runs.height


def new_batch_id(kind: BatchKind) -> str:
    """A fresh batch ID; batches are events, so IDs never repeat."""
    return f"{kind[:4]}-{uuid.uuid4().hex[:20]}"


def _run_id(batch_id: str, decision_id: str) -> str:
    rid = f"ev-{batch_id[-12:]}-{decision_id}"
    if len(rid) <= 64:
        return rid
    return "ev-" + hashlib.sha1(f"{batch_id}:{decision_id}".encode()).hexdigest()


def _run_ids(batch_id: str, decision: pl.Expr) -> pl.Expr:
    short = pl.concat_str(pl.lit(f"ev-{batch_id[-12:]}-"), decision)
    return (
        pl.when(short.str.len_chars() <= 64)
        .then(short)
        .otherwise(decision.map_elements(lambda d: _run_id(batch_id, d), return_dtype=pl.String))
    )


def _role_filter(roles: Sequence[str] | None) -> str:
    if not roles:
        return ""
    for r in roles:
        if not r.replace("_", "").isalnum():
            raise ValueError(f"invalid role id {r!r}")
    return " AND rc.role_id IN (" + ", ".join(f"'{r}'" for r in roles) + ")"


def _typed(raw: pl.DataFrame) -> pl.DataFrame:
    return raw.with_columns(
        *[parse_utc(pl.col(c)).alias(c) for c in ("decided_at", "opened_at", "settled_at")],
        *[pl.col(c).cast(pl.Float64) for c in ("entry_price", "exit_price", "realized_return")],
    )


def select_unevaluated(
    conn: sa.Connection, profile: BenchmarkProfile, roles: Sequence[str] | None = None
) -> pl.DataFrame:
    """Eligible cases with a settled position and no run at all under the profile's name."""
    where = (
        "rc.state = 'eligible' AND NOT EXISTS (SELECT 1 FROM evaluation_runs r "
        f"WHERE r.decision_id = rc.decision_id AND r.profile = '{profile.name}')"
        + _role_filter(roles)
    )
    sql = SELECT_SQL.format(extra=", NULL AS replay_of", join="", where=where)
    return _typed(read_frame(conn, sql))


def select_for_replay(
    conn: sa.Connection,
    profile: BenchmarkProfile,
    roles: Sequence[str] | None = None,
    decisions: Sequence[str] | None = None,
) -> pl.DataFrame:
    """Cases whose decision has a primary run under the profile's name, with that run ID."""
    join = (
        "JOIN evaluation_runs pr ON pr.decision_id = rc.decision_id "
        f"AND pr.profile = '{profile.name}' AND pr.is_primary"
    )
    if decisions is not None:
        stage(conn, "_replay_decisions", pl.DataFrame({"decision_id": list(decisions)}))
        join += " JOIN _replay_decisions rd ON rd.decision_id = rc.decision_id"
    where = "1 = 1" + _role_filter(roles)
    sql = SELECT_SQL.format(extra=", pr.run_id AS replay_of", join=join, where=where)
    frame = _typed(read_frame(conn, sql))
    if decisions is not None:
        drop_stage(conn, "_replay_decisions")
    return frame


def batch_metrics(runs: pl.DataFrame) -> dict[str, float]:
    """Aggregates for tracking: count, and per component its mean and missing rate."""
    out: dict[str, float] = {"n_runs": float(runs.height)}
    if runs.height == 0:
        return out
    for name in COMPONENTS:
        mean = runs[name].cast(pl.Float64).mean()
        out[f"{name}_mean"] = float(mean) if isinstance(mean, float) else float("nan")
        rate = runs[f"{name}_missing"].cast(pl.Float64).mean()
        out[f"{name}_missing_rate"] = float(rate) if isinstance(rate, float) else 0.0
    return out


def tracking_table(runs: pl.DataFrame) -> pl.DataFrame:
    """The per-run table a tracking backend logs: ledger IDs, components, quality flags."""
    ids = [
        "run_id",
        "decision_id",
        "case_id",
        "role_id",
        "symbol",
        "direction",
        "decided_at",
        "execution_id",
        "position_id",
        "profile",
        "profile_version",
        "replay_of",
    ]
    cols = [c for c in ids if c in runs.columns]
    for name in COMPONENTS:
        cols += [name, f"{name}_missing", f"{name}_quality"]
    return runs.select(cols)


def _write(
    conn: sa.Connection, runs: pl.DataFrame, info: BatchInfo, mlflow_run_id: str | None
) -> None:
    now = datetime.now(UTC)
    n = runs.height
    bulk_insert(
        conn,
        "evaluation_runs",
        runs.select(
            "run_id",
            "decision_id",
            "profile",
            "profile_version",
            pl.lit(False).alias("is_primary"),
            pl.lit(mlflow_run_id, dtype=pl.String).alias("mlflow_run_id"),
            pl.lit(now).cast(UTC_US).alias("created_at"),
        ),
    )
    bulk_insert(conn, "evaluation_components", long_components(runs))
    bulk_insert(
        conn,
        "evaluation_run_lineage",
        runs.select(
            "run_id",
            pl.lit(info.batch_id).alias("batch_id"),
            "case_id",
            "role_id",
            pl.col("replay_of").cast(pl.String),
        ),
    )
    record_batch(conn, info, mlflow_run_id, n, now)


def record_batch(
    conn: sa.Connection,
    info: BatchInfo,
    mlflow_run_id: str | None,
    n: int,
    now: datetime | None = None,
) -> None:
    """The `evaluation_batches` row: the ledger end of the MLflow <-> ledger link."""
    bulk_insert(
        conn,
        "evaluation_batches",
        pl.DataFrame(
            {
                "batch_id": [info.batch_id],
                "kind": [info.kind],
                "profile": [info.profile],
                "profile_version": [info.profile_version],
                "roles": [json.dumps(list(info.roles))],
                "n_runs": [n],
                "mlflow_run_id": pl.Series([mlflow_run_id], dtype=pl.String),
                "created_at": pl.Series([now or datetime.now(UTC)], dtype=UTC_US),
            }
        ),
    )


def _evaluate_frame(
    conn: sa.Connection,
    cases: pl.DataFrame,
    prices: PriceProvider,
    profile: BenchmarkProfile,
    kind: BatchKind,
    open_run: RunOpener | None,
    batch_id: str | None,
) -> EvaluationResult:
    bid = batch_id or new_batch_id(kind)
    roles = tuple(sorted(set(cases["role_id"].to_list()))) if cases.height else ()
    info = BatchInfo(kind, bid, profile.name, profile.version, roles, cases.height)
    if cases.height == 0:
        return EvaluationResult(info, None, cases)
    source = prices.for_symbols({*cases["symbol"].unique().to_list(), profile.benchmark})
    runs = compute_components(cases, source, profile).with_columns(
        _run_ids(bid, pl.col("decision_id")).alias("run_id"),
        pl.lit(profile.name).alias("profile"),
        pl.lit(profile.version).alias("profile_version"),
    )
    mlflow_run_id = open_run(info) if open_run is not None else None
    _write(conn, runs, info, mlflow_run_id)
    return EvaluationResult(info, mlflow_run_id, runs)


def evaluate_matured(
    conn: sa.Connection,
    prices: PriceProvider,
    profile: BenchmarkProfile,
    *,
    roles: Sequence[str] | None = None,
    open_run: RunOpener | None = None,
    batch_id: str | None = None,
) -> EvaluationResult:
    """Evaluate every matured case not yet evaluated under the profile (idempotent)."""
    cases = select_unevaluated(conn, profile, roles)
    return _evaluate_frame(conn, cases, prices, profile, "evaluate", open_run, batch_id)


def replay(
    conn: sa.Connection,
    prices: PriceProvider,
    profile: BenchmarkProfile,
    *,
    roles: Sequence[str] | None = None,
    decisions: Sequence[str] | None = None,
    open_run: RunOpener | None = None,
    batch_id: str | None = None,
) -> EvaluationResult:
    """Re-evaluate decisions with a primary run under `profile`: new rows, none promoted."""
    cases = select_for_replay(conn, profile, roles, decisions)
    return _evaluate_frame(conn, cases, prices, profile, "replay", open_run, batch_id)
