"""Ranking of memory entries against a query.

    r(q, e) = f_match(q, e) * (0.5 + 0.5 q_e) * (0.3 + 0.7 exp(-0.01 age)) * b_tier

The quality and recency factors are floored (0.5, 0.3) so that a perfect match is never
silenced by age or a modest quality score alone; the match term is the only factor that
can drive a score to zero. ``f_match`` is pluggable because full-text and embedding
matchers will replace the token-overlap default; every matcher scores a whole batch at
once so that ranking stays one numpy pass over the candidates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from reflexmem.ledger.enums import Tier
from reflexmem.memory.entries import TIER_BOOST, MemoryEntry

DEFAULT_TOP_K = 5
RECENCY_RATE = 0.01
"""Per-episode decay rate of the recency factor: half of its decaying part is gone after
about 69 episodes, so roughly seven windows of ten."""

MatchFn = Callable[[str, Sequence[MemoryEntry]], NDArray[np.float64]]
"""Scores a query against a batch of entries, one non-negative float per entry."""

PairMatchFn = Callable[[str, MemoryEntry], float]

_TOKEN = re.compile(r"[a-z0-9_]+")
_BOOST_BY_TIER = {tier: TIER_BOOST[tier] for tier in Tier}

K = TypeVar("K")
V = TypeVar("V")


class IdentityMemo(Generic[K, V]):
    """Remembers values computed for the last few objects, recognised by identity.

    Stores hand out the same tuple object while a namespace is unchanged, so "is this
    the batch I saw last query?" is an identity check. Holding the key objects keeps
    them alive, so an id can never be recycled under a stale value. Only tuples are
    remembered: a list could change behind the memo's back.
    """

    def __init__(self, size: int = 4) -> None:
        self._size = size
        self._items: list[tuple[K, V]] = []

    def get(self, key: K) -> V | None:
        """Return the value remembered for this very object, if any."""
        if type(key) is not tuple:
            return None
        for obj, value in self._items:
            if obj is key:
                return value
        return None

    def put(self, key: K, value: V) -> V:
        """Remember a value for an object, forgetting the oldest beyond the size."""
        if type(key) is not tuple:
            return value
        self._items.append((key, value))
        if len(self._items) > self._size:
            del self._items[0]
        return value


def tokenize(text: str) -> list[str]:
    """Lower-case alphanumeric runs: deliberately simple so scores are reproducible."""
    return _TOKEN.findall(text.lower())


def quality_factor(quality: NDArray[np.float64]) -> NDArray[np.float64]:
    """0.5 + 0.5 q: a zero-quality entry still keeps half its weight."""
    return 0.5 + 0.5 * quality


def recency_factor(age: NDArray[np.float64]) -> NDArray[np.float64]:
    """0.3 + 0.7 exp(-0.01 age), with age in episodes; old entries fade to 30 %."""
    return 0.3 + 0.7 * np.exp(-RECENCY_RATE * age)


def rank_scores(
    match: NDArray[np.float64],
    quality: NDArray[np.float64],
    age: NDArray[np.float64],
    boost: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Apply the ranking formula to aligned arrays; the one place it is written down."""
    return match * quality_factor(quality) * recency_factor(age) * boost


_Columns = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]
_COLUMNS: IdentityMemo[Sequence[MemoryEntry], _Columns] = IdentityMemo()


def entry_arrays(entries: Sequence[MemoryEntry], now_episode: int) -> _Columns:
    """Quality, age (never negative) and tier boost of each entry as float arrays."""
    columns = _COLUMNS.get(entries)
    if columns is None:
        n = len(entries)
        quality = np.fromiter((e.quality for e in entries), dtype=np.float64, count=n)
        created = np.fromiter((e.created_episode for e in entries), dtype=np.float64, count=n)
        boost = np.fromiter((_BOOST_BY_TIER[e.tier] for e in entries), dtype=np.float64, count=n)
        columns = _COLUMNS.put(entries, (quality, created, boost))
    quality, created, boost = columns
    return quality, np.maximum(float(now_episode) - created, 0.0), boost


def standing(entries: Sequence[MemoryEntry], now_episode: int) -> NDArray[np.float64]:
    """Query-independent rank (f_match = 1): what eviction compares when a tier is full."""
    quality, age, boost = entry_arrays(entries, now_episode)
    return rank_scores(np.ones(len(entries)), quality, age, boost)


@dataclass(frozen=True, slots=True)
class RankedEntry:
    """An entry with the score that placed it and the match part of that score."""

    entry: MemoryEntry
    score: float
    match: float


@dataclass(frozen=True, slots=True)
class _TokenBatch:
    flat: NDArray[np.int64]
    owner: NDArray[np.int64]


class TokenOverlapMatcher:
    """IDF-weighted query coverage, a deterministic BM25-like default matcher.

    f = sum of idf(t) over query terms present in the entry / sum of idf(t) over all
    query terms, with idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5)) computed over the
    candidate batch (N entries). So f is in [0, 1], is 1 when the entry contains every
    query term, and rare shared terms count more than common ones. Terms are the
    entry's text plus its tags. There is no term-frequency or length normalisation:
    entries are short and repetition should not buy rank. A query without any terms
    scores 1 everywhere, leaving quality, recency and tier to order the entries.

    Token ids are cached per entry (while the same entry object is seen) and the
    flattened token array per batch (while the same batch object is seen), so a query
    over an unchanged store is pure array work.
    """

    def __init__(self, max_cache: int = 100_000) -> None:
        self._vocab: dict[str, int] = {}
        self._cache: dict[str, tuple[MemoryEntry, NDArray[np.int64]]] = {}
        self._max_cache = max_cache
        self._batches: IdentityMemo[Sequence[MemoryEntry], _TokenBatch] = IdentityMemo()

    def _token_ids(self, entry: MemoryEntry) -> NDArray[np.int64]:
        hit = self._cache.get(entry.id)
        if hit is not None and hit[0] is entry:
            return hit[1]
        words = tokenize(entry.text)
        for tag in entry.tags:
            words.extend(tokenize(tag))
        vocab = self._vocab
        ids = np.unique(
            np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), dtype=np.int64)
        )
        if len(self._cache) >= self._max_cache:
            self._cache.clear()
        self._cache[entry.id] = (entry, ids)
        return ids

    def _batch(self, entries: Sequence[MemoryEntry]) -> _TokenBatch:
        batch = self._batches.get(entries)
        if batch is not None:
            return batch
        arrays = [self._token_ids(e) for e in entries]
        lengths = np.fromiter((a.size for a in arrays), dtype=np.int64, count=len(arrays))
        flat = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
        owner = np.repeat(np.arange(len(arrays), dtype=np.int64), lengths)
        return self._batches.put(entries, _TokenBatch(flat, owner))

    def __call__(self, query: str, entries: Sequence[MemoryEntry]) -> NDArray[np.float64]:
        """Score ``query`` against every entry of the batch in one vectorised pass."""
        n = len(entries)
        terms = sorted(set(tokenize(query)))
        if n == 0:
            return np.zeros(0)
        if not terms:
            return np.ones(n)
        batch = self._batch(entries)
        # Term slot per vocabulary id (-1: not a query term). Unknown query terms have
        # no id: they match nothing but still weigh in the denominator.
        slot = np.full(len(self._vocab) + 1, -1, dtype=np.int64)
        for i, term in enumerate(terms):
            tid = self._vocab.get(term)
            if tid is not None:
                slot[tid] = i
        term_of_token = slot[batch.flat]
        hit = term_of_token >= 0
        term_of_hit = term_of_token[hit]
        df = np.bincount(term_of_hit, minlength=len(terms)).astype(np.float64)
        idf = np.log1p((n - df + 0.5) / (df + 0.5))
        covered = np.bincount(batch.owner[hit], weights=idf[term_of_hit], minlength=n)
        return np.asarray(covered / idf.sum(), dtype=np.float64)


def batch_match(pair: PairMatchFn) -> MatchFn:
    """Lift a one-entry scorer into a batch matcher, for matchers that cannot batch."""

    def match(query: str, entries: Sequence[MemoryEntry]) -> NDArray[np.float64]:
        return np.fromiter((pair(query, e) for e in entries), dtype=np.float64, count=len(entries))

    return match


def rank(
    query: str,
    entries: Sequence[MemoryEntry],
    *,
    now_episode: int,
    match_fn: MatchFn | None = None,
    top_k: int = DEFAULT_TOP_K,
) -> tuple[RankedEntry, ...]:
    """Top-k entries by r(q, e), best first; entries scoring zero are never returned.

    Ties break by newer creation episode, then by id, so that the same store and query
    always give the same order whatever order the store listed its entries in.
    """
    if top_k <= 0 or not entries:
        return ()
    matcher = match_fn if match_fn is not None else default_matcher()
    match = np.asarray(matcher(query, entries), dtype=np.float64)
    if match.shape != (len(entries),):
        raise ValueError(f"match_fn returned shape {match.shape}, expected ({len(entries)},)")
    if not np.all(np.isfinite(match)) or np.any(match < 0):
        raise ValueError("match_fn must return finite, non-negative scores")
    quality, age, boost = entry_arrays(entries, now_episode)
    scores = rank_scores(match, quality, age, boost)
    candidates = np.flatnonzero(scores > 0)
    if candidates.size == 0:
        return ()
    k = min(top_k, candidates.size)
    if candidates.size > k:
        # Keep everything tied with the k-th score so the tie-break below sees all of it.
        kth = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
        candidates = candidates[scores[candidates] >= kth]
    ordered = sorted(
        candidates.tolist(),
        key=lambda i: (-scores[i], -entries[i].created_episode, entries[i].id),
    )[:k]
    return tuple(
        RankedEntry(entry=entries[i], score=float(scores[i]), match=float(match[i]))
        for i in ordered
    )


_DEFAULT: list[TokenOverlapMatcher] = []


def default_matcher() -> TokenOverlapMatcher:
    """Return the shared default matcher, created on first use so its cache is shared."""
    if not _DEFAULT:
        _DEFAULT.append(TokenOverlapMatcher())
    return _DEFAULT[0]
