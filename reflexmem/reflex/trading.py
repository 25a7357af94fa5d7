"""Trading decisions as REFLEX inputs: the observation of a decision and its independent label.

A trading decision is a task of family `trade_decision`. What a skill may read about it
is what the decision record carried when it was made: role, account, symbol, direction,
scenario, the decision time, and for every evidence kind the registry knows the age of
the freshest item in days (`<kind>_age_days`: negative when the item is dated after the
decision, absent when the record has none), plus `summary`, the record in words, which
example-based (L2) skills compare. Everything is derived with polars over the whole
batch: the evidence JSON is decoded, exploded and pivoted once, never row by row.

The independent answer of a past decision is what reflection concluded once its outcome
was known: the case's lesson, as the `pattern:<key>` tag the memory merges it under
(`reflexmem.memory.role_stream.lesson_key`). A skill learned from a pattern holds a
decision exactly when reflection later finds that pattern in it.

Every labelled episode falls in one of three splits by a stable hash of its decision
ID: `fit` (40 %: candidates are generated from it), `evaluation` (30 %: the independent
evaluation) and `replay` (30 %: the replay of past inputs), so no decision ever serves
two of those steps. The shares were fixed before any data was looked at.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk_read import read_frame
from reflexmem.ledger.sqlio import UTC_US, parse_utc, to_utc
from reflexmem.maturation.settlement import OWN_POSITION_JOINS
from reflexmem.memory.role_stream import evidence_ages, lesson_gist, lesson_key
from reflexmem.reflex.conditions import ROW
from reflexmem.reflex.rollout import rollout_buckets
from reflexmem.registry import RoleRegistry

TRADE_FAMILY = "trade_decision"
TRADE_ENVIRONMENT = "trading-v1"
PROCEED = "proceed"
SPLIT_SALT = "reflex-skill-split-v1"
SPLITS = (("fit", 0.4), ("evaluation", 0.7), ("replay", 1.0))
"""Upper bucket bound of each split, in order."""
TEXT_FIELDS = ("role_id", "account", "symbol", "direction", "scenario", "decided_at", "summary")
ID_COLUMNS = ("decision_id", "role_id", "account", "symbol", "decided_at")

SETTLED_AT = "settled_at"
"""When a decision's return settled: its position's own settlement time."""
_EPISODES_SQL = """
SELECT ep.episode_id, ep.case_id, ep.decision_id, ep.episode_index, d.role_id, d.account,
       d.symbol, d.direction, d.scenario, d.decided_at, CAST(d.evidence AS TEXT) AS evidence,
       rc.outcome_class, rc.lesson,
       CASE WHEN pos.status = 'settled' THEN pos.realized_return END AS realized_return,
       CASE WHEN pos.status = 'settled' THEN pos.settled_at END AS settled_at
FROM episodes ep
JOIN role_cases rc ON rc.case_id = ep.case_id
JOIN trading_decisions d ON d.decision_id = ep.decision_id
LEFT JOIN trade_executions e ON e.execution_id = rc.execution_id
{own_position}
WHERE ep.task_family = '{family}' AND ep.case_id IS NOT NULL {window}
ORDER BY d.decided_at, ep.episode_id
"""
"""Reflected episodes with the settled return of the case's execution's own position and
when it settled (`maturation.settlement.OWN_POSITION_JOINS`; null when unsettled,
ambiguous or absent)."""
_DECISIONS_SQL = """
SELECT d.decision_id, d.role_id, d.account, d.symbol, d.direction, d.scenario, d.decided_at,
       CAST(d.evidence AS TEXT) AS evidence
FROM trading_decisions d
WHERE 1 = 1 {window}
ORDER BY d.decided_at, d.decision_id
"""


def ts_literal(conn: sa.Connection, value: datetime) -> str:
    """A UTC timestamp as a SQL literal comparable with the dialect's stored timestamps."""
    utc = to_utc(value)
    if conn.dialect.name == "postgresql":
        return f"TIMESTAMPTZ '{utc.isoformat()}'"
    return f"'{utc.replace(tzinfo=None).strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def _window(conn: sa.Connection, after: datetime | None, through: datetime | None) -> str:
    parts = []
    if after is not None:
        parts.append(f"AND d.decided_at > {ts_literal(conn, after)}")
    if through is not None:
        parts.append(f"AND d.decided_at <= {ts_literal(conn, through)}")
    return " ".join(parts)


def evidence_kinds(registry: RoleRegistry) -> tuple[str, ...]:
    """Every evidence kind some role requires, sorted: the observation's age fields."""
    return tuple(
        sorted({e.kind for r in registry.roles.values() for e in r.policy.required_evidence})
    )


def age_field(kind: str) -> str:
    """The observation field holding an evidence kind's age in days."""
    return f"{kind}_age_days"


def _ages(raw: pl.DataFrame, kinds: Sequence[str]) -> pl.DataFrame:
    """`decision_id` plus one age column per kind (freshest item; negative = after)."""
    items = (
        evidence_ages(raw, "decision_id")
        .filter(pl.col("kind").is_in(list(kinds)))
        .group_by("decision_id", "kind")
        .agg(pl.col("age").min().round(3))
    )
    wide = pl.DataFrame(
        {"decision_id": raw["decision_id"].unique()}, schema={"decision_id": pl.String}
    )
    for kind in kinds:
        one = items.filter(pl.col("kind") == kind).select(
            "decision_id", pl.col("age").alias(age_field(kind))
        )
        wide = wide.join(one, on="decision_id", how="left")
    return wide


def _summary(kinds: Sequence[str], limits: dict[tuple[str, str], float]) -> pl.Expr:
    """The record in words: role, direction, scenario, account, symbol, each evidence state."""
    parts: list[pl.Expr] = []
    role = pl.col("role_id")
    for kind in kinds:
        age = pl.col(age_field(kind))
        limit = role.replace_strict(
            {r: v for (r, k), v in limits.items() if k == kind}, default=None
        ).cast(pl.Float64)
        state = (
            pl.when(age.is_null())
            .then(pl.lit(None, dtype=pl.String))
            .when(age < 0)
            .then(pl.lit(f"{kind} dated after the decision"))
            .when(limit.is_not_null() & (age > limit))
            .then(pl.lit(f"{kind} stale"))
            .otherwise(pl.lit(f"{kind} current"))
        )
        parts.append(state)
    evidence = pl.concat_str(parts, separator=", ", ignore_nulls=True)
    head = pl.concat_str(
        [role, pl.col("direction"), pl.col("scenario"), pl.col("account"), pl.col("symbol")],
        separator=" ",
        ignore_nulls=True,
    )
    return pl.concat_str([head, pl.lit("evidence:"), evidence], separator=" ").alias("summary")


def observations(raw: pl.DataFrame, registry: RoleRegistry) -> pl.DataFrame:
    """Typed observation columns (ages as floats, times as UTC) for raw decision rows."""
    kinds = evidence_kinds(registry)
    limits = {
        (rid, e.kind): e.max_age_days
        for rid, r in registry.roles.items()
        for e in r.policy.required_evidence
    }
    frame = raw.with_columns(parse_utc(pl.col("decided_at")).alias("decided_at"))
    frame = frame.join(_ages(frame, kinds), on="decision_id", how="left", maintain_order="left")
    return frame.with_columns(_summary(kinds, limits)).drop("evidence")


def labelled(frame: pl.DataFrame) -> pl.DataFrame:
    """Episode rows with `pattern` (the lesson's memory tag, null without a lesson) and split."""
    distinct = frame["lesson"].drop_nulls().unique().to_list()
    keys = {t: f"pattern:{lesson_key(t)}" for t in distinct}
    gists = {t: lesson_gist(t) for t in distinct}
    out = frame.with_columns(
        pl.col("lesson")
        .replace_strict(keys, default=None, return_dtype=pl.String)
        .alias("pattern"),
        pl.col("lesson").replace_strict(gists, default=None, return_dtype=pl.String).alias("gist"),
        pl.col("episode_index").cast(pl.Int64),
    )
    return with_split(out)


def with_split(frame: pl.DataFrame) -> pl.DataFrame:
    """The `split` (fit, evaluation or replay) of every row, by its decision's bucket."""
    bucket = rollout_buckets(frame, SPLIT_SALT, account="decision_id", symbol="role_id")
    split: Any = pl.when(pl.col("_bucket") < SPLITS[0][1]).then(pl.lit(SPLITS[0][0]))
    for name, upper in SPLITS[1:]:
        split = split.when(pl.col("_bucket") < upper).then(pl.lit(name))
    return (
        frame.with_columns(bucket.alias("_bucket"))
        .with_columns(split.otherwise(pl.lit(SPLITS[-1][0])).alias("split"))
        .drop("_bucket")
    )


def read_episodes(
    conn: sa.Connection,
    registry: RoleRegistry,
    *,
    after: datetime | None = None,
    through: datetime | None = None,
) -> pl.DataFrame:
    """Reflected `trade_decision` episodes decided in (`after`, `through`], labelled and split."""
    sql = _EPISODES_SQL.format(
        family=TRADE_FAMILY, window=_window(conn, after, through), own_position=OWN_POSITION_JOINS
    )
    raw = read_frame(conn, sql)
    if raw.height == 0:
        raw = _empty(raw.columns)
    ret = pl.col("realized_return").cast(pl.Float64, strict=False)
    raw = raw.with_columns(
        pl.when(ret.is_finite()).then(ret).alias("realized_return"),
        parse_utc(pl.col(SETTLED_AT)).alias(SETTLED_AT),
    )
    return labelled(observations(raw, registry))


def read_decisions(
    conn: sa.Connection,
    registry: RoleRegistry,
    *,
    after: datetime | None = None,
    through: datetime | None = None,
) -> pl.DataFrame:
    """Decisions made in (`after`, `through`], as observations (no label: not yet known)."""
    raw = read_frame(conn, _DECISIONS_SQL.format(window=_window(conn, after, through)))
    if raw.height == 0:
        raw = _empty(raw.columns)
    return observations(raw, registry)


def _empty(columns: Sequence[str]) -> pl.DataFrame:
    schema = dict.fromkeys(columns, pl.String)
    return pl.DataFrame(schema=schema)


def text_frame(frame: pl.DataFrame, registry: RoleRegistry) -> pl.DataFrame:
    """The observation as the text columns the condition language compares, plus `_row`."""
    ages = [age_field(k) for k in evidence_kinds(registry)]
    return frame.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias(ROW),
        *[pl.col(c).cast(pl.String) for c in TEXT_FIELDS if c != "decided_at"],
        pl.col("decided_at").dt.strftime("%Y-%m-%dT%H:%M:%S+00:00").alias("decided_at"),
        *[pl.col(a).cast(pl.String) for a in ages],
    )


def judged_frame(frame: pl.DataFrame, registry: RoleRegistry) -> pl.DataFrame:
    """Labelled episodes as the frame skills decide on: text columns plus the label's.

    Adds to `text_frame` the episode and decision IDs, `pattern`, `gist`,
    `outcome_class`, `split`, `realized_return` (the settled return of the decision's
    execution's own position, a float, null when unknown), `settled_at` (when that
    return settled) and `decided_at_ts` (the decision time as a timestamp).
    """
    keep = ["episode_id", "case_id", "decision_id", "pattern", "gist", "outcome_class", "split"]
    unknown = {
        "realized_return": pl.lit(None, dtype=pl.Float64),
        SETTLED_AT: pl.lit(None, dtype=UTC_US),
    }
    for name, null in unknown.items():
        if name not in frame.columns:  # a frame built without the ledger's join
            frame = frame.with_columns(null.alias(name))
    keep += list(unknown)
    return text_frame(frame, registry).with_columns(
        *[frame[c] for c in keep], frame["decided_at"].alias("decided_at_ts")
    )


_CHECKS_SQL = """
SELECT e.episode_id, e.decision_id, d.decided_at, e.skill_id, e.skill_version, e.layer,
       e.status, e.status_reason, CAST(e.escalations AS TEXT) AS escalations
FROM episodes e JOIN trading_decisions d ON d.decision_id = e.decision_id
WHERE e.task_family = '{family}' AND e.case_id IS NULL AND e.agent_id = '{agent}' {window}
"""


def read_checks(
    conn: sa.Connection,
    agent: str,
    *,
    after: datetime | None = None,
    through: datetime | None = None,
) -> pl.DataFrame:
    """Recorded pre-decision checks: decision, the version asked, whether it stopped it."""
    sql = _CHECKS_SQL.format(family=TRADE_FAMILY, agent=agent, window=_window(conn, after, through))
    raw = read_frame(conn, sql)
    if raw.height == 0:
        raw = _empty(raw.columns)
    asked = pl.col("escalations").str.json_path_match("$[0].skill")
    return raw.select(
        "episode_id",
        "decision_id",
        parse_utc(pl.col("decided_at")).alias("decided_at_ts"),
        asked.alias("checked_key"),
        asked.str.split("@").list.first().alias("checked_id"),
        asked.str.split("@").list.last().cast(pl.Int64, strict=False).alias("checked_version"),
        pl.col("status"),
        pl.col("status_reason"),
        pl.col("status").is_in(["hold", "request"]).alias("stopped"),
    )


def observation_json(frame: pl.DataFrame, registry: RoleRegistry) -> pl.Series:
    """Each row's observation as a JSON object (numbers as numbers; absent fields omitted)."""
    ages = [age_field(k) for k in evidence_kinds(registry)]
    stamp = pl.col("decided_at").dt.strftime("%Y-%m-%dT%H:%M:%S+00:00").alias("decided_at")
    data = frame.select(*[c for c in TEXT_FIELDS if c != "decided_at"], stamp, *ages)
    encoded = data.select(pl.struct(pl.all()).struct.json_encode().alias("observation"))
    # json_encode writes nulls; an absent field is what the input contract calls absent.
    return encoded["observation"].str.replace_all(r',?"[a-z_]+":null', "").str.replace(r"^\{,", "{")


def observation_schema(registry: RoleRegistry) -> dict[str, object]:
    """The JSON Schema of a trading observation: the input contract of trading skills."""
    props: dict[str, object] = {
        name: {"type": "string", "minLength": 1} for name in TEXT_FIELDS if name != "scenario"
    }
    props["scenario"] = {"type": "string"}
    props.update({age_field(k): {"type": "number"} for k in evidence_kinds(registry)})
    return {
        "type": "object",
        "required": ["role_id", "account", "symbol", "direction", "decided_at", "summary"],
        "properties": props,
    }


__all__ = [
    "ID_COLUMNS",
    "PROCEED",
    "SETTLED_AT",
    "TRADE_ENVIRONMENT",
    "TRADE_FAMILY",
    "UTC_US",
    "age_field",
    "evidence_kinds",
    "labelled",
    "observation_json",
    "observation_schema",
    "observations",
    "read_decisions",
    "read_episodes",
    "text_frame",
    "ts_literal",
    "with_split",
]
