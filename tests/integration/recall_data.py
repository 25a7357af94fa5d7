"""Recall test cases written straight into the ledger, and their reference eligibility rule.

Shared by `test_recall_db.py` (constraints, as-of, query safety) and
`test_recall_ranking_db.py` (full text, embeddings, tiers).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import bulk_insert
from reflexmem.recall import RecallConstraints

T0 = datetime(2025, 1, 1, tzinfo=UTC)
ROLES = ("r1", "r2", "r3")
SYMBOLS = ("AAA", "BBB", "CCC")
SCENARIOS = (None, "breakout", "earnings")
WORDS = ("momentum", "earnings", "gap", "volume", "macro", "rates", "guidance", "squeeze")


@dataclass(frozen=True)
class Case:
    case_id: str
    role: str
    symbol: str
    scenario: str | None
    state: str
    outcome_class: str | None
    lesson: str | None
    text: str
    origin: str = "manual_agent"
    verified: bool = True
    quarantined: bool = False
    decided: int = 0  # hours after T0
    admitted: int = 1
    reflected: int = 2
    matured: int | None = None  # valid time of the outcome; None: not stamped

    def eligible(self, c: RecallConstraints) -> bool:
        ok = (
            self.role == c.role
            and self.state == "reflected"
            and self.outcome_class in ("logic_error", "missing_data")
            and bool((self.lesson or "").strip())
            and (
                self.origin == "manual_agent"
                or (self.origin == "manual_external" and self.verified)
            )
            and not self.quarantined
            and (c.symbol is None or self.symbol == c.symbol)
            and (c.scenario is None or self.scenario == c.scenario)
        )

        def by(hours: tuple[int, ...], limit: datetime | None) -> bool:
            return limit is None or all(T0 + timedelta(hours=h) <= limit for h in hours)

        valid = self.reflected if self.matured is None else self.matured
        return (
            ok
            and by((self.decided, valid), c.as_of)
            and by((self.admitted, self.reflected), c.known_at)
        )


def _ts(hours: list[int]) -> pl.Series:
    return pl.Series([T0 + timedelta(hours=h) for h in hours], dtype=pl.Datetime("us", "UTC"))


def insert_cases(engine: sa.Engine, cases: list[Case]) -> None:
    n = len(cases)
    ids = [c.case_id for c in cases]
    with engine.begin() as conn:
        bulk_insert(
            conn,
            "trading_decisions",
            pl.DataFrame(
                {
                    "decision_id": [f"d-{i}" for i in ids],
                    "agent_id": ["a"] * n,
                    "role_id": [c.role for c in cases],
                    "account": ["acct"] * n,
                    "market": ["us"] * n,
                    "symbol": [c.symbol for c in cases],
                    "direction": ["long"] * n,
                    "decided_at": _ts([c.decided for c in cases]),
                    "scenario": pl.Series([c.scenario for c in cases], dtype=pl.String),
                    "rationale": [c.text for c in cases],
                }
            ),
        )
        bulk_insert(
            conn,
            "trade_executions",
            pl.DataFrame(
                {
                    "execution_id": [f"x-{i}" for i in ids],
                    "decision_id": [f"d-{i}" for i in ids],
                    "account": ["acct"] * n,
                    "market": ["us"] * n,
                    "symbol": [c.symbol for c in cases],
                    "direction": ["long"] * n,
                    "instrument": ["spot"] * n,
                    "origin": [c.origin for c in cases],
                    "origin_verified": [c.verified for c in cases],
                    "executed_at": _ts([c.decided for c in cases]),
                }
            ),
        )
        bulk_insert(
            conn,
            "role_cases",
            pl.DataFrame(
                {
                    "case_id": ids,
                    "execution_id": [f"x-{i}" for i in ids],
                    "decision_id": [f"d-{i}" for i in ids],
                    "role_id": [c.role for c in cases],
                    "symbol": [c.symbol for c in cases],
                    "scenario": pl.Series([c.scenario for c in cases], dtype=pl.String),
                    "decision_text": [c.text for c in cases],
                    "state": [c.state for c in cases],
                    "pending_reason": pl.Series(
                        ["unsettled" if c.state == "pending" else None for c in cases],
                        dtype=pl.String,
                    ),
                    "outcome_class": pl.Series([c.outcome_class for c in cases], dtype=pl.String),
                    "lesson": pl.Series([c.lesson for c in cases], dtype=pl.String),
                    "batch_id": ["b"] * n,
                    "decided_at": _ts([c.decided for c in cases]),
                    "admitted_at": _ts([c.admitted for c in cases]),
                    "matured_at": pl.Series(
                        [
                            None if c.matured is None else T0 + timedelta(hours=c.matured)
                            for c in cases
                        ],
                        dtype=pl.Datetime("us", "UTC"),
                    ),
                }
            ),
        )
        quarantined = [c for c in cases if c.quarantined]
        if quarantined:
            bulk_insert(
                conn,
                "quarantine",
                pl.DataFrame(
                    {
                        "subject_kind": ["execution"] * len(quarantined),
                        "subject_id": [f"x-{c.case_id}" for c in quarantined],
                        "decision_id": [f"d-{c.case_id}" for c in quarantined],
                        "reason_code": ["automated_origin"] * len(quarantined),
                        "failed_expectations": ["test"] * len(quarantined),
                        "detail": ["test"] * len(quarantined),
                        "created_at": _ts([0] * len(quarantined)),
                    }
                ),
            )
        for c in cases:
            if c.state == "reflected":
                conn.execute(
                    sa.text("UPDATE case_reflections SET reflected_at = :t WHERE case_id = :c"),
                    {"t": T0 + timedelta(hours=c.reflected), "c": c.case_id},
                )


def clear(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        for t in (
            "case_embeddings",
            "case_reflections",
            "quarantine",
            "role_cases",
            "trade_executions",
            "trading_decisions",
            "memory_sources",
            "memory_entries",
            "memory_namespaces",
            "memory_windows",
        ):
            conn.execute(sa.text(f"DELETE FROM {t}"))


def good(i: int, **kw: Any) -> Case:
    base: dict[str, Any] = {
        "case_id": f"c{i}",
        "role": "r1",
        "symbol": "AAA",
        "scenario": None,
        "state": "reflected",
        "outcome_class": "logic_error",
        "lesson": f"lesson {i} about earnings guidance",
        "text": f"bought on momentum {i}",
    }
    base.update(kw)
    return Case(**base)
