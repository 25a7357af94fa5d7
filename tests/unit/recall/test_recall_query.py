from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reflexmem.recall import HashingEmbedder, RecallQueryError, query_terms
from reflexmem.recall.constraints import RecallConstraints, RecallUnavailable, require_active
from reflexmem.recall.fts import facet_token, sqlite_match
from reflexmem.recall.query import MAX_QUERY_CHARS, MAX_TERMS
from reflexmem.settings import MemoryMode


def test_terms_strip_every_operator_and_quote() -> None:
    q = """momentum" OR NEAR(a b) col:x* ^start '; DROP TABLE role_cases; -- (x) AND"""
    terms = query_terms(q)
    assert terms == (
        "momentum",
        "or",
        "near",
        "a",
        "b",
        "col",
        "x",
        "start",
        "drop",
        "table",
        "role",
        "cases",
        "and",
    )
    assert all(t.isalnum() for t in terms)


@given(st.text(max_size=300))
def test_terms_are_always_plain_alphanumeric(text: str) -> None:
    for t in query_terms(text.replace("\x00", "")):
        assert t.isalnum()
        assert '"' not in t
        assert "'" not in t
        assert ":" not in t


def test_too_long_or_nul_queries_are_clear_errors() -> None:
    with pytest.raises(RecallQueryError, match="at most"):
        query_terms("x" * (MAX_QUERY_CHARS + 1))
    with pytest.raises(RecallQueryError, match="NUL"):
        query_terms("a\x00b")
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == MAX_TERMS


def test_facet_token_is_one_alphanumeric_token_per_slice() -> None:
    a = facet_token("role-1", "reflected", "BRK.B")
    assert a.isalnum()
    assert a.startswith("f")
    assert a != facet_token("role-1", "reflected")
    assert a != facet_token("role-1", "reflected", "BRK.B", "x")
    match = sqlite_match(RecallConstraints(role="r", symbol="S"), ("a", "b"))
    assert match.endswith('AND ("a" OR "b")')


def test_recall_requires_active_mode() -> None:
    with pytest.raises(RecallUnavailable, match="shadow"):
        require_active(MemoryMode.SHADOW)
    require_active(MemoryMode.ACTIVE)


def test_hashing_embedder_is_deterministic_and_normalised() -> None:
    emb = HashingEmbedder(32)
    a = emb.embed(["earnings breakout failed", "earnings breakout failed", ""])
    assert a.shape == (3, 32)
    assert a.dtype == np.float32
    assert np.allclose(a[0], a[1])
    assert np.isclose(np.linalg.norm(a[0]), 1.0)
    assert np.allclose(a[2], 0.0)
    b = emb.embed(["earnings breakouts failing", "dividend yield carry"])
    assert float(a[0] @ b[0]) > float(a[0] @ b[1])
