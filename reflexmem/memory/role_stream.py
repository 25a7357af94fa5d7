"""The trading stream as memory episodes: every reflected role case is one episode.

A case becomes an episode of its role's namespace (`role:<id>`) once it is reflected and
has a primary evaluation run. Everything the memory learns from is derived here, as
polars expressions over the whole batch:

* **outcome s in [-1, 1]**: `tanh(z)`, with `z` the role's own outcome probe measured in
  the instrument's noise over the position's window (`forward_return` and
  `excess_return` divided by `realized_vol * sqrt(window days)`; `risk_adjusted` is
  already that ratio). No constant is tuned: one noise unit maps to s = 0.76. When the
  window's volatility is missing, only the direction is known: s = +-0.5 by the
  direction hit, and the quality below says the measurement is incomplete.
* **quality in [0, 1]**: the share of the four evaluation components (raw return,
  excess vs benchmark, risk-adjusted, direction hit) that the primary run measured; a
  case with fewer than two of them falls under the 0.3 floor and is not remembered.
* **tags**: `class:<outcome class>`, `symbol:<S>`, `scenario:<X>`, and for a case with a
  lesson `pattern:<key>`: the unit lesson distillation merges. Beside them the
  *conditions* known before the outcome, the only tags a rule may be learned from
  (`outcome_rules.py`): `direction:<d>`, `missing:<kind>` for each evidence kind the role
  requires that the decision record lacked or carried older than the role allows, and
  `against:signal` when the decision's direction contradicted the role's own signal.
  A lesson's key is a hash of its *gist* (its wording with the case's numbers as N),
  so the same mistake is one pattern of the role however its amounts differ; a pattern
  keeps the symbol and scenario tags only when all its cases share them, so a recall
  filtered to a symbol sees exactly the patterns drawn from that symbol's cases.
* **policy**: the retrieval policy of the decision's latest recall, if the agent made
  one; the bandit is credited with this episode's reward.
"""

from __future__ import annotations

import hashlib
import re

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk_read import read_frame
from reflexmem.ledger.sqlio import parse_utc
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.registry import RoleRegistry

_DAY_S = 86_400.0
_BRACKETED_NUMBER = re.compile(r"\s*\([+-]?\d+(?:\.\d+)?%?\)")
_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")

SELECT_SQL = """
SELECT rc.case_id, rc.decision_id, rc.role_id, rc.symbol, rc.scenario, rc.outcome_class,
       rc.lesson, d.direction, d.decided_at, CAST(d.evidence AS TEXT) AS evidence,
       pos.opened_at, pos.settled_at, rl.policy,
       MAX(CASE WHEN c.name = 'signal_at_decision' AND NOT c.missing THEN c.value END)
           AS signal,
       MAX(CASE WHEN c.name = 'raw_return' AND NOT c.missing THEN c.value END) AS raw_return,
       MAX(CASE WHEN c.name = 'excess_vs_benchmark' AND NOT c.missing THEN c.value END)
           AS excess,
       MAX(CASE WHEN c.name = 'risk_adjusted' AND NOT c.missing THEN c.value END)
           AS risk_adjusted,
       MAX(CASE WHEN c.name = 'direction_hit' AND NOT c.missing THEN c.value END) AS hit,
       MAX(CASE WHEN c.name = 'realized_vol' AND NOT c.missing THEN c.value END) AS vol,
       SUM(CASE WHEN c.name IN ('raw_return', 'excess_vs_benchmark', 'risk_adjusted',
                                'direction_hit') AND NOT c.missing THEN 1 ELSE 0 END)
           AS measured
FROM role_cases rc
JOIN trading_decisions d ON d.decision_id = rc.decision_id
JOIN evaluation_runs r ON r.decision_id = rc.decision_id AND r.profile = '{profile}'
     AND r.is_primary
JOIN evaluation_components c ON c.run_id = r.run_id
JOIN evaluation_run_lineage l ON l.run_id = r.run_id
LEFT JOIN (SELECT decision_id, MIN(position_id) AS position_id FROM position_lifecycles
           WHERE status = 'settled' GROUP BY decision_id) sp ON sp.decision_id = rc.decision_id
LEFT JOIN position_lifecycles pos ON pos.position_id = sp.position_id
LEFT JOIN (SELECT decision_id, policy,
                  ROW_NUMBER() OVER (PARTITION BY decision_id
                                     ORDER BY recalled_at DESC, recall_id DESC) AS rn
           FROM recall_log WHERE namespace = '{namespace}') rl
       ON rl.decision_id = rc.decision_id AND rl.rn = 1
WHERE rc.role_id = '{role}' AND rc.state = 'reflected' AND l.case_id = rc.case_id
  AND NOT EXISTS (SELECT 1 FROM episodes e WHERE e.case_id = rc.case_id)
GROUP BY rc.case_id, rc.decision_id, rc.role_id, rc.symbol, rc.scenario, rc.outcome_class,
         rc.lesson, d.direction, d.decided_at, CAST(d.evidence AS TEXT), pos.opened_at,
         pos.settled_at, rl.policy
ORDER BY d.decided_at, rc.case_id
LIMIT {limit}
"""

FLOATS = ("raw_return", "excess", "risk_adjusted", "hit", "vol", "signal")
MIN_SIGNAL = 0.1
"""A signal closer to zero is neutral: going against it contradicts nothing (as reflection)."""
MEASURED_OF = 4


def lesson_gist(text: str) -> str:
    """A lesson without the case's own numbers: what repeats when the mistake repeats."""
    return " ".join(_NUMBER.sub("N", _BRACKETED_NUMBER.sub("", text)).split())


def lesson_key(text: str) -> str:
    """A short stable key of a lesson's gist."""
    return hashlib.sha1(lesson_gist(text).encode("utf-8")).hexdigest()[:12]


def select_unrecorded(
    conn: sa.Connection, role_id: str, *, profile: str, limit: int
) -> pl.DataFrame:
    """Reflected cases of one role with a primary run and no episode yet, oldest first."""
    if not role_id.replace("_", "").isalnum() or "'" in profile:
        raise ValueError(f"invalid role {role_id!r} or profile {profile!r}")
    sql = SELECT_SQL.format(
        profile=profile, role=role_id, namespace=role_namespace(role_id), limit=int(limit)
    )
    raw = read_frame(conn, sql)
    return raw.with_columns(
        *[parse_utc(pl.col(c)).alias(c) for c in ("decided_at", "opened_at", "settled_at")],
        *[pl.col(c).cast(pl.Float64) for c in FLOATS],
        pl.col("measured").cast(pl.Int64),
    )


def evidence_ages(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    """One row per evidence item of each decision: `key`, `kind`, `age` in days.

    `frame` holds `key`, `decided_at` and `evidence` (the record's JSON list of
    `{kind, as_of}`); a negative age is an item dated after the decision.
    """
    item = pl.Struct({"kind": pl.String, "as_of": pl.String})
    return (
        frame.select(key, "decided_at", pl.col("evidence").str.json_decode(pl.List(item)))
        .explode("evidence")
        .drop_nulls("evidence")
        .unnest("evidence")
        .select(
            key,
            "kind",
            ((pl.col("decided_at") - parse_utc(pl.col("as_of"))).dt.total_seconds() / _DAY_S).alias(
                "age"
            ),
        )
    )


def missing_kinds(cases: pl.DataFrame, registry: RoleRegistry) -> pl.DataFrame:
    """`case_id` and `missing`: `missing:<kind>` per required kind absent or too old.

    An item counts when it is dated at or before the decision and no older than the
    role's `max_age_days`; an item dated after the decision is look-ahead, not evidence.
    """
    required = pl.DataFrame(
        [
            (rid, e.kind, e.max_age_days)
            for rid, r in registry.roles.items()
            for e in r.policy.required_evidence
        ],
        schema={"role_id": pl.String, "kind": pl.String, "max_age": pl.Float64},
        orient="row",
    )
    fresh = (
        evidence_ages(cases, "case_id")
        .group_by("case_id", "kind")
        .agg(pl.col("age").filter(pl.col("age") >= 0).min())
    )
    return (
        cases.select("case_id", "role_id")
        .join(required, on="role_id")
        .join(fresh, on=["case_id", "kind"], how="left")
        .filter(pl.col("age").is_null() | (pl.col("age") > pl.col("max_age")))
        .group_by("case_id")
        .agg(pl.format("missing:{}", "kind").sort().alias("missing"))
    )


BLOCK_SECONDS = 14 * 86_400
"""Decisions opened in the same two weeks (about ten bars, the usual horizon) share the
market's moves: one block of every outcome contrast (`memory/blocks.py`)."""


def episode_frame(cases: pl.DataFrame, registry: RoleRegistry) -> pl.DataFrame:
    """One row per case: text, outcome, quality, tags (list), policy, case and decision IDs."""
    if cases.height == 0:
        return pl.DataFrame(
            schema={
                "case_id": pl.String,
                "decision_id": pl.String,
                "text": pl.String,
                "outcome": pl.Float64,
                "quality": pl.Float64,
                "tags": pl.List(pl.String),
                "policy": pl.String,
            }
        )
    probes = {rid: r.policy.outcome_probe.kind for rid, r in registry.roles.items()}
    kind = pl.col("role_id").replace_strict(probes, default="forward_return")
    days = (pl.col("settled_at") - pl.col("opened_at")).dt.total_seconds() / 86_400.0
    noise = pl.col("vol") * days.clip(lower_bound=1.0 / 24.0).sqrt()
    probe = (
        pl.when(kind == "excess_return")
        .then(pl.coalesce("excess", "raw_return"))
        .otherwise(pl.col("raw_return"))
    )
    z = pl.when(kind == "risk_adjusted").then(pl.col("risk_adjusted")).otherwise(probe / noise)
    direction_only = pl.when(pl.col("hit") >= 0.5).then(0.5).otherwise(-0.5)
    outcome = (
        pl.when(z.is_finite())
        .then(z.tanh())
        .when(pl.col("hit").is_not_null())
        .then(direction_only)
        .otherwise(0.0)
    )
    lesson = pl.col("lesson")
    distinct = cases["lesson"].drop_nulls().unique().to_list()  # a few wordings, many cases
    gist = lesson.replace_strict({t: lesson_gist(t) for t in distinct}, default=None)
    key = lesson.replace_strict({t: lesson_key(t) for t in distinct}, default=None)
    summary = pl.format(
        "{} {} {}: {}",
        pl.col("role_id"),
        pl.col("direction"),
        pl.col("symbol"),
        pl.col("outcome_class"),
    )
    side = pl.when(pl.col("direction") == "short").then(-1.0).otherwise(1.0)
    against = (pl.col("signal").abs() >= MIN_SIGNAL) & (pl.col("signal") * side < 0)
    cases = cases.join(missing_kinds(cases, registry), on="case_id", how="left")
    tags = pl.concat_list(
        pl.format("class:{}", pl.col("outcome_class")),
        pl.format("direction:{}", pl.col("direction")),
        pl.when(against.fill_null(False)).then(pl.lit("against:signal")),
        pl.col("missing").fill_null(pl.lit([], dtype=pl.List(pl.String))),
        pl.format("symbol:{}", pl.col("symbol")),
        pl.when(pl.col("scenario").is_not_null()).then(pl.format("scenario:{}", "scenario")),
        pl.when(lesson.is_not_null()).then(pl.format("pattern:{}", key)),
        pl.format("block:{}", (pl.col("opened_at").dt.epoch("s") // BLOCK_SECONDS)),
    ).list.drop_nulls()
    return cases.select(
        "case_id",
        "decision_id",
        pl.coalesce(lesson, summary).alias("text"),
        outcome.clip(-1.0, 1.0).alias("outcome"),
        (pl.col("measured") / MEASURED_OF).clip(0.0, 1.0).alias("quality"),
        tags.alias("tags"),
        pl.col("policy"),
        gist.alias("gist"),
    )
