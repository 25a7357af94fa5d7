"""Micro-benchmark of the per-episode cost of memory learning.

The AEL benchmark runs thousands of episodes per agent in process, so recall and the
bandit must stay far below the cost of the agent's own step. This measures the hot path
with every tier full (500 entries each, 1500 candidates) and recall always across all
three tiers, which is the most expensive default policy; the bandit still selects among
the default arms so its cost is the real one.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from reflexmem.ledger.enums import Tier
from reflexmem.memory.bandit import ThompsonBandit
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.policies import FULL_DETAILED, candidates, default_policies, render
from reflexmem.memory.ranking import TokenOverlapMatcher, rank
from reflexmem.memory.store import DEFAULT_CAP, InMemoryStore

_VOCABULARY = 400
_WORDS_PER_ENTRY = (8, 24)
_WORDS_PER_QUERY = 6


def _filled_store(rng: np.random.Generator, namespace: str) -> InMemoryStore:
    words = [f"w{i}" for i in range(_VOCABULARY)]
    store = InMemoryStore()
    for tier in Tier:
        for i in range(DEFAULT_CAP):
            n = int(rng.integers(*_WORDS_PER_ENTRY))
            picked = rng.choice(_VOCABULARY, size=n)
            store.put(
                MemoryEntry(
                    id=f"{tier.value}:{i}",
                    namespace=namespace,
                    tier=tier,
                    text=" ".join(words[j] for j in picked),
                    tags=(words[int(rng.integers(_VOCABULARY))],),
                    quality=float(rng.uniform(0.3, 1.0)),
                    created_episode=int(rng.integers(0, 1000)),
                )
            )
    return store


def _run(
    store: InMemoryStore,
    namespace: str,
    episodes: int,
    seed: int,
    write: bool,
) -> tuple[dict[str, int], int]:
    rng = np.random.default_rng(seed + 1)
    matcher = TokenOverlapMatcher()
    bandit = ThompsonBandit([p.name for p in default_policies()], rng=seed)
    queries = [
        " ".join(f"w{j}" for j in rng.choice(_VOCABULARY, size=_WORDS_PER_QUERY))
        for _ in range(episodes)
    ]
    rewards = rng.uniform(0.0, 1.0, size=episodes).tolist()
    names = ("candidates", "ranking", "render", "bandit_select", "bandit_update", "write")
    parts = dict.fromkeys(names, 0)
    clock = time.perf_counter_ns
    recalled = 0
    for episode, query in enumerate(queries):
        now = 1000 + episode
        t0 = clock()
        arm = bandit.select()
        t1 = clock()
        pool = candidates(store, namespace, FULL_DETAILED, now)
        t2 = clock()
        ranked = rank(query, pool, now_episode=now, match_fn=matcher, top_k=FULL_DETAILED.top_k)
        t3 = clock()
        _, included = render(FULL_DETAILED, ranked)
        t4 = clock()
        bandit.update(arm, rewards[episode])
        t5 = clock()
        if write:
            store.put(
                MemoryEntry(
                    id=f"new:{episode}",
                    namespace=namespace,
                    tier=Tier.EPISODIC,
                    text=query,
                    quality=0.8,
                    created_episode=now,
                )
            )
        t6 = clock()
        parts["bandit_select"] += t1 - t0
        parts["candidates"] += t2 - t1
        parts["ranking"] += t3 - t2
        parts["render"] += t4 - t3
        parts["bandit_update"] += t5 - t4
        parts["write"] += t6 - t5
        recalled += included
    return parts, recalled


def _per_episode(parts: dict[str, int], episodes: int) -> dict[str, float]:
    return {name: round(ns / episodes / 1000.0, 2) for name, ns in parts.items()}


def bench_memory(episodes: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Time retrieval, ranking, rendering and bandit select/update per episode.

    ``us_per_episode`` and ``parts_us`` measure recall over an unchanged store, where
    the arrays derived from it are reused between queries. ``with_write`` repeats the
    run with one episodic write per episode (evicting, since the tier is full), which
    is what the learning loop does and which forces those arrays to be rebuilt.
    Wall-clock times vary with the machine; the split between parts is the signal.
    """
    if episodes < 1:
        raise ValueError("episodes must be >= 1")
    namespace = "bench"
    store = _filled_store(np.random.default_rng(seed), namespace)
    parts, recalled = _run(store, namespace, episodes, seed, write=False)
    del parts["write"]
    write_parts, _ = _run(store, namespace, episodes, seed, write=True)
    return {
        "episodes": episodes,
        "seed": seed,
        "entries_per_tier": DEFAULT_CAP,
        "candidates_per_query": DEFAULT_CAP * len(Tier),
        "policy": FULL_DETAILED.name,
        "us_per_episode": round(sum(parts.values()) / episodes / 1000.0, 2),
        "parts_us": _per_episode(parts, episodes),
        "mean_recalled": round(recalled / episodes, 2),
        "with_write": {
            "us_per_episode": round(sum(write_parts.values()) / episodes / 1000.0, 2),
            "parts_us": _per_episode(write_parts, episodes),
        },
    }


if __name__ == "__main__":
    import json

    print(json.dumps(bench_memory(), indent=2))
