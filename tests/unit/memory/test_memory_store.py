import json

import pytest

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import FrozenError, MemoryEntry
from reflexmem.memory.store import DEFAULT_CAP, InMemoryStore, MemoryStore


def entry(
    eid: str,
    *,
    namespace: str = "ns",
    tier: Tier = Tier.EPISODIC,
    quality: float = 0.5,
    created: int = 0,
) -> MemoryEntry:
    return MemoryEntry(
        id=eid,
        namespace=namespace,
        tier=tier,
        text=f"text {eid}",
        quality=quality,
        created_episode=created,
    )


def test_in_memory_store_satisfies_the_protocol() -> None:
    assert isinstance(InMemoryStore(), MemoryStore)


def test_write_below_quality_floor_is_refused_with_reason_and_not_stored() -> None:
    store = InMemoryStore()
    result = store.put(entry("weak", quality=0.29))
    assert not result.stored
    assert result.reason == "quality 0.290 below floor 0.300"
    assert store.get("weak") is None
    assert store.count("ns", Tier.EPISODIC) == 0
    assert store.put(entry("ok", quality=0.3)).stored


def test_full_tier_evicts_its_lowest_ranked_entry() -> None:
    store = InMemoryStore()
    assert store.cap == DEFAULT_CAP == 500
    for i in range(DEFAULT_CAP):
        quality = 0.31 if i == 123 else 0.5 + (i % 50) / 100
        assert store.put(entry(f"e{i}", quality=quality, created=10)).stored
    result = store.put(entry("new", quality=0.9, created=10))
    assert result.stored
    assert result.evicted == ("e123",)
    assert store.count("ns", Tier.EPISODIC) == 500
    assert store.get("e123") is None
    assert store.get("new") is not None


def test_eviction_ranks_by_recency_as_well_as_quality() -> None:
    store = InMemoryStore(cap=3)
    store.put(entry("old", quality=0.8, created=0))
    store.put(entry("mid", quality=0.8, created=50))
    store.put(entry("recent", quality=0.8, created=100))
    result = store.put(entry("newest", quality=0.8, created=101))
    assert result.evicted == ("old",)


def test_newcomer_ranking_below_a_full_tier_is_refused_and_evicts_nothing() -> None:
    store = InMemoryStore(cap=2)
    store.put(entry("a", quality=1.0, created=5))
    store.put(entry("b", quality=1.0, created=5))
    result = store.put(entry("c", quality=0.3, created=5))
    assert not result.stored
    assert result.evicted == ()
    assert "full episodic tier" in (result.reason or "")
    assert {e.id for e in store.entries("ns")} == {"a", "b"}


def test_caps_are_per_namespace_and_tier() -> None:
    store = InMemoryStore(cap=2)
    for ns in ("x", "y"):
        for tier in Tier:
            for i in range(2):
                assert store.put(entry(f"{ns}{tier}{i}", namespace=ns, tier=tier)).evicted == ()
    assert all(store.count(ns, tier) == 2 for ns in ("x", "y") for tier in Tier)


def test_duplicate_id_is_refused() -> None:
    store = InMemoryStore()
    store.put(entry("a"))
    result = store.put(entry("a", quality=0.9))
    assert not result.stored
    assert "duplicate" in (result.reason or "")
    assert store.get("a") == entry("a")


def test_entries_filter_by_tier_and_state_and_keep_namespaces_apart() -> None:
    store = InMemoryStore()
    store.put(entry("e", tier=Tier.EPISODIC))
    store.put(entry("p", tier=Tier.PROCEDURAL))
    store.put(entry("other", namespace="other"))
    store.set_state("p", EntryState.CANDIDATE)
    assert [e.id for e in store.entries("ns")] == ["e", "p"]
    assert [e.id for e in store.entries("ns", states=[EntryState.ACTIVE])] == ["e"]
    assert [e.id for e in store.entries("ns", [Tier.PROCEDURAL])] == ["p"]
    candidate = store.get("p")
    assert candidate is not None
    assert candidate.state is EntryState.CANDIDATE
    assert store.namespaces() == ("ns", "other")


def test_windows_are_recorded_once() -> None:
    store = InMemoryStore()
    assert not store.has_window("ns", "w")
    assert store.mark_window("ns", "w")
    assert not store.mark_window("ns", "w")
    assert store.has_window("ns", "w")
    assert not store.has_window("other", "w")


def test_snapshot_round_trips_through_json() -> None:
    store = InMemoryStore(cap=7)
    store.put(entry("a", quality=0.7, created=3))
    store.put(entry("b", tier=Tier.SEMANTIC))
    store.mark_window("ns", "ns:episodes:0-10")
    text = json.dumps(store.to_dict(), sort_keys=True)
    again = InMemoryStore.from_dict(json.loads(text))
    assert json.dumps(again.to_dict(), sort_keys=True) == text
    assert again.get("a") == store.get("a")


def test_frozen_store_refuses_every_write_and_keeps_its_state() -> None:
    store = InMemoryStore()
    store.put(entry("a"))
    store.freeze()
    before = json.dumps(store.to_dict(), sort_keys=True)
    with pytest.raises(FrozenError):
        store.put(entry("b"))
    with pytest.raises(FrozenError):
        store.put(entry("low", quality=0.0))
    with pytest.raises(FrozenError):
        store.set_state("a", EntryState.RETIRED)
    with pytest.raises(FrozenError):
        store.mark_window("ns", "w")
    assert json.dumps(store.to_dict(), sort_keys=True) == before
    assert store.entries("ns") == (entry("a"),)
    store.unfreeze()
    assert store.put(entry("b")).stored


@pytest.mark.parametrize(
    ("field", "value"),
    [("quality", 1.5), ("quality", float("nan")), ("confidence", -0.1), ("outcome", 2.0)],
)
def test_entry_rejects_out_of_range_values(field: str, value: float) -> None:
    data = entry("a").to_dict()
    data[field] = value
    with pytest.raises(ValueError, match=field):
        MemoryEntry.from_dict(data)


def test_entry_round_trips_and_rejects_unknown_fields() -> None:
    e = MemoryEntry(
        id="x",
        namespace="ns",
        tier=Tier.SEMANTIC,
        text="t",
        tags=("a", "b"),
        source_ids=("s1",),
        support=3,
        confidence=0.75,
        window_key="ns:episodes:0-10",
        outcome=-0.25,
    )
    assert MemoryEntry.from_dict(json.loads(json.dumps(e.to_dict()))) == e
    with pytest.raises(ValueError, match="unknown"):
        MemoryEntry.from_dict({**e.to_dict(), "surprise": 1})
