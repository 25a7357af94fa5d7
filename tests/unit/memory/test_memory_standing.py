"""The incrementally kept eviction columns pick exactly the victim the per-write rebuild does.

The reference below is the store's former write path written out: on a full tier, the
lowest-ranked (by `standing`) of the dead entries, or else of the tier plus the newcomer.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.ranking import standing
from reflexmem.memory.store import InMemoryStore

_DEAD = {EntryState.SUPERSEDED, EntryState.RETIRED}


def _reference_lowest(entries: list[MemoryEntry], clock: int) -> MemoryEntry:
    scores = standing(entries, clock)
    low = float(scores.min())
    tied = [entries[i] for i in range(len(entries)) if scores[i] == low]
    return min(tied, key=lambda e: (e.created_episode, e.id))


def _reference_run(ops: list[tuple[str, object]], cap: int) -> list[object]:
    bucket: dict[str, MemoryEntry] = {}
    clock = 0
    out: list[object] = []
    for kind, value in ops:
        if kind == "state":
            assert isinstance(value, tuple)
            eid, state = value
            assert isinstance(eid, str)
            assert isinstance(state, EntryState)
            if eid in bucket:
                bucket[eid] = bucket[eid].with_state(state)
            continue
        entry = value
        assert isinstance(entry, MemoryEntry)
        if entry.quality < 0.3 or entry.id in bucket:
            out.append((entry.id, False, ()))
            continue
        now = max(clock, entry.created_episode)
        evicted: tuple[str, ...] = ()
        if len(bucket) >= cap:
            dead = [e for e in bucket.values() if e.state in _DEAD]
            victim = _reference_lowest(dead or [*bucket.values(), entry], now)
            if victim.id == entry.id:
                out.append((entry.id, False, ()))
                continue
            del bucket[victim.id]
            evicted = (victim.id,)
        bucket[entry.id] = entry
        clock = now
        out.append((entry.id, True, evicted))
    out.append(sorted(bucket))
    return out


_ENTRY = st.builds(
    lambda i, q, c: MemoryEntry(
        id=f"e{i}",
        namespace="ns",
        tier=Tier.EPISODIC,
        text=f"text {i}",
        quality=q,
        created_episode=c,
    ),
    st.integers(0, 40),
    st.sampled_from([0.3, 0.4, 0.5, 0.75, 0.9, 1.0]),
    st.integers(0, 30),
)
_STATE = st.tuples(
    st.integers(0, 40).map(lambda i: f"e{i}"),
    st.sampled_from([EntryState.SUPERSEDED, EntryState.RETIRED]),
)
_OPS = st.lists(
    st.one_of(_ENTRY.map(lambda e: ("put", e)), _STATE.map(lambda s: ("state", s))),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(_OPS, st.integers(1, 6))
def test_full_tier_writes_match_the_per_write_rebuild(
    ops: list[tuple[str, object]], cap: int
) -> None:
    store = InMemoryStore(cap=cap)
    got: list[object] = []
    for kind, value in ops:
        if kind == "state":
            assert isinstance(value, tuple)
            eid, state = value
            assert isinstance(eid, str)
            assert isinstance(state, EntryState)
            if store.get(eid) is not None:
                store.set_state(eid, state)
            continue
        assert isinstance(value, MemoryEntry)
        r = store.put(value)
        got.append((r.entry_id, r.stored, r.evicted))
    got.append(sorted(e.id for e in store.entries("ns", [Tier.EPISODIC])))
    assert got == _reference_run(ops, cap)
