"""Pre-decision checks: every usable trading skill judges every new decision of its role.

A generated trading skill is one check (a lesson of its role); a decision proceeds
unless a check holds it or requests what it lacks. Each (decision, skill) pair is one
task of family `trade_decision`, routed exactly as `router.route` routes it against a
snapshot holding that skill's versions: the limited version decides the account and
symbol pairs inside its sticky rollout, the active version the rest; the input contract,
the trigger (the skill's role), the validity period, the rejection conditions and the
confidence floor apply; a verdict option becomes a `hold` or a `request` episode; an
answer the skill cannot give escalates and, with no model configured, ends as an L3
`hold` (`no_model`); a decision lacking a field the contract requires is a `request`
naming it (the observation builder types every field, so only presence can fail). A
test checks this against `route` decision by decision.

Done for a whole window of decisions at once, in polars: one `decide_frame` per skill
version over its rows, and the episode rows built as columns, so the cost is a few
vectorised passes however many decisions arrive. Decisions are checked once: the
caller passes the window after the previous run's clock.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import polars as pl

from reflexmem.ledger.reflex_enums import EpisodeStatus, Layer, SkillState
from reflexmem.reflex.conditions import ROW, compile_all
from reflexmem.reflex.procedures import decide_frame
from reflexmem.reflex.rollout import rollout_buckets
from reflexmem.reflex.snapshot import PinnedSkill, SkillSnapshot
from reflexmem.reflex.trading import (
    TRADE_ENVIRONMENT,
    TRADE_FAMILY,
    observation_json,
    text_frame,
)
from reflexmem.registry import RoleRegistry

AGENT = "reflex-check"
GOAL = "check the decision against its role's learned checks before it proceeds"
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NO_COST = '{"tool":0.0,"model":0.0,"model_tokens":0.0}'


def deciders(snapshot: SkillSnapshot) -> dict[str, list[PinnedSkill]]:
    """Usable versions of trading skills made for this environment, by skill ID."""
    out: dict[str, list[PinnedSkill]] = {}
    for skill in snapshot.usable(TRADE_FAMILY):
        if skill.spec.environment_version == TRADE_ENVIRONMENT:
            out.setdefault(skill.spec.skill_id, []).append(skill)
    return {k: sorted(v, key=lambda s: s.spec.version) for k, v in sorted(out.items())}


def _assign(versions: Sequence[PinnedSkill], text: pl.DataFrame) -> pl.Series:
    """Index (into `versions`) of the version deciding each row, as the router picks it."""
    pick = pl.Series("pick", [None] * text.height, dtype=pl.Int64)
    for i, skill in enumerate(versions):
        if skill.state == SkillState.LIMITED:
            bucket = rollout_buckets(text, skill.key)
            inside = (bucket < (skill.rollout_fraction or 0.0)).fill_null(False)
            pick = pl.select(pl.when(inside).then(pl.lit(i)).otherwise(pick)).to_series()
    for i, skill in enumerate(versions):
        if skill.state == SkillState.ACTIVE:
            pick = pl.select(pl.coalesce(pick, pl.lit(i))).to_series()
    return pick


def _period(skill: PinnedSkill) -> pl.Expr:
    start, end = skill.spec.valid_period()
    stamp = pl.col("decided_at")
    ok = pl.lit(True)
    if start is not None:
        ok = ok & (stamp >= pl.lit(start.isoformat()))
    if end is not None:
        ok = ok & (stamp < pl.lit(end.isoformat()))
    return ok


def _note(template: str) -> pl.Expr:
    names = _PLACEHOLDER.findall(template)
    fmt = _PLACEHOLDER.sub("{}", template)
    return pl.format(fmt, *[pl.col(n).fill_null("") for n in names]) if names else pl.lit(fmt)


def _step(layer: pl.Expr, skill: pl.Expr, outcome: pl.Expr, reason: pl.Expr, choice: pl.Expr,
          confidence: pl.Expr) -> pl.Expr:  # fmt: skip
    return pl.struct(
        layer.alias("layer"),
        skill.alias("skill"),
        outcome.alias("outcome"),
        reason.alias("reason"),
        choice.alias("choice"),
        confidence.alias("confidence"),
    ).struct.json_encode()


def _rows(skill: PinnedSkill, decided: pl.DataFrame) -> pl.DataFrame:
    """Episode columns for the rows one version judged (`decided`: text + decision)."""
    spec = skill.spec
    floor = spec.confidence_floor
    choice, conf, refused = pl.col("choice"), pl.col("confidence"), pl.col("refused")
    confident = ~refused & choice.is_not_null() & (conf >= floor)
    why = (
        pl.when(refused)
        .then(pl.lit("a rejection condition holds"))
        .when(choice.is_null())
        .then(pl.lit("no answer for this input"))
        .otherwise(pl.format("confidence {} below floor {}", conf.round(2), pl.lit(floor)))
    )
    status = pl.lit(EpisodeStatus.SUCCESS.value)
    reason = pl.lit(None, dtype=pl.String)
    note = pl.lit("")
    missing = pl.lit(None, dtype=pl.String)
    for option, verdict in spec.verdicts.items():
        hit = choice == option
        status = pl.when(hit).then(pl.lit(str(verdict["status"]))).otherwise(status)
        reason = pl.when(hit).then(pl.lit(str(verdict["reason"]))).otherwise(reason)
        note = pl.when(hit).then(pl.lit(": ") + _note(str(verdict.get("note", "")))).otherwise(note)
        wanted = ",".join(f'"{m}"' for m in verdict.get("missing", ()))
        missing = pl.when(hit & pl.lit(bool(wanted))).then(pl.lit(f"[{wanted}]")).otherwise(missing)
    layer = pl.lit(str(spec.layer))
    key = pl.lit(skill.key)
    decided_step = _step(layer, key, pl.lit("decided"), pl.lit("confident"), choice, conf)
    up_step = _step(layer, key, pl.lit("escalated"), why, choice, conf)
    hold_step = _step(
        pl.lit(str(Layer.L3)),
        pl.lit(None, dtype=pl.String),
        pl.lit("hold"),
        pl.lit("no skill decided; no model is configured"),
        pl.lit(None, dtype=pl.String),
        pl.lit(None, dtype=pl.Float64),
    )
    result = (
        pl.when(missing.is_not_null())
        .then(
            pl.concat_str(
                [pl.lit('{"choice":"'), choice, pl.lit('","missing":'), missing, pl.lit("}")]
            )
        )
        .otherwise(pl.concat_str([pl.lit('{"choice":"'), choice, pl.lit('"}')]))
    )
    rationale = pl.format("{} chose {} with confidence {}", key, choice, conf.round(2))
    lacking = pl.col("absent").is_not_null()
    asked = pl.concat_str(
        [pl.lit('[{"layer":"L0","skill":null,"outcome":"request","reason":"missing fields '),
         pl.col("absent").str.replace_all('"', "'"), pl.lit('","choice":null,"confidence":null}]')]
    )  # fmt: skip

    def pick(request: pl.Expr, yes: pl.Expr, no: pl.Expr) -> pl.Expr:
        return pl.when(lacking).then(request).when(confident).then(yes).otherwise(no)

    none = pl.lit(None, dtype=pl.String)
    return decided.select(
        pl.col("episode_id"),
        pl.col("decision_id"),
        pl.col("observation"),
        pl.col("decided_at_ts"),
        pick(none, layer, pl.lit(str(Layer.L3))).alias("layer"),
        pick(none, pl.lit(spec.skill_id), none).alias("skill_id"),
        pick(
            pl.lit(None, dtype=pl.Int64), pl.lit(spec.version), pl.lit(None, dtype=pl.Int64)
        ).alias("skill_version"),
        pick(pl.lit(None, dtype=pl.Float64), conf, pl.lit(None, dtype=pl.Float64)).alias(
            "confidence"
        ),
        pick(
            pl.concat_str([pl.lit("the input lacks required fields "), pl.col("absent")]),
            pl.concat_str([rationale, note]),
            pl.lit("no skill decided; no model is configured, so nothing is decided"),
        ).alias("rationale"),
        pick(
            asked,
            pl.concat_str([pl.lit("["), decided_step, pl.lit("]")]),
            pl.concat_str([pl.lit("["), up_step, pl.lit(","), hold_step, pl.lit("]")]),
        ).alias("escalations"),
        pick(
            pl.concat_str([pl.lit('{"choice":null,"missing":'), pl.col("absent"), pl.lit("}")]),
            result,
            pl.lit('{"choice":null}'),
        ).alias("result"),
        pick(pl.lit("request"), status, pl.lit("hold")).alias("status"),
        pick(pl.lit("missing_information"), reason, pl.lit("no_model")).alias("status_reason"),
        pl.lit(skill.key).alias("checked"),
    )


def _absent(spec_required: list[str], frame: pl.DataFrame) -> pl.Expr:
    """JSON list of the input contract's required fields a row lacks (null: none)."""
    flags = [
        pl.when(pl.col(f).is_null()).then(pl.lit(f'"{f}"'))
        if f in frame.columns
        else pl.lit(f'"{f}"')
        for f in spec_required
    ]
    if not flags:
        return pl.lit(None, dtype=pl.String)
    joined = pl.concat_str(flags, separator=",", ignore_nulls=True)
    return pl.when(joined != "").then(pl.concat_str([pl.lit("["), joined, pl.lit("]")]))


def check_frame(
    snapshot: SkillSnapshot, decisions: pl.DataFrame, registry: RoleRegistry
) -> pl.DataFrame:
    """One episode row per (decision, usable trading skill whose trigger covers it).

    `decisions` are observations (`trading.read_decisions`); the rows are what the
    `episodes` table takes (see `episode_columns`), plus `checked` (the version asked).
    """
    text = text_frame(decisions, registry)
    base = text.with_columns(
        decisions["decision_id"].alias("decision_id"),
        observation_json(decisions, registry).alias("observation"),
        decisions["decided_at"].alias("decided_at_ts"),
    )
    parts: list[pl.DataFrame] = []
    for versions in deciders(snapshot).values():
        pick = _assign(versions, base)
        for i, skill in enumerate(versions):
            scope = compile_all(skill.spec.trigger) & _period(skill)
            mine = base.filter((pick == i).fill_null(False)).filter(scope)
            if mine.height == 0:
                continue
            decided = decide_frame(skill.spec, mine.drop("decision_id", "observation"))
            required = [str(f) for f in skill.spec.input_contract.get("required", [])]
            joined = mine.join(decided, on=ROW, how="left", maintain_order="left").with_columns(
                _absent(required, mine).alias("absent")
            )
            parts.append(_rows(skill, joined.with_columns(check_ids(joined, skill.spec.skill_id))))
    rows = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema=_EMPTY)
    return episode_columns(rows).with_columns(rows["checked"])


def check_ids(frame: pl.DataFrame, skill_id: str) -> pl.Series:
    """`chk-<decision>-<skill>`; a stable 64-bit hash of the pair when that is too long."""
    plain = frame.select(
        pl.concat_str([pl.lit("chk-"), pl.col("decision_id"), pl.lit(f"-{skill_id}")])
    ).to_series()
    keyed = frame.select(pl.col("decision_id"), pl.lit(skill_id).alias("_skill"))
    bucket = rollout_buckets(keyed, "check-id", account="decision_id", symbol="_skill")
    hashed = pl.select(
        pl.concat_str(
            [
                pl.lit(f"chk-{skill_id[:40]}-"),
                pl.lit(bucket * float(1 << 53)).cast(pl.Int64).cast(pl.String),
            ]
        )
    ).to_series()
    return pl.select(
        pl.when(plain.str.len_chars() <= 64).then(plain).otherwise(hashed).alias("episode_id")
    ).to_series()


_EMPTY: dict[str, Any] = {
    "episode_id": pl.String,
    "decision_id": pl.String,
    "observation": pl.String,
    "decided_at_ts": pl.Datetime("us", "UTC"),
    "layer": pl.String,
    "skill_id": pl.String,
    "skill_version": pl.Int64,
    "confidence": pl.Float64,
    "rationale": pl.String,
    "escalations": pl.String,
    "result": pl.String,
    "status": pl.String,
    "status_reason": pl.String,
    "checked": pl.String,
}


def episode_columns(rows: pl.DataFrame) -> pl.DataFrame:
    """The check rows as `episodes` columns (the experience contract, no tool call)."""
    return rows.select(
        pl.col("episode_id"),
        pl.lit(AGENT).alias("agent_id"),
        pl.col("decision_id").alias("root_id"),
        pl.col("decision_id"),
        pl.lit(TRADE_FAMILY).alias("task_family"),
        pl.col("layer"),
        pl.col("decided_at_ts").alias("recorded_at"),
        pl.lit(GOAL).alias("goal"),
        pl.col("observation"),
        pl.concat_str([pl.lit("trading_decisions/"), pl.col("decision_id")]).alias("source_ref"),
        pl.lit(TRADE_ENVIRONMENT).alias("environment_version"),
        pl.col("skill_id"),
        pl.col("skill_version").cast(pl.Int64),
        pl.col("rationale"),
        pl.col("confidence").cast(pl.Float64),
        pl.col("escalations"),
        pl.col("result"),
        pl.col("status"),
        pl.when(pl.col("status") == "success")
        .then(pl.lit(None, dtype=pl.String))
        .otherwise(pl.col("status_reason"))
        .alias("status_reason"),
        pl.lit(0.0).alias("cost"),
        pl.lit(_NO_COST).alias("cost_detail"),
        pl.lit(0.0).alias("latency_ms"),
        pl.lit(0, dtype=pl.Int64).alias("retries"),
    )
