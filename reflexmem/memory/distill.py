"""Semantic distillation of an episode window, and promotion of strong patterns.

A pattern is a tag together with the direction of the outcomes of the episodes that
carried it: "episodes tagged ``momentum`` mostly ended positive". Tags are the unit
because they are what the agent itself chose to say about an episode; free text would
need a language model to aggregate, which the domain core must not depend on.

Distillation is idempotent per window: the store records every processed window key,
and every entry written from a window has an id derived from it, so neither a re-run
nor a crash half-way through a window can write a pattern twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.store import MemoryStore

WINDOW_SIZE = 10
MIN_PATTERN_SUPPORT = 2
"""A pattern needs at least this many episodes: one episode is an anecdote."""

PROMOTE_MIN_SUPPORT = 5
PROMOTE_MIN_CONFIDENCE = 0.8


class Polarity(StrEnum):
    """Which way the outcomes of a pattern's episodes went."""

    POSITIVE = "positive"
    NEGATIVE = "negative"


@dataclass(frozen=True, slots=True)
class DistillConfig:
    """Thresholds of distillation and promotion (the window itself is the caller's)."""

    min_support: int = MIN_PATTERN_SUPPORT
    promote_min_support: int = PROMOTE_MIN_SUPPORT
    promote_min_confidence: float = PROMOTE_MIN_CONFIDENCE

    def __post_init__(self) -> None:
        if self.min_support < 1 or self.promote_min_support < 1:
            raise ValueError("supports must be >= 1")
        if not 0.0 <= self.promote_min_confidence <= 1.0:
            raise ValueError("promote_min_confidence must be in [0, 1]")


@dataclass(frozen=True, slots=True)
class Pattern:
    """Outcome statistics of the episodes of one window that carried one tag.

    ``support`` counts those episodes; ``confidence`` is the share of them whose outcome
    went the pattern's way (neutral outcomes count against it); ``quality`` is the mean
    quality of the supporting episodes, so a pattern is only as credible as its sources.
    """

    tag: str
    polarity: Polarity
    support: int
    agreeing: int
    confidence: float
    mean_outcome: float
    quality: float
    source_ids: tuple[str, ...]


def window_bounds(window_index: int, size: int = WINDOW_SIZE) -> tuple[int, int]:
    """Episodes [start, end) of a zero-based window."""
    return window_index * size, (window_index + 1) * size


def window_key(namespace: str, start: int, end: int) -> str:
    """Name one namespace's episode window; this key is what makes re-runs no-ops."""
    return f"{namespace}:episodes:{start}-{end}"


def find_patterns(episodes: Sequence[MemoryEntry], min_support: int) -> tuple[Pattern, ...]:
    """Patterns with at least ``min_support`` episodes and a clear majority direction.

    A tag whose episodes split evenly between wins and losses says nothing about the
    tag, so it yields no pattern. Patterns come sorted by tag for reproducible ids.
    """
    by_tag: dict[str, list[MemoryEntry]] = defaultdict(list)
    for e in episodes:
        if e.outcome is None:
            continue
        for tag in dict.fromkeys(e.tags):
            by_tag[tag].append(e)
    patterns: list[Pattern] = []
    for tag in sorted(by_tag):
        group = by_tag[tag]
        if len(group) < min_support:
            continue
        wins = sum(1 for e in group if e.outcome is not None and e.outcome > 0)
        losses = sum(1 for e in group if e.outcome is not None and e.outcome < 0)
        if wins == losses:
            continue
        polarity = Polarity.POSITIVE if wins > losses else Polarity.NEGATIVE
        agreeing = max(wins, losses)
        outcomes = [e.outcome for e in group if e.outcome is not None]
        patterns.append(
            Pattern(
                tag=tag,
                polarity=polarity,
                support=len(group),
                agreeing=agreeing,
                confidence=agreeing / len(group),
                mean_outcome=sum(outcomes) / len(outcomes),
                quality=sum(e.quality for e in group) / len(group),
                source_ids=tuple(e.id for e in group),
            )
        )
    return tuple(patterns)


@dataclass(frozen=True, slots=True)
class DistillReport:
    """What distilling one window did; ``already_done`` means it wrote nothing."""

    namespace: str
    window_key: str
    start: int
    end: int
    already_done: bool
    patterns: tuple[Pattern, ...] = ()
    written: tuple[str, ...] = ()
    promoted: tuple[str, ...] = ()
    refused: tuple[tuple[str, str], ...] = ()
    confirmed: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    followed: tuple[str, ...] = ()


def semantic_id(key: str, pattern: Pattern) -> str:
    """Entry id of a pattern distilled from one window."""
    return f"sem:{key}:{pattern.tag}:{pattern.polarity.value}"


def procedural_id(namespace: str, tag: str, polarity: str) -> str:
    """Entry id of the rule for a pattern: one per namespace, tag and direction."""
    return f"proc:{namespace}:{tag}:{polarity}"


def _semantic_entry(namespace: str, key: str, end: int, p: Pattern) -> MemoryEntry:
    text = (
        f"Episodes tagged '{p.tag}' mostly ended {p.polarity.value}: {p.agreeing} of "
        f"{p.support} (mean outcome {p.mean_outcome:+.2f})."
    )
    return MemoryEntry(
        id=semantic_id(key, p),
        namespace=namespace,
        tier=Tier.SEMANTIC,
        text=text,
        tags=(p.tag, f"polarity:{p.polarity.value}"),
        quality=p.quality,
        created_episode=end - 1,
        source_ids=p.source_ids,
        support=p.support,
        confidence=p.confidence,
        window_key=key,
        outcome=max(-1.0, min(1.0, p.mean_outcome)),
    )


def _rule_entry(semantic: MemoryEntry, tag: str, polarity: str) -> MemoryEntry:
    advice = "favour it" if polarity == Polarity.POSITIVE else "avoid it or size down"
    text = (
        f"Rule: when '{tag}' applies, expect a {polarity} outcome and {advice} "
        f"(support {semantic.support}, confidence {semantic.confidence:.2f})."
    )
    return MemoryEntry(
        id=procedural_id(semantic.namespace, tag, polarity),
        namespace=semantic.namespace,
        tier=Tier.PROCEDURAL,
        text=text,
        tags=semantic.tags,
        quality=semantic.quality,
        created_episode=semantic.created_episode,
        source_ids=(semantic.id,),
        state=EntryState.CANDIDATE,
        support=semantic.support,
        confidence=semantic.confidence,
        window_key=semantic.window_key,
        outcome=semantic.outcome,
    )


def promotable(entry: MemoryEntry, config: DistillConfig) -> bool:
    """Whether a semantic pattern is strong enough to become a candidate rule."""
    return (
        entry.tier is Tier.SEMANTIC
        and entry.support >= config.promote_min_support
        and entry.confidence >= config.promote_min_confidence
    )


def distill_window(
    store: MemoryStore,
    namespace: str,
    start: int,
    end: int,
    config: DistillConfig | None = None,
) -> DistillReport:
    """Distil episodes [start, end) of a namespace and promote strong patterns.

    Promoted rules are written as ``candidate`` entries: they wait for shadow
    evaluation, and recall ignores them until then. A pattern that already has a rule
    (candidate or not) in the namespace is not promoted again.
    """
    cfg = config if config is not None else DistillConfig()
    key = window_key(namespace, start, end)
    if store.has_window(namespace, key):
        return DistillReport(namespace, key, start, end, already_done=True)
    episodes = [
        e for e in store.entries(namespace, (Tier.EPISODIC,)) if start <= e.created_episode < end
    ]
    patterns = find_patterns(episodes, cfg.min_support)
    written: list[str] = []
    promoted: list[str] = []
    refused: list[tuple[str, str]] = []
    for pattern in patterns:
        semantic = _semantic_entry(namespace, key, end, pattern)
        result = store.put(semantic)
        if not result.stored:
            refused.append((semantic.id, result.reason or "refused"))
            continue
        written.append(semantic.id)
        if not promotable(semantic, cfg):
            continue
        rule = _rule_entry(semantic, pattern.tag, pattern.polarity.value)
        if store.get(rule.id) is not None:
            continue
        result = store.put(rule)
        if result.stored:
            promoted.append(rule.id)
        else:
            refused.append((rule.id, result.reason or "refused"))
    store.mark_window(namespace, key)
    return DistillReport(
        namespace,
        key,
        start,
        end,
        already_done=False,
        patterns=patterns,
        written=tuple(written),
        promoted=tuple(promoted),
        refused=tuple(refused),
    )
