from hypothesis import given, settings
from hypothesis import strategies as st

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.policies import RetrievalPolicy, default_policies, retrieve
from reflexmem.memory.store import InMemoryStore

CAP = 6
WORDS = ("momentum", "breakout", "earnings", "gap", "fade", "risk")

entries = st.builds(
    lambda i, ns, tier, state, words, quality, created: MemoryEntry(
        id=f"e{i}",
        namespace=ns,
        tier=tier,
        text=" ".join(words),
        tags=tuple(words[:1]),
        quality=quality,
        created_episode=created,
        state=state,
    ),
    i=st.integers(0, 10_000),
    ns=st.sampled_from(("mine", "theirs")),
    tier=st.sampled_from(tuple(Tier)),
    state=st.sampled_from(tuple(EntryState)),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    quality=st.floats(0.0, 1.0),
    created=st.integers(0, 300),
)


@settings(max_examples=150, deadline=None)
@given(
    batch=st.lists(entries, max_size=60),
    query=st.lists(st.sampled_from((*WORDS, "unseen")), max_size=4).map(" ".join),
    policy=st.sampled_from(default_policies()),
    now=st.integers(0, 400),
)
def test_retrieval_returns_only_active_entries_of_its_namespace_within_caps(
    batch: list[MemoryEntry], query: str, policy: RetrievalPolicy, now: int
) -> None:
    store = InMemoryStore(cap=CAP)
    for e in batch:
        store.put(e)
    recalled = retrieve(store, "mine", policy, query, now_episode=now)
    assert len(recalled.entries) <= policy.top_k
    assert recalled.tokens <= policy.token_budget
    for e in recalled.entries:
        assert e.namespace == "mine"
        assert e.state is EntryState.ACTIVE
        assert e.tier in policy.tiers
        assert store.get(e.id) == e  # never an evicted entry
        assert e.quality >= store.quality_floor
    for ns in ("mine", "theirs"):
        for tier in Tier:
            assert store.count(ns, tier) <= CAP
    scores = [r.score for r in recalled.ranked]
    assert scores == sorted(scores, reverse=True)
