"""`reflexmem bench recall`: constrained recall against a B-tree floor and a BM25 peer.

Builds a scratch ledger (SQLite file or PostgreSQL database, dropped afterwards) with N
role cases from `bench_recall_corpus` (bulk loads, never the ORM), whose generator also
labels, for each query, the cases that truly share its role, symbol and failure mode.
Then, over the same queries, it measures (`measure`: latency, CPU and relevance of any
`query(q) -> case ids` callable, so a transport such as HTTP can be swapped in):

- recall: `reflexmem.recall.recall`;
- the floor: the same constrained query on the B-tree indexes, no text index, ranked
  by term overlap in SQL (`bench_recall_rivals.floor_query`);
- the peer: TradingAgents' per-role BM25 memory, post-filtered to the constraints
  (`bench_recall_rivals.BM25Peer`), on the queries of `peer_roles` roles only (its
  index is in-process Python, built per role; one role bounds its memory at 1e6).

Relevance: recall@5 = relevant ids in the top 5 / min(5, relevant), nDCG@5 with binary
gains, both averaged over queries. Recall's nDCG@5 against the floor's (all queries) and
the peer's (the peer's queries) is also given as a paired difference with its 95 %
interval over queries (`paired_difference`): the same queries rank both, so a gap of a
thousandth between two means is only a difference when the interval says so.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import sqlalchemy as sa

from apps.bench.recall_corpus import ROLES, SYMBOLS, Query, relevance_set
from apps.bench.recall_corpus import case_frames as labelled_frames
from apps.bench.recall_rivals import BM25Peer, floor_query
from apps.bench.support import scratch_engine
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.recall import RecallConstraints, recall
from reflexmem.settings import Settings
from reflexmem.structures.gain import paired

__all__ = ["ROLES", "SYMBOLS", "case_frames", "load_cases", "measure", "run_bench"]
K = 5
LOADED = ("trading_decisions", "trade_executions", "role_cases")


def case_frames(n: int, seed: int = 0) -> dict[str, pl.DataFrame]:
    """Decisions, executions and role cases for `n` cases (deterministic per seed)."""
    frames = labelled_frames(n, seed)
    return {t: frames[t] for t in LOADED}


def load_cases(engine: sa.Engine, frames: dict[str, pl.DataFrame], chunk: int = 200_000) -> None:
    """Bulk-load the frames in dependency order, then refresh planner statistics."""
    for table in LOADED:
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


def _pct(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(np.asarray(values), q)), 3) if values else math.nan


def _ndcg(ranked: Sequence[str], relevant: frozenset[str], k: int) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, c in enumerate(ranked[:k]) if c in relevant)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(k, len(relevant))))
    return dcg / ideal if ideal > 0 else 0.0


def paired_difference(mine: Sequence[float], theirs: Sequence[float]) -> dict[str, float]:
    """Mean of `mine - theirs` per query with Student's 95 % interval (`gain.paired`)."""
    both = paired(np.asarray(mine, dtype=np.float64), np.asarray(theirs, dtype=np.float64))
    return {
        "mean": round(both["mean"], 4),
        "ci_low": round(both["low"], 4),
        "ci_high": round(both["high"], 4),
    }


def measure(
    query: Callable[[Query], Sequence[str]], queries: Sequence[Query], warmup: int = 10, k: int = K
) -> dict[str, Any]:
    """Latency (wall and CPU) and relevance of `query` over `queries` (after a warm-up).

    `ndcg_per_query` keeps each query's nDCG@5, in order, for paired comparisons.
    """
    for q in queries[:warmup]:
        query(q)
    lat: list[float] = []
    cpu = 0.0
    rec: list[float] = []
    ndcg: list[float] = []
    for q in queries:
        c0, t0 = time.process_time(), time.perf_counter()
        ranked = list(query(q))[:k]
        lat.append((time.perf_counter() - t0) * 1000.0)
        cpu += time.process_time() - c0
        found = sum(1 for c in ranked if c in q.relevant)
        rec.append(found / min(k, len(q.relevant)) if q.relevant else 0.0)
        ndcg.append(_ndcg(ranked, q.relevant, k))
    n = max(len(queries), 1)
    return {
        "p50_ms": _pct(lat, 50),
        "p99_ms": _pct(lat, 99),
        "cpu_ms_per_query": round(cpu * 1000.0 / n, 3),
        "recall_at_5": round(float(np.mean(rec)), 4) if rec else math.nan,
        "ndcg_at_5": round(float(np.mean(ndcg)), 4) if ndcg else math.nan,
        "ndcg_per_query": tuple(ndcg),
    }


def _rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _in_order(*runs: Callable[[], dict[str, Any]]) -> list[dict[str, Any]]:
    return [run() for run in runs]


def run_bench(
    settings: Settings,
    *,
    cases: int,
    backend: str,
    queries: int = 300,
    seed: int = 0,
    peer_roles: int = 1,
    progress: bool = False,
) -> dict[str, Any]:
    """Build the store, measure recall, the floor and the peer; return the JSON summary."""
    with (
        tempfile.TemporaryDirectory(prefix="reflex-bench-recall-") as tmp,
        scratch_engine(settings, backend, Path(tmp)) as engine,
    ):
        t0 = time.perf_counter()
        frames = labelled_frames(cases, seed)
        t1 = time.perf_counter()
        load_cases(engine, frames)
        t2 = time.perf_counter()
        if progress:
            print(f"generated {cases} cases in {t1 - t0:.1f}s, loaded in {t2 - t1:.1f}s")
        plan = relevance_set(frames["truth"], queries, seed)
        with engine.connect() as conn:
            dialect = conn.dialect.name

            def via_recall(q: Query) -> list[str]:
                c = RecallConstraints(role=q.role, symbol=q.symbol)
                return list(recall(conn, c, q.text, k=K).case_ids)

            def via_floor(q: Query) -> list[str]:
                stmt = floor_query(
                    dialect, RecallConstraints(role=q.role, symbol=q.symbol), q.text, K
                )
                return [str(r[0]) for r in conn.execute(stmt)]

            # Alternate halves so neither side always runs on the colder cache.
            half = len(plan) // 2
            a = _in_order(
                lambda: measure(via_recall, plan[:half]), lambda: measure(via_floor, plan[:half])
            )
            b = _in_order(
                lambda: measure(via_floor, plan[half:]), lambda: measure(via_recall, plan[half:])
            )
            mine = measure(via_recall, plan)
            floor = measure(via_floor, plan)
        roles = ROLES[:peer_roles]
        rss0 = _rss_mb()
        c0 = time.process_time()
        peer = BM25Peer(frames["role_cases"], frames["truth"], roles)
        build_cpu = time.process_time() - c0
        rss1 = _rss_mb()
        peer_plan = [q for q in plan if q.role in roles]
        peer_stats = measure(lambda q: peer.query(q.role, q.symbol, q.text, K), peer_plan)
        raw_stats = measure(
            lambda q: peer.query(q.role, q.symbol, q.text, K, post_filtered=False), peer_plan
        )
        wrong = refused = total = 0
        for q in peer_plan:
            got = peer.query(q.role, q.symbol, q.text, K, post_filtered=False)
            w, r = peer.violations(q.role, q.symbol, got)
            wrong, refused, total = wrong + w, refused + r, total + len(got)
        mine_on_peer = measure(via_recall_for(engine), peer_plan)
        halves = {
            "recall_p99_ms_halves": [a[0]["p99_ms"], b[1]["p99_ms"]],
            "floor_p99_ms_halves": [a[1]["p99_ms"], b[0]["p99_ms"]],
        }
        return {
            "cases": cases,
            "backend": backend,
            "queries": len(plan),
            "k": K,
            "seed": seed,
            "constraint": "role + symbol (+ reflected, learnable, manual, not quarantined)",
            "mean_relevant": round(float(np.mean([len(q.relevant) for q in plan])), 2),
            "p50_ms": mine["p50_ms"],
            "p99_ms": mine["p99_ms"],
            "cpu_ms_per_query": mine["cpu_ms_per_query"],
            "recall_at_5": mine["recall_at_5"],
            "ndcg_at_5": mine["ndcg_at_5"],
            "floor_p50_ms": floor["p50_ms"],
            "floor_p99_ms": floor["p99_ms"],
            "floor_cpu_ms_per_query": floor["cpu_ms_per_query"],
            "floor_recall_at_5": floor["recall_at_5"],
            "floor_ndcg_at_5": floor["ndcg_at_5"],
            "ratio_p99_floor": round(mine["p99_ms"] / floor["p99_ms"], 2)
            if floor["p99_ms"] > 0
            else None,
            **halves,
            "peer_roles": len(roles),
            "peer_queries": len(peer_plan),
            "peer_p50_ms": peer_stats["p50_ms"],
            "peer_p99_ms": peer_stats["p99_ms"],
            "peer_cpu_ms_per_query": peer_stats["cpu_ms_per_query"],
            "peer_recall_at_5": peer_stats["recall_at_5"],
            "peer_ndcg_at_5": peer_stats["ndcg_at_5"],
            "peer_raw_ndcg_at_5": raw_stats["ndcg_at_5"],
            "peer_raw_wrong_symbol_share": round(wrong / total, 3) if total else None,
            "peer_raw_refused_share": round(refused / total, 3) if total else None,
            "peer_build_cpu_s": round(build_cpu, 1),
            "peer_index_rss_mb": round(rss1 - rss0, 1),
            "recall_ndcg_at_5_on_peer_queries": mine_on_peer["ndcg_at_5"],
            "ndcg_minus_floor": paired_difference(mine["ndcg_per_query"], floor["ndcg_per_query"]),
            "ndcg_minus_peer": paired_difference(
                mine_on_peer["ndcg_per_query"], peer_stats["ndcg_per_query"]
            ),
            "build_s": round(t2 - t0, 1),
        }


def via_recall_for(engine: sa.Engine) -> Callable[[Query], list[str]]:
    """Recall over a fresh connection of `engine` (for the peer's query subset)."""

    def run(q: Query) -> list[str]:
        with engine.connect() as conn:
            c = RecallConstraints(role=q.role, symbol=q.symbol)
            return list(recall(conn, c, q.text, k=K).case_ids)

    return run
