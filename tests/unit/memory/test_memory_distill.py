import json

import pytest

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.distill import (
    DistillConfig,
    Polarity,
    distill_window,
    find_patterns,
    procedural_id,
    window_key,
)
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.loop import LearningLoop
from reflexmem.memory.policies import FULL_DETAILED, retrieve
from reflexmem.memory.schedule import LearningSchedule
from reflexmem.memory.store import InMemoryStore


def episode(i: int, outcome: float, tags: tuple[str, ...], quality: float = 0.8) -> MemoryEntry:
    return MemoryEntry(
        id=f"epi:ns:{i}",
        namespace="ns",
        tier=Tier.EPISODIC,
        text=f"episode {i}",
        tags=tags,
        quality=quality,
        created_episode=i,
        outcome=outcome,
    )


def filled_store() -> InMemoryStore:
    store = InMemoryStore()
    # momentum: 6 episodes, 5 positive -> support 6, confidence 5/6 (promotable)
    # meanrev: 3 episodes, 2 negative, 1 neutral -> negative, confidence 2/3
    # split: 1 win 1 loss -> no pattern; lonely: single episode -> no pattern
    rows = [
        (0, 0.5, ("momentum", "split")),
        (1, 0.2, ("momentum",)),
        (2, 0.9, ("momentum", "lonely")),
        (3, -0.4, ("momentum", "split")),
        (4, 0.1, ("momentum",)),
        (5, 0.3, ("momentum",)),
        (6, -0.6, ("meanrev",)),
        (7, -0.1, ("meanrev",)),
        (8, 0.0, ("meanrev",)),
        (9, 0.0, ()),
    ]
    for i, s, tags in rows:
        store.put(episode(i, s, tags))
    return store


def test_patterns_carry_support_and_confidence() -> None:
    store = filled_store()
    patterns = {p.tag: p for p in find_patterns(store.entries("ns"), min_support=2)}
    assert set(patterns) == {"momentum", "meanrev"}
    momentum = patterns["momentum"]
    assert (momentum.polarity, momentum.support, momentum.agreeing) == (Polarity.POSITIVE, 6, 5)
    assert momentum.confidence == pytest.approx(5 / 6)
    assert momentum.mean_outcome == pytest.approx((0.5 + 0.2 + 0.9 - 0.4 + 0.1 + 0.3) / 6)
    meanrev = patterns["meanrev"]
    assert (meanrev.polarity, meanrev.support) == (Polarity.NEGATIVE, 3)
    assert meanrev.confidence == pytest.approx(2 / 3)


def test_distilling_a_window_writes_patterns_and_promotes_strong_ones_as_candidates() -> None:
    store = filled_store()
    report = distill_window(store, "ns", 0, 10)
    key = window_key("ns", 0, 10)
    assert not report.already_done
    assert len(report.written) == 2
    semantic = store.entries("ns", [Tier.SEMANTIC])
    assert {e.window_key for e in semantic} == {key}
    assert {e.support for e in semantic} == {6, 3}
    assert report.promoted == (procedural_id("ns", "momentum", "positive"),)
    rule = store.get(report.promoted[0])
    assert rule is not None
    assert rule.tier is Tier.PROCEDURAL
    assert rule.state is EntryState.CANDIDATE
    assert rule.confidence == pytest.approx(5 / 6)


def test_rerunning_a_window_writes_nothing_new() -> None:
    store = filled_store()
    distill_window(store, "ns", 0, 10)
    before = json.dumps(store.to_dict(), sort_keys=True)
    again = distill_window(store, "ns", 0, 10)
    assert again.already_done
    assert again.written == ()
    assert again.promoted == ()
    assert json.dumps(store.to_dict(), sort_keys=True) == before


def test_rerun_after_a_crash_before_the_window_was_marked_writes_nothing_new() -> None:
    store = filled_store()
    distill_window(store, "ns", 0, 10)
    store._windows.clear()  # simulate a crash between the writes and mark_window
    count = len(store.entries("ns"))
    again = distill_window(store, "ns", 0, 10)
    assert again.written == ()
    assert again.promoted == ()
    assert len(store.entries("ns")) == count


def test_promotion_thresholds_are_configurable() -> None:
    store = filled_store()
    strict = DistillConfig(promote_min_support=7)
    assert distill_window(store, "ns", 0, 10, strict).promoted == ()


def test_candidates_are_never_recalled_until_activated() -> None:
    store = filled_store()
    report = distill_window(store, "ns", 0, 10)
    rule_id = report.promoted[0]
    query = "rule when momentum applies expect a positive outcome favour it"
    recalled = retrieve(store, "ns", FULL_DETAILED, query, now_episode=10)
    assert rule_id not in {e.id for e in recalled.entries}
    store.set_state(rule_id, EntryState.ACTIVE)
    recalled = retrieve(store, "ns", FULL_DETAILED, query, now_episode=10)
    assert recalled.entries[0].id == rule_id


def run_loop(episodes: int, warmup: int) -> tuple[LearningLoop, dict[int, str]]:
    loop = LearningLoop("ns", schedule=LearningSchedule(warmup_episodes=warmup), rng=0)
    distilled = {}
    for i in range(episodes):
        loop.select_policy()
        report = loop.record_episode(f"trade {i}", 0.5, 0.8, tags=("momentum",))
        if report.distill is not None:
            distilled[i] = report.distill.window_key
    return loop, distilled


def test_loop_distils_every_ten_episodes_per_namespace() -> None:
    loop, distilled = run_loop(30, warmup=0)
    assert distilled == {
        9: "ns:episodes:0-10",
        19: "ns:episodes:10-20",
        29: "ns:episodes:20-30",
    }
    semantic = loop.store.entries("ns", [Tier.SEMANTIC])
    assert [e.support for e in semantic] == [10, 10, 10]


def test_loop_skips_distillation_of_windows_ending_in_warm_up() -> None:
    loop, distilled = run_loop(20, warmup=15)
    assert distilled == {19: "ns:episodes:10-20"}
    assert not loop.store.has_window("ns", "ns:episodes:0-10")
