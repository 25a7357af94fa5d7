"""Merged distillation: one lesson lineage per tag, versions, and no rule from a lesson."""

from __future__ import annotations

import pytest

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.merge import MergeConfig, distill_merged
from reflexmem.memory.rule_config import RuleConfig
from reflexmem.memory.store import InMemoryStore

NS = "role:momentum"


def stored(store: InMemoryStore, entry_id: str) -> MemoryEntry:
    """The entry the test expects the store to hold."""
    entry = store.get(entry_id)
    assert entry is not None, entry_id
    return entry


def _episodes(store: InMemoryStore, start: int, outcomes: list[float], tag: str) -> None:
    for i, s in enumerate(outcomes):
        idx = start + i
        store.put(
            MemoryEntry(
                id=f"epi:{NS}:{idx}",
                namespace=NS,
                tier=Tier.EPISODIC,
                text=f"went short against its own signal and lost {abs(s):.2%}.",
                tags=(tag, "symbol:AAPL", f"scenario:s{idx % 2}"),
                quality=0.75,
                created_episode=idx,
                source_ids=(f"case-{idx}",),
                outcome=s,
            )
        )


CFG = MergeConfig(
    gist=lambda text: text.split(" lost")[0] + " lost.", rules=RuleConfig(prefixes=())
)
"""Lesson lineages alone: the condition rules (`test_outcome_rules.py`) switched off."""


def test_windows_extend_one_lineage_and_supersede_the_version_they_extend() -> None:
    store = InMemoryStore()
    _episodes(store, 0, [-0.5, -0.4, 0.1, -0.3], "pattern:k1")
    first = distill_merged(store, NS, 0, 10, CFG)
    _episodes(store, 10, [-0.2, -0.6], "pattern:k1")
    second = distill_merged(store, NS, 10, 20, CFG)
    (v1,) = first.written
    (v2,) = second.written
    old, new = store.get(v1), store.get(v2)
    assert old is not None
    assert new is not None
    assert old.state is EntryState.SUPERSEDED
    assert new.state is EntryState.ACTIVE
    assert (new.support, new.wins, new.losses) == (6, 1, 5)
    assert new.first_episode == 0
    assert new.created_episode == 19
    assert new.confidence == pytest.approx(5 / 6)
    # Sources: this window's cases and the version it extends (the chain to every case).
    assert new.source_ids == ("case-10", "case-11", v1)
    # Scope: every case was on AAPL, but the scenarios differ, so only the symbol stays.
    assert "symbol:AAPL" in new.tags
    assert not any(t.startswith("scenario:") for t in new.tags)
    assert new.text.startswith("went short against its own signal and lost.")
    # Idempotent per window.
    assert distill_merged(store, NS, 10, 20, CFG).already_done


def test_an_anecdote_is_a_candidate_until_a_second_episode_supports_it() -> None:
    store = InMemoryStore()
    _episodes(store, 0, [-0.5], "pattern:k2")
    (v1,) = distill_merged(store, NS, 0, 10, CFG).written
    assert stored(store, v1).state is EntryState.CANDIDATE
    _episodes(store, 10, [-0.4], "pattern:k2")
    (v2,) = distill_merged(store, NS, 10, 20, CFG).written
    assert stored(store, v1).state is EntryState.RETIRED
    assert stored(store, v2).state is EntryState.ACTIVE


def test_a_lesson_never_becomes_a_rule_however_consistent() -> None:
    # "Went against its signal and lost" is lost by definition: 30 of 30 is no evidence.
    store = InMemoryStore()
    with_rules = MergeConfig(gist=CFG.gist)
    for w in range(3):
        _episodes(store, 10 * w, [-0.5] * 10, "pattern:k3")
        report = distill_merged(store, NS, 10 * w, 10 * w + 10, with_rules)
        assert report.promoted == ()
    assert store.entries(NS, (Tier.PROCEDURAL,)) == ()


def test_only_tags_with_the_prefix_form_patterns() -> None:
    store = InMemoryStore()
    _episodes(store, 0, [-0.5, -0.5], "other:k5")
    assert distill_merged(store, NS, 0, 10, CFG).written == ()
