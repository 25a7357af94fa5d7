"""The entries of outcome-tested memory: a condition's pattern version and its rule versions.

`outcome_rules.py` decides *when* a pattern is written and a rule formed, confirmed,
followed or retired; this module says *what* such an entry holds: its id, tags, state,
the figures in `stats` and the text a recall shows (both means, the difference with its
interval, the p-value, loss rates, the confirmation test and the helpful / harmful counts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.blocks import PairBlocks
from reflexmem.memory.contrast import Moments
from reflexmem.memory.entries import MemoryEntry


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def describe(condition: str) -> str:
    """A condition tag in words."""
    kind, _, value = condition.partition(":")
    return {
        "missing": f"required evidence '{value}' missing or stale",
        "against": "the decision went against the role's own signal",
        "direction": f"{value} decisions",
        "symbol": f"decisions on {value}",
        "scenario": f"scenario {value}",
        "regime": f"regime {value}",
        "arm": f"following rule {value}",
    }.get(kind, condition)


def pattern_entry(
    namespace: str,
    condition: str,
    carriers: Moments,
    rest: Moments,
    prev: MemoryEntry | None,
    sources: tuple[str, ...],
    end: int,
    min_support: int,
    screen_p: float,
    blocks: PairBlocks,
) -> MemoryEntry:
    """A condition's lineage version: carriers against the rest; active if it screens.

    The contrast is the block-clustered one (:mod:`reflexmem.memory.blocks`) over the
    lineage's whole history; ``blocks`` holds its sums, kept for the next version.
    """
    c = blocks.contrast(carriers, rest)
    screened = c is not None and min(c.n_in, c.n_out) >= min_support and c.p_value < screen_p
    if c is None:
        text = (
            f"{_sentence(describe(condition))}: {carriers.n} episode(s) over "
            f"{blocks.blocks} block(s), too few to compare."
        )
    else:
        text = (
            f"{_sentence(describe(condition))}: mean outcome {c.mean_in:+.2f} over "
            f"{c.n_in} episodes against {c.mean_out:+.2f} over the role's other {c.n_out} "
            f"(difference {c.effect:+.2f}, 95% CI {c.ci_low:+.2f} to {c.ci_high:+.2f}, "
            f"p={c.p_value:.3g}; loss rate {c.loss_in:.0%} vs {c.loss_out:.0%})."
        )
    return MemoryEntry(
        id=f"sem:{namespace}:{condition}@{end}",
        namespace=namespace,
        tier=Tier.SEMANTIC,
        text=text,
        tags=(condition,),
        quality=1.0,
        created_episode=end - 1,
        source_ids=sources + ((prev.id,) if prev else ()),
        state=EntryState.ACTIVE if screened else EntryState.CANDIDATE,
        support=carriers.n,
        confidence=1.0 - (c.p_value if c else 1.0),
        outcome=max(-1.0, min(1.0, carriers.mean or 0.0)),
        wins=carriers.n - carriers.losses if carriers.n else 0,
        losses=carriers.losses,
        stats={
            "carriers": carriers.as_json(),
            "rest": rest.as_json(),
            "contrast": c.as_json() if c else None,
            "blocks": blocks.as_json(),
        },
    )


def rule_entry(
    pattern: MemoryEntry, state: EntryState, suffix: str, stats: Mapping[str, Any], *sources: str
) -> MemoryEntry:
    """A rule version of the pattern's condition, in `state`, with its figures."""
    condition = pattern.tags[0]
    direction = int(stats["direction"])
    advice = "favour it" if direction > 0 else "avoid it or size down"
    formed = stats["formed"]
    confirm = stats.get("confirm")
    proof = (
        f"confirmed on later episodes: {confirm['effect']:+.2f} "
        f"(95% CI {confirm['ci_low']:+.2f} to {confirm['ci_high']:+.2f}, "
        f"{confirm['n_in']} vs {confirm['n_out']}, one-sided p={confirm['p_value']:.3g} "
        f"at level {confirm['alpha']:.3g})"
        if confirm
        else "awaiting confirmation on later episodes"
    )
    counts = (
        f"; since then {stats['helpful']} helpful, {stats['harmful']} harmful"
        if "helpful" in stats
        else ""
    )
    turned = stats.get("turned")
    if turned:
        counts += (
            f"; retired: since confirmation {turned['effect']:+.2f} "
            f"(p={turned['p_value']:.3g} the other way)"
        )
    text = (
        f"Rule: when {describe(condition)}, outcomes were "
        f"{'better' if direction > 0 else 'worse'} than the role's others by "
        f"{abs(formed['effect']):.2f} where it was formed ({formed['n_in']} vs "
        f"{formed['n_out']}); {proof}{counts}: {advice}."
    )
    return MemoryEntry(
        id=f"proc:{pattern.namespace}:{condition}{suffix}",
        namespace=pattern.namespace,
        tier=Tier.PROCEDURAL,
        text=text,
        tags=(condition, f"polarity:{'positive' if direction > 0 else 'negative'}"),
        quality=pattern.quality,
        created_episode=pattern.created_episode,
        source_ids=(pattern.id, *sources),
        state=state,
        support=pattern.support,
        confidence=pattern.confidence,
        outcome=pattern.outcome,
        wins=int(stats.get("helpful", 0)),
        losses=int(stats.get("harmful", 0)),
        stats=dict(stats),
    )
