"""What recall is measured against: the B-tree floor and the TradingAgents BM25 peer.

Floor: the very constrained query recall runs (`constraints.case_filters`, indexed, so
the ordinary B-tree indexes on role, state, symbol serve it) with no text index and the
cheapest naive ranking in SQL: the number of query terms found as whole words in the
lesson or decision text (`instr`/`strpos` on space-padded lower-cased text), newest
first among ties.

Peer: the per-role memory of TradingAgents' `FinancialSituationMemory` before it became
a decision log: `rank_bm25.BM25Okapi` over regex tokens (word characters, lower-cased) of each
case's situation (decision text) and recommendation (lesson), one index per role. It has
no symbol, eligibility or as-of constraint of its own; `post_filtered` applies them to
its ranking afterwards (the strongest reading of the peer), `raw` is its own top-k.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import sqlalchemy as sa

from reflexmem.recall import RecallConstraints, query_terms
from reflexmem.recall.constraints import CASE_COLUMNS, case_filters, case_joins, rc

_TOKEN = re.compile(r"\b\w+\b")


def floor_query(dialect: str, c: RecallConstraints, text: str, k: int) -> sa.Select[Any]:
    """The constrained B-tree query with term-overlap ranking and no text index."""
    blob = (
        sa.literal(" ")
        + sa.func.lower(sa.func.coalesce(rc.c.lesson, "") + " " + rc.c.decision_text)
        + sa.literal(" ")
    )
    find = sa.func.instr if dialect == "sqlite" else sa.func.strpos
    hits = [sa.case((find(blob, sa.literal(f" {t} ")) > 0, 1), else_=0) for t in query_terms(text)]
    score: sa.ColumnElement[Any] = sum(hits[1:], hits[0]) if hits else sa.literal(0)
    return (
        sa.select(*CASE_COLUMNS, score.label("overlap"))
        .select_from(case_joins(rc))
        .where(*case_filters(c))
        .order_by(sa.literal_column("overlap").desc(), rc.c.decided_at.desc(), rc.c.case_id)
        .limit(k)
    )


def tokens(text: str) -> list[str]:
    """TradingAgents' tokenizer: regex word tokens of the lower-cased text."""
    return _TOKEN.findall(text.lower())


class BM25Peer:
    """One BM25Okapi index per role over every case of the role (as the peer keeps it)."""

    def __init__(self, cases: pl.DataFrame, truth: pl.DataFrame, roles: Sequence[str]) -> None:
        from rank_bm25 import BM25Okapi

        frame = cases.join(truth.select("case_id", "eligible"), on="case_id").filter(
            pl.col("role_id").is_in(list(roles))
        )
        self.ids: dict[str, np.ndarray[Any, Any]] = {}
        self.symbol: dict[str, np.ndarray[Any, Any]] = {}
        self.eligible: dict[str, np.ndarray[Any, Any]] = {}
        self.index: dict[str, Any] = {}
        for (role,), part in frame.group_by("role_id"):
            docs = part.select(
                pl.concat_str(
                    [pl.col("decision_text"), pl.col("lesson").fill_null("")], separator=" "
                )
            ).to_series()
            self.index[str(role)] = BM25Okapi([tokens(d) for d in docs.to_list()])
            self.ids[str(role)] = part["case_id"].to_numpy()
            self.symbol[str(role)] = part["symbol"].to_numpy()
            self.eligible[str(role)] = part["eligible"].to_numpy()

    def query(
        self, role: str, symbol: str, text: str, k: int, *, post_filtered: bool = True
    ) -> list[str]:
        """The peer's top-k case ids for `text` in `role` (constraints applied after)."""
        scores = np.asarray(self.index[role].get_scores(tokens(text)), dtype=np.float64)
        if post_filtered:
            keep = (self.symbol[role] == symbol) & self.eligible[role]
            scores = np.where(keep, scores, -np.inf)
        top = np.argsort(-scores, kind="stable")[:k]
        return [str(self.ids[role][i]) for i in top if np.isfinite(scores[i])]

    def violations(self, role: str, symbol: str, ids: Sequence[str]) -> tuple[int, int]:
        """Of `ids`, how many have the wrong symbol, how many recall must refuse."""
        pos = {c: i for i, c in enumerate(self.ids[role].tolist())}
        rows = [pos[c] for c in ids]
        wrong = int(np.sum(self.symbol[role][rows] != symbol))
        refused = int(np.sum(~self.eligible[role][rows]))
        return wrong, refused
