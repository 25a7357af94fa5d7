"""Reflection inputs read from the ledger: one role's offerable cases, as ReflectionInputs.

Split out of `reflexmem.reflection.batch` because building the inputs is a step of its
own, with its own rules: which cases are offered (the case, its decision's evidence and
the decision's *primary* evaluation run only; deferred cases first, so the budget delays
them, never drops them), how the ledger's factors map onto a `ReflectionInput`, and why a
row that cannot be judged honestly becomes a failed `Reflection` instead of a guess. The
batch itself (lock, budget, reflector call, writes) stays in `batch`.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk_read import read_frame
from reflexmem.ledger.enums import Direction
from reflexmem.ledger.sqlio import parse_utc
from reflexmem.reflection.types import Reflection, ReflectionInput, parse_evidence
from reflexmem.registry import RoleRegistry

FACTORS = ("raw_return", "benchmark_return", "realized_vol", "benchmark_shock_sigma", "signal")
SHOCK_EVIDENCE = "macro_calendar"
"""A scheduled-event calendar in the evidence makes a market shock knowable in advance."""

_INPUT_SQL = """
SELECT rc.case_id, rc.decision_id, rc.role_id, rc.symbol, rc.state,
       d.direction, d.decided_at, CAST(d.evidence AS TEXT) AS evidence, r.run_id,
       MAX(CASE WHEN c.name = 'raw_return' AND NOT c.missing THEN c.value END) AS raw_return,
       MAX(CASE WHEN c.name = 'benchmark_return' AND NOT c.missing THEN c.value END)
           AS benchmark_return,
       MAX(CASE WHEN c.name = 'realized_vol' AND NOT c.missing THEN c.value END) AS realized_vol,
       MAX(CASE WHEN c.name = 'benchmark_shock_sigma' AND NOT c.missing THEN c.value END)
           AS benchmark_shock_sigma,
       MAX(CASE WHEN c.name = 'signal_at_decision' AND NOT c.missing THEN c.value END) AS signal
FROM role_cases rc
JOIN trading_decisions d ON d.decision_id = rc.decision_id
JOIN evaluation_runs r ON r.decision_id = rc.decision_id AND r.profile = '{profile}'
     AND r.is_primary
JOIN evaluation_components c ON c.run_id = r.run_id
WHERE rc.role_id = '{role}'
  AND (rc.state = 'eligible' OR (rc.state = 'pending' AND rc.pending_reason = 'budget_deferred'))
GROUP BY rc.case_id, rc.decision_id, rc.role_id, rc.symbol, rc.state,
         d.direction, d.decided_at, CAST(d.evidence AS TEXT), r.run_id
ORDER BY CASE WHEN rc.state = 'pending' THEN 0 ELSE 1 END, d.decided_at, rc.case_id
LIMIT {limit}
"""


def load_inputs(conn: sa.Connection, role_id: str, *, profile: str, limit: int) -> pl.DataFrame:
    """Offerable cases of one role with their decision and primary-run factors."""
    if not role_id.replace("_", "").isalnum() or "'" in profile:
        raise ValueError(f"invalid role {role_id!r} or profile {profile!r}")
    raw = read_frame(conn, _INPUT_SQL.format(profile=profile, role=role_id, limit=int(limit)))
    return raw.with_columns(
        parse_utc(pl.col("decided_at")).alias("decided_at"),
        *[pl.col(c).cast(pl.Float64) for c in FACTORS],
    )


def _utc_evidence(text: str | None) -> list[dict[str, Any]] | None:
    """Decode a decision's evidence list; a naive `as_of` is UTC, the ledger's convention.

    The ledger stores every instant in UTC and writers such as the synthetic stream emit
    naive ISO stamps in that convention; reading them as UTC is the ledger's own rule,
    not a guess. Anything else malformed still fails the case.
    """
    if not text:
        return None
    raw = json.loads(text)
    if not isinstance(raw, list):
        raise ValueError("evidence is not a JSON list")
    out: list[dict[str, Any]] = []
    for item in raw:
        if isinstance(item, dict) and isinstance(item.get("as_of"), str):
            stamp = datetime.fromisoformat(item["as_of"])
            if stamp.tzinfo is None:
                item = {**item, "as_of": stamp.replace(tzinfo=UTC).isoformat()}
        out.append(item)
    return out


def build_inputs(
    frame: pl.DataFrame, registry: RoleRegistry
) -> tuple[list[ReflectionInput], list[Reflection]]:
    """ReflectionInputs for every well-formed row; a failed Reflection for every other one.

    A case whose primary run has no raw return, or whose evidence cannot be parsed,
    cannot be judged honestly, so it fails with the reason instead of being guessed at.
    """
    inputs: list[ReflectionInput] = []
    failures: list[Reflection] = []
    cols = [frame[c].to_list() for c in ("case_id", "role_id", "direction", "decided_at")]
    evidence = frame["evidence"].to_list()
    factors = {c: frame[c].to_numpy() for c in FACTORS}
    for i, (case_id, role_id, direction, decided_at) in enumerate(zip(*cols, strict=True)):
        try:
            raw = factors["raw_return"][i]
            if not np.isfinite(raw):
                raise ValueError("primary evaluation run has no raw_return")
            items = parse_evidence(_utc_evidence(evidence[i]))
            side = Direction(direction)
            sign = 1.0 if side is Direction.LONG else -1.0
            values = {c: float(factors[c][i]) for c in FACTORS[1:]}
            clean = {k: (v if np.isfinite(v) else None) for k, v in values.items()}
            inputs.append(
                ReflectionInput(
                    case_id=case_id,
                    role=registry.get(role_id).policy,
                    direction=side,
                    decided_at=decided_at,
                    evidence=items,
                    realized_return=sign * float(raw),
                    benchmark_return=clean["benchmark_return"],
                    realized_vol=clean["realized_vol"],
                    market_shock_sigma=clean["benchmark_shock_sigma"],
                    shock_observable=any(
                        e.kind == SHOCK_EVIDENCE and e.as_of <= decided_at for e in items
                    ),
                    signal=clean["signal"],
                )
            )
        except (ValueError, TypeError, KeyError) as exc:
            failures.append(
                Reflection(
                    case_id=case_id,
                    outcome_class=None,
                    lesson=None,
                    evidence_used=(),
                    reasons=("input could not be built from the ledger",),
                    layer="L0",
                    failed=True,
                    error=f"{type(exc).__name__}: {exc}",
                )
            )
    return inputs, failures
