"""Retrieval policies: data saying what to recall and how much context it may take.

A policy is an arm of the bandit, so it has to be plain, comparable and serialisable:
the bandit learns which policy helps, the evolution gate derives new ones, and a ledger
will persist them. Recall itself (:func:`retrieve`) is one function for every policy,
so policies differ only in their data and can never bypass the rule that candidates and
other namespaces are not recalled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.ranking import DEFAULT_TOP_K, IdentityMemo, MatchFn, RankedEntry, rank
from reflexmem.memory.store import MemoryStore

COMPRESSED_ENTRY_TOKENS = 24
"""Longest a single entry may be in the compressed format, in whitespace tokens."""

MIN_TRUNCATED_TOKENS = 4
"""An entry cut to fewer tokens than this says nothing useful, so it is dropped."""

MAX_EVOLVED_TOP_K = 20
MAX_EVOLVED_BUDGET = 2000


def count_tokens(text: str) -> int:
    """Whitespace tokens: crude, but model-independent and exactly reproducible.

    Budgets are therefore in words rather than model tokens; a model tokenizer typically
    counts 1.3-1.5 times as many for English prose, which the budgets below allow for.
    """
    return len(text.split())


class RenderFormat(StrEnum):
    """How retrieved entries are written into the agent's context."""

    DETAILED = "detailed"
    COMPRESSED = "compressed"


@dataclass(frozen=True, slots=True)
class RetrievalPolicy:
    """One way of recalling memory.

    ``recent_window`` limits recall to entries created in the last that many episodes
    before the current one (None: no limit); ``parent`` and ``generation`` trace an
    evolved policy back to the arm it was derived from.
    """

    name: str
    tiers: tuple[Tier, ...]
    format: RenderFormat = RenderFormat.DETAILED
    top_k: int = DEFAULT_TOP_K
    token_budget: int = 500
    recent_window: int | None = None
    parent: str | None = None
    generation: int = 0

    def __post_init__(self) -> None:
        if not self.name:
            raise ValueError("policy name must not be empty")
        tiers = tuple(Tier(t) for t in self.tiers)
        if len(set(tiers)) != len(tiers):
            raise ValueError(f"policy {self.name!r} lists a tier twice: {tiers}")
        object.__setattr__(self, "tiers", tiers)
        object.__setattr__(self, "format", RenderFormat(self.format))
        if self.top_k < 0 or self.token_budget < 0:
            raise ValueError(f"policy {self.name!r}: top_k and token_budget must be >= 0")
        if self.recent_window is not None and self.recent_window < 1:
            raise ValueError(f"policy {self.name!r}: recent_window must be >= 1 or None")

    @property
    def retrieves_nothing(self) -> bool:
        """True for a policy that can never put anything into the context."""
        return not self.tiers or self.top_k == 0 or self.token_budget == 0

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "name": self.name,
            "tiers": [t.value for t in self.tiers],
            "format": self.format.value,
            "top_k": self.top_k,
            "token_budget": self.token_budget,
            "recent_window": self.recent_window,
            "parent": self.parent,
            "generation": self.generation,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RetrievalPolicy:
        """Rebuild a policy from :meth:`to_dict` output."""
        window = data.get("recent_window")
        parent = data.get("parent")
        return cls(
            name=str(data["name"]),
            tiers=tuple(Tier(t) for t in data["tiers"]),
            format=RenderFormat(data.get("format", RenderFormat.DETAILED)),
            top_k=int(data.get("top_k", DEFAULT_TOP_K)),
            token_budget=int(data.get("token_budget", 500)),
            recent_window=None if window is None else int(window),
            parent=None if parent is None else str(parent),
            generation=int(data.get("generation", 0)),
        )


ALL_TIERS = (Tier.PROCEDURAL, Tier.SEMANTIC, Tier.EPISODIC)

NONE = RetrievalPolicy("none", tiers=(), format=RenderFormat.COMPRESSED, top_k=0, token_budget=0)
RECENT_WINDOW = RetrievalPolicy(
    "recent_window",
    tiers=(Tier.EPISODIC,),
    format=RenderFormat.DETAILED,
    top_k=5,
    token_budget=300,
    recent_window=20,
)
FULL_DETAILED = RetrievalPolicy(
    "full_detailed", tiers=ALL_TIERS, format=RenderFormat.DETAILED, top_k=5, token_budget=800
)
COMPRESSED = RetrievalPolicy(
    "compressed",
    tiers=(Tier.PROCEDURAL, Tier.SEMANTIC),
    format=RenderFormat.COMPRESSED,
    top_k=5,
    token_budget=150,
)
AGGRESSIVE_LEARNER = RetrievalPolicy(
    "aggressive_learner",
    tiers=ALL_TIERS,
    format=RenderFormat.DETAILED,
    top_k=10,
    token_budget=1200,
)


def default_policies() -> tuple[RetrievalPolicy, ...]:
    """Return the five starting arms, in a fixed order so bandit indices reproduce."""
    return (NONE, RECENT_WINDOW, FULL_DETAILED, COMPRESSED, AGGRESSIVE_LEARNER)


def _detailed_line(item: RankedEntry) -> str:
    e = item.entry
    head = f"[{e.tier.value} q={e.quality:.2f} ep={e.created_episode}"
    if e.tier is not Tier.EPISODIC:
        head += f" n={e.support} conf={e.confidence:.2f}"
    if e.outcome is not None:
        head += f" s={e.outcome:+.2f}"
    line = f"{head}] {' '.join(e.text.split())}"
    if e.tags:
        line += f" tags={','.join(e.tags)}"
    return line


def _compressed_line(item: RankedEntry) -> str:
    words = item.entry.text.split()
    if len(words) > COMPRESSED_ENTRY_TOKENS:
        words = [*words[: COMPRESSED_ENTRY_TOKENS - 1], words[COMPRESSED_ENTRY_TOKENS - 1] + "…"]
    return "- " + " ".join(words)


def render(policy: RetrievalPolicy, ranked: Sequence[RankedEntry]) -> tuple[str, int]:
    """Render ranked entries into context text; also return how many it includes.

    Entries go in rank order, one line each, while they fit the token budget; the first
    one that does not fit is cut to the remaining budget (if at least a few tokens are
    left) and ends the context, so ``count_tokens(text) <= policy.token_budget`` always.
    """
    if policy.retrieves_nothing:
        return "", 0
    to_line = _detailed_line if policy.format is RenderFormat.DETAILED else _compressed_line
    lines: list[str] = []
    used = 0
    for item in ranked:
        line = to_line(item)
        tokens = count_tokens(line)
        if used + tokens <= policy.token_budget:
            lines.append(line)
            used += tokens
            continue
        room = policy.token_budget - used
        if room >= MIN_TRUNCATED_TOKENS:
            words = line.split()[:room]
            words[-1] += "…"
            lines.append(" ".join(words))
        break
    return "\n".join(lines), len(lines)


@dataclass(frozen=True, slots=True)
class Retrieval:
    """What one policy recalled for one query: the entries, their context, its size."""

    policy: str
    ranked: tuple[RankedEntry, ...]
    context: str
    tokens: int

    @property
    def entries(self) -> tuple[MemoryEntry, ...]:
        """The recalled entries, best first."""
        return tuple(r.entry for r in self.ranked)


def candidates(
    store: MemoryStore, namespace: str, policy: RetrievalPolicy, now_episode: int
) -> tuple[MemoryEntry, ...]:
    """Select the active entries a policy may rank: its tiers, window and namespace.

    The state and namespace checks are repeated here rather than trusted to the store,
    because recalling a candidate rule or another agent's memory is the one mistake
    recall must never make, whatever store implementation is plugged in.
    """
    if policy.retrieves_nothing:
        return ()
    pool = store.entries(namespace, policy.tiers, states=(EntryState.ACTIVE,))
    oldest = None if policy.recent_window is None else now_episode - policy.recent_window
    memo_key = (namespace, policy.tiers, oldest)
    remembered = _CANDIDATES.get(pool)
    if remembered is not None and remembered[0] == memo_key:
        return remembered[1]
    wanted = frozenset(policy.tiers)
    chosen = tuple(
        e
        for e in pool
        if e.state is EntryState.ACTIVE
        and e.namespace == namespace
        and e.tier in wanted
        and (oldest is None or e.created_episode >= oldest)
    )
    _CANDIDATES.put(pool, (memo_key, chosen))
    return chosen


_CANDIDATES: IdentityMemo[
    Sequence[MemoryEntry], tuple[tuple[str, tuple[Tier, ...], int | None], tuple[MemoryEntry, ...]]
] = IdentityMemo(size=8)


def retrieve(
    store: MemoryStore,
    namespace: str,
    policy: RetrievalPolicy,
    query: str,
    *,
    now_episode: int,
    match_fn: MatchFn | None = None,
) -> Retrieval:
    """Rank a policy's candidates for ``query`` and render them within its budget."""
    pool = candidates(store, namespace, policy, now_episode)
    ranked = rank(query, pool, now_episode=now_episode, match_fn=match_fn, top_k=policy.top_k)
    context, included = render(policy, ranked)
    return Retrieval(
        policy=policy.name,
        ranked=ranked[:included],
        context=context,
        tokens=count_tokens(context),
    )


def derive_policy(best: RetrievalPolicy, existing: Iterable[str]) -> RetrievalPolicy:
    """Derive a new arm deterministically from the best one, for the evolution gate.

    The gate fires when recall is not helping enough, so the derived arm recalls more:
    every tier, twice the top-k (at least 5, at most 20), half again the budget (at least
    300, at most 2000), and a recency window twice as long if the parent had one. A
    parent that recalls nothing contributes only its format. The name records parent
    and generation, with a numeric suffix if that name is taken.
    """
    taken = set(existing)
    generation = best.generation + 1
    base = f"{best.name}+g{generation}"
    name, suffix = base, 2
    while name in taken:
        name, suffix = f"{base}.{suffix}", suffix + 1
    window = None if best.recent_window is None else best.recent_window * 2
    return replace(
        best,
        name=name,
        tiers=ALL_TIERS,
        top_k=min(max(best.top_k * 2, DEFAULT_TOP_K), MAX_EVOLVED_TOP_K),
        token_budget=min(max(best.token_budget * 3 // 2, 300), MAX_EVOLVED_BUDGET),
        recent_window=window,
        parent=best.name,
        generation=generation,
    )
