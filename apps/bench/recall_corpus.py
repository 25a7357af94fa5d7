"""The synthetic recall corpus and its labelled relevance set, from one generator.

Every case has a ground-truth failure mode (`MODES` of them), drawn by the generator
before any text exists. A learnable case's lesson is three of its mode's six words plus
Zipf noise; its decision text carries two of them among noise words. A query asks for
one mode (three of its words) under one role and symbol; the cases relevant to it are
those that truly share its role, symbol and failure mode and that recall may return
(reflected, learnable, manual): labels come from the generator's arrays, never from
recall's output. Queries are anchored on an eligible case, so each has at least one
relevant case. A different `seed` gives a different corpus and query set (the
validation set for any tuning is drawn with another seed than the reported one).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import polars as pl

ROLES = tuple(f"role_{i}" for i in range(8))
SYMBOLS = tuple(f"SYM{i:03d}" for i in range(200))
SCENARIOS = ("breakout", "earnings", "mean_reversion", "macro", "momentum", "gap")
VOCAB = 3000
MODES = 12
MODE_WORDS = 6
MODE_STRIDE = 3
MODE_BASE = 300
"""Mode m's words are w{MODE_BASE + m * MODE_STRIDE + j}, j < MODE_WORDS: adjacent modes
share half their words, and the words are also mid-frequency Zipf noise, so a query's
words also hit cases of other failure modes (ranking is not trivially exact)."""
START = datetime(2024, 1, 1, tzinfo=UTC)
LEARNABLE = ("logic_error", "missing_data")


@dataclass(frozen=True, slots=True)
class Query:
    """One recall query and the ids of the cases truly relevant to it."""

    role: str
    symbol: str
    text: str
    mode: int
    relevant: frozenset[str]


def _text(rng: np.random.Generator, mode: np.ndarray, signal: int, noise: int) -> pl.Series:
    """Per row: `signal` distinct words of the row's mode, then `noise` Zipf words."""
    n = mode.size
    pick = np.argsort(rng.random((n, MODE_WORDS)), axis=1)[:, :signal]
    ids = np.concatenate(
        [
            MODE_BASE + mode[:, None] * MODE_STRIDE + pick,
            np.minimum(rng.zipf(1.3, size=(n, noise)), VOCAB) - 1,
        ],
        axis=1,
    )
    cols = [pl.Series(f"c{j}", ids[:, j]).cast(pl.String) for j in range(ids.shape[1])]
    frame = pl.DataFrame(cols)
    return frame.select(
        pl.concat_str([pl.lit("w") + pl.col(c.name) for c in cols], separator=" ").alias("t")
    )["t"]


def case_frames(n: int, seed: int = 0) -> dict[str, pl.DataFrame]:
    """Decisions, executions and role cases (with a `truth` frame of labels)."""
    rng = np.random.default_rng(seed)
    idx = np.arange(n)
    ids = pl.Series("case_id", idx).cast(pl.String).str.zfill(8)
    ids = pl.select(pl.lit("c") + ids).to_series()
    role = np.asarray(ROLES)[rng.integers(0, len(ROLES), n)]
    symbol = np.asarray(SYMBOLS)[rng.integers(0, len(SYMBOLS), n)]
    scen_idx = rng.integers(0, len(SCENARIOS) + 1, n)
    scen = np.asarray([*SCENARIOS, None], dtype=object)[scen_idx].tolist()
    minutes = np.sort(rng.integers(0, 700 * 1440, n)).astype("timedelta64[m]")
    decided = np.datetime64("2024-01-01T00:00") + minutes
    admitted = decided + np.timedelta64(3, "D")
    state = rng.choice(
        ["reflected", "eligible", "pending", "reflection_failed"], size=n, p=[0.6, 0.2, 0.1, 0.1]
    )
    klass = rng.choice(
        ["logic_error", "missing_data", "exogenous", "variance"], size=n, p=[0.4, 0.3, 0.15, 0.15]
    )
    mode = rng.integers(0, MODES, n)
    reflected = state == "reflected"
    learnable = reflected & np.isin(klass, LEARNABLE)
    lesson = _text(rng, mode, 3, 7)
    text = _text(rng, mode, 2, 10)
    direction = rng.choice(["long", "short"], size=n)
    origin = rng.choice(["manual_agent", "manual_external"], size=n, p=[0.8, 0.2])
    ts = pl.Datetime("us", "UTC")
    dec_s = pl.Series(decided.astype("datetime64[us]")).dt.replace_time_zone("UTC").cast(ts)
    adm_s = pl.Series(admitted.astype("datetime64[us]")).dt.replace_time_zone("UTC").cast(ts)
    did = pl.select(pl.lit("d") + ids).to_series()
    xid = pl.select(pl.lit("x") + ids).to_series()
    const = {"account": pl.lit("acct"), "market": pl.lit("us")}
    base = pl.DataFrame({"id": ids}).with_columns(**const)
    decisions = base.select(
        did.alias("decision_id"),
        pl.lit("bench-agent").alias("agent_id"),
        pl.Series("role_id", role, dtype=pl.String),
        "account",
        "market",
        pl.Series("symbol", symbol, dtype=pl.String),
        pl.Series("direction", direction, dtype=pl.String),
        dec_s.alias("decided_at"),
        pl.Series("scenario", scen, dtype=pl.String),
        text.alias("rationale"),
    )
    executions = base.select(
        xid.alias("execution_id"),
        did.alias("decision_id"),
        "account",
        "market",
        pl.Series("symbol", symbol, dtype=pl.String),
        pl.Series("direction", direction, dtype=pl.String),
        pl.lit("spot").alias("instrument"),
        pl.Series("origin", origin, dtype=pl.String),
        pl.lit(True).alias("origin_verified"),
        dec_s.alias("executed_at"),
    )
    st = pl.Series("state", state, dtype=pl.String)
    cases = base.select(
        ids.alias("case_id"),
        xid.alias("execution_id"),
        did.alias("decision_id"),
        pl.Series("role_id", role, dtype=pl.String),
        pl.Series("symbol", symbol, dtype=pl.String),
        pl.Series("scenario", scen, dtype=pl.String),
        text.alias("decision_text"),
        st,
        pl.when(st == "pending").then(pl.lit("unsettled")).alias("pending_reason"),
        pl.when(pl.Series(reflected)).then(pl.Series(klass)).alias("outcome_class"),
        pl.when(pl.Series(learnable)).then(lesson).alias("lesson"),
        pl.lit("bench").alias("batch_id"),
        dec_s.alias("decided_at"),
        adm_s.alias("admitted_at"),
    )
    truth = pl.DataFrame(
        {
            "case_id": ids,
            "role_id": pl.Series(role, dtype=pl.String),
            "symbol": pl.Series(symbol, dtype=pl.String),
            "mode": mode,
            "eligible": learnable,
        }
    )
    return {
        "trading_decisions": decisions,
        "trade_executions": executions,
        "role_cases": cases,
        "truth": truth,
    }


def relevance_set(truth: pl.DataFrame, queries: int, seed: int) -> list[Query]:
    """`queries` queries anchored on random eligible cases, with their relevant ids."""
    rng = np.random.default_rng(seed + 17)
    eligible = truth.filter(pl.col("eligible"))
    if eligible.height == 0:
        return []
    anchors = eligible[rng.integers(0, eligible.height, queries).tolist()]
    groups = (
        eligible.join(
            anchors.select("role_id", "symbol", "mode").unique(), on=["role_id", "symbol", "mode"]
        )
        .group_by("role_id", "symbol", "mode")
        .agg(pl.col("case_id"))
    )
    rel = {(r, s, int(m)): frozenset(ids) for r, s, m, ids in groups.iter_rows()}
    words = np.argsort(rng.random((anchors.height, MODE_WORDS)), axis=1)[:, :3]
    out = []
    for i, (r, s, m) in enumerate(anchors.select("role_id", "symbol", "mode").iter_rows()):
        text = " ".join(f"w{MODE_BASE + int(m) * MODE_STRIDE + int(j)}" for j in words[i])
        out.append(Query(role=r, symbol=s, text=text, mode=int(m), relevant=rel[(r, s, int(m))]))
    return out
