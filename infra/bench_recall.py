"""`reflexmem bench recall`: constrained recall over N role cases against a scan.

Builds a scratch ledger (SQLite file or PostgreSQL database, dropped afterwards) with N
role cases spread over roles, symbols, scenarios, states and outcome classes, plus the
decisions and executions they need, all with bulk loads (COPY / executemany, never the
ORM). It then times `reflexmem.recall.recall` for random (role, symbol, query) triples
and, in the same run, the same constrained query answered by a scan of role_cases that
no recall index can serve (`reflexmem.recall.fts.scan_query`).
"""

from __future__ import annotations

import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import sqlalchemy as sa

from infra.bench_support import scratch_engine
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.recall import RecallConstraints, query_terms, recall
from reflexmem.recall.fts import scan_query
from reflexmem.settings import Settings

ROLES = tuple(f"role_{i}" for i in range(8))
SYMBOLS = tuple(f"SYM{i:03d}" for i in range(200))
SCENARIOS = ("breakout", "earnings", "mean_reversion", "macro", "momentum", "gap")
VOCAB = 3000
START = datetime(2024, 1, 1, tzinfo=UTC)


def _words(rng: np.random.Generator, n: int, per: int) -> pl.Series:
    # Zipf-like: a few very common words, a long tail of rare ones.
    ranks = np.minimum(rng.zipf(1.3, size=n * per), VOCAB) - 1
    words = np.asarray([f"w{i}" for i in range(VOCAB)], dtype=object)
    frame = pl.DataFrame({"w": words[ranks].tolist(), "row": np.repeat(np.arange(n), per)})
    return frame.group_by("row", maintain_order=True).agg(pl.col("w").str.join(" "))["w"]


def case_frames(n: int, seed: int = 0) -> dict[str, pl.DataFrame]:
    """Decisions, executions and role cases for `n` cases (deterministic per seed)."""
    rng = np.random.default_rng(seed)
    ids = [f"c{i:08d}" for i in range(n)]
    role = np.asarray(ROLES, dtype=object)[rng.integers(0, len(ROLES), n)]
    symbol = np.asarray(SYMBOLS, dtype=object)[rng.integers(0, len(SYMBOLS), n)]
    scen_idx = rng.integers(0, len(SCENARIOS) + 1, n)
    scenario = [None if i == len(SCENARIOS) else SCENARIOS[i] for i in scen_idx.tolist()]
    decided = [START + timedelta(minutes=int(m)) for m in np.sort(rng.integers(0, 700 * 1440, n))]
    admitted = [d + timedelta(days=3) for d in decided]
    state = rng.choice(
        ["reflected", "eligible", "pending", "reflection_failed"], size=n, p=[0.6, 0.2, 0.1, 0.1]
    )
    klass = rng.choice(
        ["logic_error", "missing_data", "exogenous", "variance"], size=n, p=[0.4, 0.3, 0.15, 0.15]
    )
    reflected = state == "reflected"
    outcome = [k if r else None for k, r in zip(klass.tolist(), reflected.tolist(), strict=True)]
    learnable = reflected & np.isin(klass, ["logic_error", "missing_data"])
    lessons = _words(rng, n, 10)
    lesson = [
        s if ok else None for s, ok in zip(lessons.to_list(), learnable.tolist(), strict=True)
    ]
    text = _words(rng, n, 12)
    direction = rng.choice(["long", "short"], size=n).tolist()
    origin = rng.choice(["manual_agent", "manual_external"], size=n, p=[0.8, 0.2]).tolist()
    decisions = pl.DataFrame(
        {
            "decision_id": [f"d{i}" for i in ids],
            "agent_id": ["bench-agent"] * n,
            "role_id": role.tolist(),
            "account": ["acct"] * n,
            "market": ["us"] * n,
            "symbol": symbol.tolist(),
            "direction": direction,
            "decided_at": pl.Series(decided, dtype=pl.Datetime("us", "UTC")),
            "scenario": pl.Series(scenario, dtype=pl.String),
            "rationale": text,
        }
    )
    executions = pl.DataFrame(
        {
            "execution_id": [f"x{i}" for i in ids],
            "decision_id": [f"d{i}" for i in ids],
            "account": ["acct"] * n,
            "market": ["us"] * n,
            "symbol": symbol.tolist(),
            "direction": direction,
            "instrument": ["spot"] * n,
            "origin": origin,
            "origin_verified": [True] * n,
            "executed_at": pl.Series(decided, dtype=pl.Datetime("us", "UTC")),
        }
    )
    cases = pl.DataFrame(
        {
            "case_id": ids,
            "execution_id": [f"x{i}" for i in ids],
            "decision_id": [f"d{i}" for i in ids],
            "role_id": role.tolist(),
            "symbol": symbol.tolist(),
            "scenario": pl.Series(scenario, dtype=pl.String),
            "decision_text": text,
            "state": state.tolist(),
            "pending_reason": [("unsettled" if s == "pending" else None) for s in state.tolist()],
            "outcome_class": pl.Series(outcome, dtype=pl.String),
            "lesson": pl.Series(lesson, dtype=pl.String),
            "batch_id": ["bench"] * n,
            "decided_at": pl.Series(decided, dtype=pl.Datetime("us", "UTC")),
            "admitted_at": pl.Series(admitted, dtype=pl.Datetime("us", "UTC")),
        }
    )
    return {"trading_decisions": decisions, "trade_executions": executions, "role_cases": cases}


def load_cases(engine: sa.Engine, frames: dict[str, pl.DataFrame], chunk: int = 200_000) -> None:
    """Bulk-load the frames in dependency order, then refresh planner statistics."""
    for table in ("trading_decisions", "trade_executions", "role_cases"):
        frame = frames[table]
        for start in range(0, frame.height, chunk):
            with engine.begin() as conn:
                bulk_insert(conn, table, frame.slice(start, chunk))
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.exec_driver_sql("ANALYZE")
        else:
            conn.exec_driver_sql("INSERT INTO role_cases_fts(role_cases_fts) VALUES ('optimize')")
            conn.exec_driver_sql("ANALYZE")


def _queries(n: int, seed: int) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed + 17)
    out = []
    for _ in range(n):
        words = " ".join(f"w{int(w)}" for w in rng.integers(0, 300, size=3))
        out.append((str(rng.choice(ROLES)), str(rng.choice(SYMBOLS)), words))
    return out


def _pct(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values), q)), 3)


def run_bench(
    settings: Settings,
    *,
    cases: int,
    backend: str,
    queries: int = 300,
    scan_queries: int = 15,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """Build the store, time constrained recall and the scan; return the JSON summary."""
    with (
        tempfile.TemporaryDirectory(prefix="reflex-bench-recall-") as tmp,
        scratch_engine(settings, backend, Path(tmp)) as engine,
    ):
        t0 = time.perf_counter()
        frames = case_frames(cases, seed)
        t1 = time.perf_counter()
        load_cases(engine, frames)
        t2 = time.perf_counter()
        if progress:
            print(f"generated {cases} cases in {t1 - t0:.1f}s, loaded in {t2 - t1:.1f}s")
        plan = _queries(queries, seed)
        lat: list[float] = []
        hits = 0
        with engine.connect() as conn:
            for role, symbol, text in plan[:20]:  # warm caches
                recall(conn, RecallConstraints(role=role, symbol=symbol), text, k=5)
            for role, symbol, text in plan:
                s = time.perf_counter()
                res = recall(conn, RecallConstraints(role=role, symbol=symbol), text, k=5)
                lat.append((time.perf_counter() - s) * 1000.0)
                hits += len(res.hits)
            scan: list[float] = []
            for role, symbol, text in plan[:scan_queries]:
                c = RecallConstraints(role=role, symbol=symbol)
                stmt = scan_query(conn.dialect.name, c, query_terms(text), 50)
                s = time.perf_counter()
                conn.execute(stmt).all()
                scan.append((time.perf_counter() - s) * 1000.0)
        p50 = _pct(lat, 50)
        scan50 = _pct(scan, 50)
        return {
            "cases": cases,
            "backend": backend,
            "queries": queries,
            "k": 5,
            "constraint": "role + symbol (+ reflected, learnable, manual, not quarantined)",
            "p50_ms": p50,
            "p95_ms": _pct(lat, 95),
            "p99_ms": _pct(lat, 99),
            "mean_hits": round(hits / len(plan), 2),
            "scan_queries": len(scan),
            "scan_p50_ms": scan50,
            "speedup": round(scan50 / p50, 1) if p50 > 0 else None,
            "build_s": round(t2 - t0, 1),
        }
