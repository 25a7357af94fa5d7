import math

import numpy as np
import pytest

from reflexmem.ledger.enums import Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.ranking import (
    MatchFn,
    TokenOverlapMatcher,
    batch_match,
    rank,
    rank_scores,
    standing,
)


def entry(
    eid: str,
    text: str = "x",
    *,
    tier: Tier = Tier.EPISODIC,
    quality: float = 0.5,
    created: int = 0,
    tags: tuple[str, ...] = (),
) -> MemoryEntry:
    return MemoryEntry(
        id=eid,
        namespace="ns",
        tier=tier,
        text=text,
        tags=tags,
        quality=quality,
        created_episode=created,
    )


def constant(value: float) -> MatchFn:
    return lambda query, entries: np.full(len(entries), value)


def test_ranking_formula_matches_a_hand_computed_case() -> None:
    # f=0.5, q=0.8, age=10, semantic boost 1.2:
    # 0.5 * (0.5 + 0.4) * (0.3 + 0.7 * exp(-0.1)) * 1.2
    expected = 0.5 * 0.9 * (0.3 + 0.7 * math.exp(-0.1)) * 1.2
    assert expected == pytest.approx(0.5040285, abs=1e-7)
    e = entry("a", tier=Tier.SEMANTIC, quality=0.8, created=5)
    (ranked,) = rank("anything", [e], now_episode=15, match_fn=constant(0.5))
    assert ranked.score == pytest.approx(expected, rel=1e-12)
    assert ranked.match == 0.5


def test_rank_scores_vectorised_agrees_with_scalar_formula() -> None:
    match = np.array([1.0, 0.25, 0.0])
    quality = np.array([0.0, 1.0, 0.7])
    age = np.array([0.0, 100.0, 3.0])
    boost = np.array([1.0, 1.5, 1.2])
    got = rank_scores(match, quality, age, boost)
    want = [
        1.0 * 0.5 * 1.0 * 1.0,
        0.25 * 1.0 * (0.3 + 0.7 * math.exp(-1.0)) * 1.5,
        0.0,
    ]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_tier_boosts_order_equal_entries_procedural_semantic_episodic() -> None:
    entries = [
        entry("e", tier=Tier.EPISODIC),
        entry("s", tier=Tier.SEMANTIC),
        entry("p", tier=Tier.PROCEDURAL),
    ]
    ranked = rank("q", entries, now_episode=0, match_fn=constant(1.0))
    assert [r.entry.id for r in ranked] == ["p", "s", "e"]
    assert ranked[0].score / ranked[2].score == pytest.approx(1.5)
    assert ranked[1].score / ranked[2].score == pytest.approx(1.2)


def test_token_overlap_is_idf_weighted_query_coverage() -> None:
    entries = [entry("ab", "Alpha beta"), entry("a", "alpha"), entry("g", "gamma")]
    scores = TokenOverlapMatcher()("alpha, BETA", entries)
    idf_alpha = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    idf_beta = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    np.testing.assert_allclose(scores, [1.0, idf_alpha / (idf_alpha + idf_beta), 0.0], rtol=1e-12)


def test_token_overlap_counts_tags_and_unknown_query_terms_lower_coverage() -> None:
    entries = [entry("t", "plain text", tags=("momentum",)), entry("u", "other")]
    matcher = TokenOverlapMatcher()
    assert matcher("momentum", entries)[0] == pytest.approx(1.0)
    partial = matcher("momentum neverseen", entries)[0]
    assert 0.0 < partial < 1.0


def test_query_without_terms_matches_everything_equally() -> None:
    scores = TokenOverlapMatcher()("  ...  ", [entry("a", "x"), entry("b", "y")])
    np.testing.assert_array_equal(scores, [1.0, 1.0])


def test_rank_drops_zero_scores_and_respects_top_k() -> None:
    entries = [entry(f"e{i}", "alpha" if i % 2 else "beta", created=i) for i in range(10)]
    ranked = rank("alpha", entries, now_episode=10, top_k=3)
    assert len(ranked) == 3
    assert all("alpha" in r.entry.text for r in ranked)
    assert [r.entry.id for r in ranked] == ["e9", "e7", "e5"]
    assert rank("zeta", entries, now_episode=10) == ()
    assert rank("alpha", entries, now_episode=10, top_k=0) == ()


def test_ties_break_by_newer_then_id_whatever_the_input_order() -> None:
    entries = [entry("b", created=3), entry("a", created=3), entry("c", created=3)]
    first = rank("q", entries, now_episode=3, match_fn=constant(1.0), top_k=2)
    second = rank("q", entries[::-1], now_episode=3, match_fn=constant(1.0), top_k=2)
    assert [r.entry.id for r in first] == ["a", "b"] == [r.entry.id for r in second]


def test_pair_scorer_lifts_to_batch_matcher() -> None:
    match = batch_match(lambda q, e: 1.0 if e.id == q else 0.0)
    ranked = rank("b", [entry("a"), entry("b")], now_episode=0, match_fn=match)
    assert [r.entry.id for r in ranked] == ["b"]


def test_match_fn_with_wrong_shape_or_negative_scores_is_rejected() -> None:
    with pytest.raises(ValueError, match="shape"):
        rank("q", [entry("a")], now_episode=0, match_fn=lambda q, es: np.ones(2))
    with pytest.raises(ValueError, match="non-negative"):
        rank("q", [entry("a")], now_episode=0, match_fn=constant(-1.0))


def test_cached_batch_is_not_reused_for_a_mutated_list() -> None:
    matcher = TokenOverlapMatcher()
    batch = [entry("a", "alpha")]
    assert matcher("alpha", batch)[0] == 1.0
    batch[0] = entry("a2", "beta")
    assert matcher("alpha", batch)[0] == 0.0


def test_standing_prefers_quality_and_recency() -> None:
    entries = [
        entry("old", quality=0.9, created=0),
        entry("new", quality=0.9, created=100),
        entry("weak", quality=0.3, created=100),
    ]
    s = standing(entries, now_episode=100)
    assert s[1] > s[0]
    assert s[1] > s[2]
