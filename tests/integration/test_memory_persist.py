"""The ledger-backed memory store behaves like InMemoryStore; posteriors persist."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sqlalchemy as sa

from reflexmem.ledger.enums import EntryState
from reflexmem.memory import FrozenError, InMemoryStore, MemoryEntry, Tier, distill_window
from reflexmem.memory.bandit import BanditState
from reflexmem.memory.cycle import EpisodeInput
from reflexmem.memory.ledger_agents import MemoryLedger
from reflexmem.memory.ledger_store import LedgerMemoryStore
from reflexmem.memory.policies import default_policies
from reflexmem.memory.schedule import LearningSchedule


def _entries(n: int, ns: str = "role:r1", seed: int = 0) -> list[MemoryEntry]:
    rng = np.random.default_rng(seed)
    return [
        MemoryEntry(
            id=f"e{i}",
            namespace=ns,
            tier=Tier.EPISODIC,
            text=f"episode {i}",
            tags=(f"t{int(rng.integers(3))}",),
            quality=float(rng.uniform(0.1, 1.0)),
            created_episode=i,
            outcome=float(rng.uniform(-1, 1)),
            source_ids=(f"case-{i}",),
        )
        for i in range(n)
    ]


def test_caps_floor_and_eviction_match_the_in_memory_store(engine: sa.Engine) -> None:
    entries = _entries(40)
    ref = InMemoryStore(cap=10)
    expected = [ref.put(e) for e in entries]
    store = LedgerMemoryStore(engine, cap=10)
    got = store.put_many(entries[:25]) + [store.put(e) for e in entries[25:]]
    assert got == expected
    assert any(r.reason and "below floor" in r.reason for r in got)
    assert any(r.evicted for r in got)
    assert store.count("role:r1", Tier.EPISODIC) == ref.count("role:r1", Tier.EPISODIC) == 10
    assert {e.id for e in store.entries("role:r1")} == {e.id for e in ref.entries("role:r1")}
    # duplicates refused, sources linked
    assert store.put(store.entries("role:r1")[0]).reason == "duplicate id: already stored"
    with engine.connect() as conn:
        linked = conn.execute(sa.text("SELECT count(*) FROM memory_sources")).scalar()
    assert linked == 10


def test_default_cap_is_500_and_quality_floor_is_0_3(engine: sa.Engine) -> None:
    store = LedgerMemoryStore(engine)
    assert store.cap == 500
    low = MemoryEntry(id="low", namespace="n", tier=Tier.SEMANTIC, text="x", quality=0.29)
    result = store.put(low)
    assert not result.stored
    assert "below floor 0.300" in (result.reason or "")
    assert store.get("low") is None


def test_freeze_makes_every_write_raise_and_changes_nothing(engine: sa.Engine) -> None:
    ledger = MemoryLedger(engine)
    ledger.ensure_agent("agent")
    ledger.store.put_many(_entries(3))
    before = ledger.store.entries("role:r1")
    posterior = ledger.bandit_state("agent")
    ledger.freeze()
    with pytest.raises(FrozenError):
        ledger.store.put(_entries(5)[4])
    with pytest.raises(FrozenError):
        ledger.store.set_state("e0", EntryState.RETIRED)
    with pytest.raises(FrozenError):
        ledger.store.mark_window("role:r1", "w")
    with pytest.raises(FrozenError):
        ledger.record_episodes("agent", "ns", [EpisodeInput("t", 0.5, 0.9, policy="none")])
    with pytest.raises(FrozenError):
        ledger.add_policy("agent", default_policies()[0], "x")
    with pytest.raises(FrozenError):
        ledger.store.distill("role:r1", [(0, 10)])
    assert ledger.store.entries("role:r1") == before
    assert ledger.bandit_state("agent") == posterior
    assert ledger.select_policy("agent").name in {p.name for p in default_policies()}


def test_distillation_matches_in_memory_and_is_idempotent(engine: sa.Engine) -> None:
    ns = "role:r1"
    eps = [
        MemoryEntry(
            id=f"epi:{ns}:{i}",
            namespace=ns,
            tier=Tier.EPISODIC,
            text=f"ep {i}",
            tags=("momentum",) if i % 2 else ("gap",),
            quality=0.8,
            created_episode=i,
            outcome=0.5 if i % 2 else -0.5,
        )
        for i in range(10)
    ]
    ref = InMemoryStore()
    for e in eps:
        ref.put(e)
    expected = distill_window(ref, ns, 0, 10)
    store = LedgerMemoryStore(engine)
    store.put_many(eps)
    (report,) = store.distill(ns, [(0, 10)])
    assert report.written == expected.written
    assert report.promoted == expected.promoted
    assert report.promoted  # support 5, confidence 1.0 -> candidate rule
    promoted = store.get(report.promoted[0])
    assert promoted is not None
    assert promoted.state is EntryState.CANDIDATE
    (again,) = store.distill(ns, [(0, 10)])
    assert again.already_done
    assert not again.written
    with engine.connect() as conn:
        n = conn.execute(sa.text("SELECT count(*) FROM memory_entries")).scalar()
    assert n == 10 + len(expected.written) + len(expected.promoted)


def test_bandit_round_trip_priors_updates_and_reproducible_selection(engine: sa.Engine) -> None:
    ledger = MemoryLedger(engine, seed=7, schedule=LearningSchedule(warmup_episodes=2))
    policies = ledger.ensure_agent("agent")
    state = ledger.bandit_state("agent")
    assert state == BanditState.initial([p.name for p in policies])
    picks = [ledger.select_policy("agent", step=i).name for i in range(5)]
    again = MemoryLedger(engine, seed=7)
    assert [again.select_policy("agent", step=i).name for i in range(5)] == picks
    report = ledger.record_episodes(
        "agent",
        "ns",
        [EpisodeInput(f"e{i}", 1.0, 0.9, policy="full_detailed") for i in range(4)],
    )
    assert report.bandit_updates == {"full_detailed": 2}  # first two are warm-up
    state = MemoryLedger(engine).bandit_state("agent")
    i = state.index("full_detailed")
    assert state.alpha[i] == pytest.approx(3.0)
    assert state.beta[i] == pytest.approx(1.0)
    assert MemoryLedger(engine).pulls("agent")["full_detailed"] == 2
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM episodes")).scalar() == 4


def test_evolution_gate_adds_one_policy_when_rewards_are_poor(engine: sa.Engine) -> None:
    ledger = MemoryLedger(engine)
    ledger.ensure_agent("agent")
    eps = [EpisodeInput(f"e{i}", -1.0, 0.9, policy="compressed") for i in range(100)]
    report = ledger.record_episodes("agent", "ns", eps)
    assert len(report.evolved) == 1
    names = [p.name for p in ledger.policies("agent")]
    assert names[-1] == report.evolved[0]
    assert len(names) == 6
    assert ledger.bandit_state("agent").arms[-1] == report.evolved[0]


def test_recording_distils_closing_windows_past_warm_up(engine: sa.Engine) -> None:
    ledger = MemoryLedger(engine)
    ledger.ensure_agent("agent")
    report = ledger.record_episodes(
        "agent", "ns", [EpisodeInput(f"e{i}", 0.5, 0.9, tags=("t",)) for i in range(25)]
    )
    assert report.windows_closed == ("ns:episodes:0-10", "ns:episodes:10-20")
    assert [d.window_key for d in report.distilled] == ["ns:episodes:10-20"]  # 0-10 is warm-up
    assert ledger.store.has_window("ns", "ns:episodes:10-20")
    assert not ledger.store.has_window("ns", "ns:episodes:0-10")
    assert ledger.namespaces_due() == {}


def test_due_windows_follow_warm_up_and_ten_new_episodes(engine: sa.Engine) -> None:
    ledger = MemoryLedger(engine)
    ledger.ensure_agent("agent")
    ledger.record_episodes(
        "agent",
        "ns",
        [EpisodeInput(f"e{i}", 0.5, 0.9, tags=("t",)) for i in range(25)],
        distill=False,
    )
    assert ledger.namespaces_due() == {"ns": [(10, 20)]}
    reports = ledger.distill_due()
    assert [r.window_key for r in reports] == ["ns:episodes:10-20"]
    assert ledger.namespaces_due() == {}
    ledger.record_episodes(
        "agent", "ns", [EpisodeInput(f"f{i}", 0.5, 0.9) for i in range(5)], distill=False
    )
    assert ledger.namespaces_due() == {"ns": [(20, 30)]}


def test_a_namespace_learns_for_one_agent(engine: sa.Engine) -> None:
    ledger = MemoryLedger(engine)
    ledger.record_episodes("agent", "ns", [EpisodeInput("a", 0.5, 0.9, policy="none")])
    ledger.ensure_agent("other")
    with pytest.raises(ValueError, match="learns for agent 'agent'"):
        ledger.record_episodes("other", "ns", [EpisodeInput("b", 0.5, 0.9, policy="none")])
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM episodes")).scalar() == 1


def test_a_bad_episode_names_itself_and_the_batch_writes_nothing(engine: sa.Engine) -> None:
    ledger = MemoryLedger(engine)
    good = [EpisodeInput(f"e{i}", 0.5, 0.9, policy="none") for i in range(3)]
    with pytest.raises(KeyError, match=r"episode 3 of the batch .*unknown arm 'nope'"):
        ledger.record_episodes("agent", "ns", [*good, EpisodeInput("x", 0.5, 0.9, policy="nope")])
    with pytest.raises(ValueError, match=r"episode 1 of the batch .*finite"):
        ledger.record_episodes("agent", "ns", [good[0], EpisodeInput("x", float("nan"), 0.9)])
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM episodes")).scalar() == 0
    assert ledger.store.entries("ns") == ()
    assert ledger.record_episodes("agent", "ns", good).first_episode == 0


def test_the_pending_learning_state_stays_within_one_gate_span(engine: sa.Engine) -> None:
    ledger = MemoryLedger(engine)
    eps = [EpisodeInput(f"e{i}", 0.0, 0.9, policy="compressed") for i in range(237)]
    ledger.record_episodes("agent", "ns", eps)
    with engine.connect() as conn:
        raw = conn.execute(sa.text("SELECT learning FROM memory_namespaces")).scalar()
    assert raw is not None
    state = json.loads(raw) if isinstance(raw, str) else raw
    assert state["agent"] == "agent"
    assert [e[0] for e in state["recent"]] == list(range(190, 237))  # 230 + 10 - 50 on
    assert {e[1] for e in state["recent"]} == {"compressed"}
    assert all(e[2] == 0.5 for e in state["recent"])


def test_two_first_recalls_of_one_agent_at_once_share_one_set_of_policies(
    engine: sa.Engine,
) -> None:
    import threading

    barrier = threading.Barrier(8)
    results: list[tuple[str, ...]] = []
    errors: list[BaseException] = []

    def first_use() -> None:
        ledger = MemoryLedger(engine)
        barrier.wait()  # every thread finds no policies, then all insert at once
        try:
            results.append(tuple(p.name for p in ledger.ensure_agent("racer")))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    names = tuple(p.name for p in default_policies())
    assert results == [names] * 8
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text("SELECT COUNT(*) FROM retrieval_policies WHERE agent_id = 'racer'")
        ).scalar_one()
    assert rows == len(names)
