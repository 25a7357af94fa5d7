"""Which analysis roles can act on a decision, given what the point-in-time guard refused.

The D-full snapshots (fundamentals, analyst, options, earnings) post-date every 2025
decision, so the guard refuses all of them; a role whose required evidence was
refused abstains and says so in the decision's notes, and one whose evidence is only
missing acts on prices. Everything here is cached: the same 40 sources are judged at
every bar of every run.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from reflexmem.ael.pit_guard import Evidence, Refusal, load_dfull_snapshots
from reflexmem.prices.panel import default_dfull_root
from reflexmem.registry import load_registry

ROLE_IDS = ("valuation", "momentum", "cycle_analysis", "risk")
PRICE_EVIDENCE = frozenset({"price_history", "technicals", "quant_risk"})
"""Evidence kinds derived from the visible closes, point in time by construction."""


@functools.cache
def role_requirements() -> dict[str, tuple[str, ...]]:
    """Evidence kinds each analysis role requires, from the shipped role registry."""
    registry = load_registry()
    return {
        role: tuple(e.kind for e in registry.get(role).policy.required_evidence)
        for role in ROLE_IDS
    }


@functools.lru_cache(maxsize=4096)
def source_kind(source: str) -> str:
    """Kind of an evidence source: `snapshots/<kind>/<T>` -> kind, else the source."""
    parts = source.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "snapshots" else source


@functools.cache
def role_notes(admitted: frozenset[str], refused: frozenset[str]) -> tuple[str, tuple[str, ...]]:
    """One note line on the roles and the ids of those that act, for these verdicts."""
    parts: list[str] = []
    acting: list[str] = []
    for role, kinds in role_requirements().items():
        side = [k for k in kinds if k not in PRICE_EVIDENCE]
        blocked = [k for k in side if k in refused and k not in admitted]
        missing = [k for k in side if k not in refused and k not in admitted]
        if blocked:
            parts.append(f"{role}=abstains ({', '.join(blocked)} refused by point-in-time guard)")
            continue
        acting.append(role)
        parts.append(f"{role}=prices only ({', '.join(missing)} unavailable)" if missing else role)
    return "roles: " + "; ".join(parts), tuple(acting)


def refusal_notes(refused: Sequence[Refusal]) -> tuple[str, ...]:
    """Notes for a decision: what the guard refused, an example, and the roles' verdict."""
    if not refused:
        return (role_notes(frozenset(), frozenset())[0],)
    kinds: dict[str, int] = {}
    for r in refused:
        k = source_kind(r.source)
        kinds[k] = kinds.get(k, 0) + 1
    listed = ", ".join(f"{k} x{n}" for k, n in kinds.items())
    line, _ = role_notes(frozenset(), frozenset(kinds))
    return (
        f"point-in-time guard refused {len(refused)} items ({listed})",
        refused[0].describe(),
        line,
    )


@functools.cache
def default_evidence() -> tuple[Evidence, ...]:
    """The D-full snapshots (all refused for 2025 decisions), or none if not shipped."""
    root = default_dfull_root()
    return load_dfull_snapshots(root) if (root / "snapshots").is_dir() else ()


def evidence_for(tickers: Sequence[str]) -> tuple[Evidence, ...]:
    """The D-full snapshots of these tickers."""
    wanted = set(tickers)
    return tuple(e for e in default_evidence() if e.source.rsplit("/", 1)[-1] in wanted)
