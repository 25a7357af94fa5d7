import pytest

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.policies import (
    AGGRESSIVE_LEARNER,
    COMPRESSED,
    FULL_DETAILED,
    NONE,
    RECENT_WINDOW,
    RenderFormat,
    RetrievalPolicy,
    count_tokens,
    default_policies,
    derive_policy,
    render,
    retrieve,
)
from reflexmem.memory.ranking import RankedEntry
from reflexmem.memory.store import InMemoryStore


def entry(i: int, text: str, tier: Tier = Tier.EPISODIC, namespace: str = "ns") -> MemoryEntry:
    return MemoryEntry(
        id=f"{namespace}-{tier}-{i}",
        namespace=namespace,
        tier=tier,
        text=text,
        quality=0.8,
        created_episode=i,
    )


def test_default_policies_are_the_five_named_arms() -> None:
    assert [p.name for p in default_policies()] == [
        "none",
        "recent_window",
        "full_detailed",
        "compressed",
        "aggressive_learner",
    ]
    assert NONE.retrieves_nothing
    assert not any(p.retrieves_nothing for p in default_policies()[1:])


@pytest.mark.parametrize("policy", default_policies())
def test_policies_round_trip_through_dict(policy: RetrievalPolicy) -> None:
    assert RetrievalPolicy.from_dict(policy.to_dict()) == policy


def test_none_policy_retrieves_nothing() -> None:
    store = InMemoryStore()
    store.put(entry(1, "momentum works"))
    recalled = retrieve(store, "ns", NONE, "momentum", now_episode=2)
    assert recalled.entries == ()
    assert recalled.context == ""
    assert recalled.tokens == 0


def test_recent_window_only_sees_the_last_episodes() -> None:
    store = InMemoryStore()
    for i in range(40):
        store.put(entry(i, "momentum works"))
    recalled = retrieve(store, "ns", RECENT_WINDOW, "momentum", now_episode=40)
    window = RECENT_WINDOW.recent_window
    assert window is not None
    assert all(e.created_episode >= 40 - window for e in recalled.entries)
    assert len(recalled.entries) == RECENT_WINDOW.top_k


def test_compressed_policy_reads_only_distilled_tiers() -> None:
    store = InMemoryStore()
    store.put(entry(1, "momentum episodic"))
    store.put(entry(1, "momentum semantic", Tier.SEMANTIC))
    recalled = retrieve(store, "ns", COMPRESSED, "momentum", now_episode=2)
    assert [e.tier for e in recalled.entries] == [Tier.SEMANTIC]
    assert recalled.context == "- momentum semantic"


def test_whitespace_tokenizer_counts_words() -> None:
    assert count_tokens("  a b\n c\t d ") == 4
    assert count_tokens("") == 0


def test_render_stays_within_the_token_budget_and_truncates_the_last_entry() -> None:
    ranked = [
        RankedEntry(entry(i, " ".join(f"w{j}" for j in range(10))), score=1.0, match=1.0)
        for i in range(5)
    ]
    # each line is "- w0 ... w9": 11 tokens; two fit in 27, the third is cut to 5
    policy = RetrievalPolicy("tight", (Tier.EPISODIC,), RenderFormat.COMPRESSED, 5, 27)
    text, included = render(policy, ranked)
    assert count_tokens(text) == 27
    assert included == 3
    assert text.splitlines()[-1] == "- w0 w1 w2 w3…"
    short = RetrievalPolicy("short", (Tier.EPISODIC,), RenderFormat.COMPRESSED, 5, 25)
    text, included = render(short, ranked)
    assert included == 2  # 3 tokens left: too few to say anything, so dropped
    assert count_tokens(text) == 22


def test_detailed_format_shows_tier_quality_and_episode() -> None:
    ranked = [RankedEntry(entry(7, "buy dips"), score=1.0, match=1.0)]
    text, _ = render(FULL_DETAILED, ranked)
    assert text == "[episodic q=0.80 ep=7] buy dips"


def test_retrieval_excludes_candidates_and_other_namespaces() -> None:
    store = InMemoryStore()
    store.put(entry(1, "momentum rule", Tier.PROCEDURAL))
    store.set_state("ns-procedural-1", EntryState.CANDIDATE)
    store.put(entry(1, "momentum elsewhere", namespace="other"))
    store.put(entry(2, "momentum here"))
    recalled = retrieve(store, "ns", AGGRESSIVE_LEARNER, "momentum", now_episode=3)
    assert [e.id for e in recalled.entries] == ["ns-episodic-2"]


def test_derived_policy_widens_recall_deterministically() -> None:
    child = derive_policy(RECENT_WINDOW, ["recent_window"])
    assert child == derive_policy(RECENT_WINDOW, ["recent_window"])
    assert child.name == "recent_window+g1"
    assert child.parent == "recent_window"
    assert child.generation == 1
    assert set(child.tiers) == set(Tier)
    assert child.top_k == 10
    assert child.token_budget == 450
    assert child.recent_window == 40
    assert derive_policy(RECENT_WINDOW, ["recent_window", child.name]).name == (
        "recent_window+g1.2"
    )
    from_none = derive_policy(NONE, ["none"])
    assert not from_none.retrieves_nothing
    assert (from_none.top_k, from_none.token_budget) == (5, 300)


def test_policy_rejects_duplicate_tiers_and_negative_sizes() -> None:
    with pytest.raises(ValueError, match="twice"):
        RetrievalPolicy("x", (Tier.EPISODIC, Tier.EPISODIC))
    with pytest.raises(ValueError, match=">= 0"):
        RetrievalPolicy("x", (Tier.EPISODIC,), top_k=-1)
