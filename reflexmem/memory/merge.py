"""Distillation that merges repeated lessons into one pattern per lesson, window by window.

The trading stream repeats itself: one role makes the same mistake on the same symbol
many times, and each time reflection words the same lesson. Window-local patterns (see
`distill.py`) would turn that into one near-identical semantic entry per window. Here
every pattern tag (e.g. `pattern:<lesson key>`, chosen by the caller) has one lineage:
each window that carries the tag writes a new *version* whose counts are cumulative
(support, wins, losses, quality, mean outcome, first and last episode), and the
version it extends becomes `superseded`. Versions are never edited, so a recall "as of"
a past time can still see the version that was current then.

Lessons are outcome-defined (reflection words one only after a loss it can blame), so
a lesson lineage describes what went wrong and is recalled as such, but it never
becomes a rule: "went against its signal and lost" would support "loses" by
construction. Rules come from conditions known before the outcome, tested against the
role's other episodes and confirmed on later ones (`outcome_rules.py`); each window
runs both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.distill import (
    DistillConfig,
    DistillReport,
    Pattern,
    Polarity,
    distill_window,
    window_key,
)
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.outcome_rules import distil_conditions
from reflexmem.memory.rule_config import RuleConfig
from reflexmem.memory.store import MemoryStore

SCOPE_PREFIXES = ("symbol:", "scenario:")
"""Tags that say which cases a pattern is about; recall filters on them."""


def _identity(text: str) -> str:
    return text


@dataclass(frozen=True)
class MergeConfig:
    """Which tags form lesson patterns, their support, and the rules' thresholds.

    `min_support` (2: one episode is an anecdote) makes a lesson lineage recallable;
    `rules` holds every threshold of condition patterns and rules. `gist` turns an
    episode's text into the wording the pattern keeps (e.g. without the case's numbers).
    """

    tag_prefix: str = "pattern:"
    min_support: int = 2
    rules: RuleConfig = field(default_factory=RuleConfig)
    gist: Callable[[str], str] = field(default=_identity, compare=False)


@dataclass
class _Group:
    episodes: list[MemoryEntry] = field(default_factory=list)

    @property
    def wins(self) -> int:
        return sum(1 for e in self.episodes if e.outcome is not None and e.outcome > 0)

    @property
    def losses(self) -> int:
        return sum(1 for e in self.episodes if e.outcome is not None and e.outcome < 0)


def _polarity(wins: int, losses: int) -> Polarity | None:
    if wins == losses:
        return None
    return Polarity.POSITIVE if wins > losses else Polarity.NEGATIVE


def _scope(tags: Sequence[str]) -> str:
    parts = [t.split(":", 1)[1] for t in tags if t.startswith(SCOPE_PREFIXES)]
    return f" [{', '.join(parts)}]" if parts else ""


def _lineage(store: MemoryStore, namespace: str, tier: Tier) -> dict[str, MemoryEntry]:
    """The newest live version per pattern tag (the tag is each version's first tag)."""
    live = (EntryState.ACTIVE, EntryState.CANDIDATE)
    out: dict[str, MemoryEntry] = {}
    for entry in store.entries(namespace, (tier,), live):
        tag = entry.tags[0] if entry.tags else ""
        if tag not in out or entry.created_episode >= out[tag].created_episode:
            out[tag] = entry
    return out


def _merged(
    namespace: str,
    tag: str,
    group: _Group,
    prev: MemoryEntry | None,
    start: int,
    end: int,
    cfg: MergeConfig,
) -> MemoryEntry:
    n = len(group.episodes)
    support = n + (prev.support if prev else 0)
    wins = group.wins + (prev.wins if prev else 0)
    losses = group.losses + (prev.losses if prev else 0)
    q_sum = sum(e.quality for e in group.episodes) + (prev.quality * prev.support if prev else 0)
    o_sum = sum(e.outcome or 0.0 for e in group.episodes) + (
        (prev.outcome or 0.0) * prev.support if prev else 0.0
    )
    first = min(e.created_episode for e in group.episodes)
    if prev is not None and prev.first_episode is not None:
        first = min(first, prev.first_episode)
    last = max(e.created_episode for e in group.episodes)
    common = set(group.episodes[0].tags)
    for e in group.episodes[1:]:
        common &= set(e.tags)
    if prev is not None:  # a lineage's scope only narrows: it must hold for every source
        common &= set(prev.tags)
    scope = sorted(t for t in common if t != tag and not t.startswith("polarity:"))
    polarity = _polarity(wins, losses)
    tags = [tag, *scope, *([f"polarity:{polarity.value}"] if polarity else [])]
    gist = cfg.gist(group.episodes[0].text)
    mean = max(-1.0, min(1.0, o_sum / support))
    text = (
        f"{gist} (seen {support}x{_scope(scope)}: {wins} won, {losses} lost, mean outcome "
        f"{mean:+.2f}; episodes {first}-{last})"
    )
    live = support >= cfg.min_support and polarity is not None
    return MemoryEntry(
        id=f"sem:{namespace}:{tag}@{end}",
        namespace=namespace,
        tier=Tier.SEMANTIC,
        text=text,
        tags=tuple(tags),
        quality=min(1.0, q_sum / support),
        created_episode=end - 1,
        source_ids=tuple(
            dict.fromkeys(s for e in group.episodes for s in (e.source_ids or (e.id,)))
        )
        + ((prev.id,) if prev else ()),
        state=EntryState.ACTIVE if live else EntryState.CANDIDATE,
        support=support,
        confidence=max(wins, losses) / support,
        window_key=window_key(namespace, start, end),
        outcome=mean,
        wins=wins,
        losses=losses,
        first_episode=first,
    )


def distill_merged(
    store: MemoryStore,
    namespace: str,
    start: int,
    end: int,
    config: MergeConfig | None = None,
) -> DistillReport:
    """Extend every lesson lineage the window carries; test, form, confirm rules."""
    cfg = config or MergeConfig()
    key = window_key(namespace, start, end)
    if store.has_window(namespace, key):
        return DistillReport(namespace, key, start, end, already_done=True)
    episodes = [e for e in store.entries(namespace, (Tier.EPISODIC,)) if e.outcome is not None]
    groups: dict[str, _Group] = {}
    for e in episodes:
        if start <= e.created_episode < end:
            for tag in dict.fromkeys(e.tags):
                if tag.startswith(cfg.tag_prefix):
                    groups.setdefault(tag, _Group()).episodes.append(e)
    current = _lineage(store, namespace, Tier.SEMANTIC)
    patterns: list[Pattern] = []
    written: list[str] = []
    refused: list[tuple[str, str]] = []
    for tag in sorted(groups):
        prev = current.get(tag)
        merged = _merged(namespace, tag, groups[tag], prev, start, end, cfg)
        result = store.put(merged)
        if not result.stored:
            refused.append((merged.id, result.reason or "refused"))
            continue
        if prev is not None:
            done = EntryState.SUPERSEDED if prev.state is EntryState.ACTIVE else EntryState.RETIRED
            store.set_state(prev.id, done)
        polarity = _polarity(merged.wins, merged.losses)
        if polarity is not None:
            patterns.append(
                Pattern(
                    tag=tag,
                    polarity=polarity,
                    support=merged.support,
                    agreeing=max(merged.wins, merged.losses),
                    confidence=merged.confidence,
                    mean_outcome=merged.outcome or 0.0,
                    quality=merged.quality,
                    source_ids=merged.source_ids,
                )
            )
        written.append(merged.id)
    rules = distil_conditions(store, namespace, episodes, start, end, cfg.rules)
    store.mark_window(namespace, key)
    return DistillReport(
        namespace,
        key,
        start,
        end,
        already_done=False,
        patterns=tuple(patterns),
        written=(*written, *rules.written),
        promoted=tuple(rules.promoted),
        refused=(*refused, *rules.refused),
        confirmed=tuple(rules.confirmed),
        rejected=tuple(rules.rejected),
        followed=tuple(rules.followed),
    )


def distil_window(
    store: MemoryStore,
    namespace: str,
    start: int,
    end: int,
    config: DistillConfig | MergeConfig | None = None,
) -> DistillReport:
    """Distil one window: merged lineages for a `MergeConfig`, window-local patterns else."""
    if isinstance(config, MergeConfig):
        return distill_merged(store, namespace, start, end, config)
    return distill_window(store, namespace, start, end, config)
