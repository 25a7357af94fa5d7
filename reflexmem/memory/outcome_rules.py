"""Patterns and rules that must earn their place on outcomes they were not learned from.

A **condition** is something an episode carried before its outcome was known (a tag with
one of :attr:`RuleConfig.prefixes`: a required evidence kind missing, going against the
role's own signal, the direction, the symbol, the scenario, the market regime, the rule
(arm) an agent followed). Outcome-defined tags (the
reflection class, the lesson) are never conditions: "went against its signal and lost"
would support "loses" by construction.

Per condition, one **semantic lineage** keeps the carriers' outcome moments,
cumulatively, window by window (a new version per window that carried it, the previous
one superseded), together with the contrast against the role's other episodes up to
that window (:mod:`reflexmem.memory.contrast`). The version is ``active`` (recallable)
while the contrast passes the screening level, ``candidate`` otherwise.

A **procedural rule** goes through three steps:

1. *formed*: the lineage's contrast passes screening (two-sided p below
   ``screen_p`` with at least ``min_support`` episodes on each side) and no other
   rule's condition splits the episodes the same way (`_mirrored`). The rule is a
   ``candidate``: recall ignores it.
2. *confirmed or rejected, once*: when ``confirm_support`` carriers (and as many
   others) have arrived **after** the rule was formed, their contrast is tested
   one-sided in the rule's direction; the episodes that formed the rule never take
   part. The k-th such test of a namespace is held to level ``q * 6 / (pi^2 k^2)``
   (:func:`reflexmem.memory.contrast.spent_alpha`): the levels sum to ``q``, so the
   chance that *any* confirmed rule of the namespace is false is at most ``q`` under
   any dependence between tests (family-wise control, which implies FDR <= q). The
   test counts **blocks** of time (two weeks of decision time), not episodes, as its
   independent draws (:class:`reflexmem.memory.blocks.PairBlocks`, Student
   with G - 1 degrees of freedom, at least five blocks): decisions taken on the same
   days share the market's moves and their horizons overlap, and on real prices an
   independent-episode test confirmed "long decisions did better" from a few weeks of
   trend in nearly every stream. Not Benjamini-Hochberg re-run on a growing set of
   tests (windows arrive in sequence and are never revisited: its FWER under a null
   stream grows like q times the harmonic number of the tests); spending rather than
   LORD/alpha-investing because a role forms few candidates and spending gives the
   first tests the most power. Screening looks do not count: they only choose *which*
   hypotheses to test, on data the test never reads. A condition whose test fails is
   ``retired`` for good: re-testing it would spend the budget again.
3. *kept honest*: an active rule counts every later carrier as helpful (its outcome
   went the rule's way relative to the rest's mean at confirmation) or harmful, and is
   ``retired`` when the carriers since confirmation contradict it (one-sided p below
   ``retire_p`` in the opposite direction, with ``confirm_support`` carriers).

"Later" figures are differences of the lineage's cumulative moments from a snapshot the
rule keeps (``base``, taken when it was formed and again when it was confirmed), so no
step re-reads old episodes: a window costs its own episodes, and the per-tier cap that
evicts old episodes cannot starve a confirmation. The rest's moments grow, at each
version, by the episodes between versions the tier still holds; for a condition absent
for longer than the tier keeps, some of its rest is lost (never its carriers).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.blocks import BlockRow, PairBlocks, tagged_block, time_block
from reflexmem.memory.contrast import Moments, contrast, spent_alpha
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.rule_config import RuleConfig
from reflexmem.memory.rule_entries import pattern_entry, rule_entry
from reflexmem.memory.store import MemoryStore


@dataclass
class RulesOutcome:
    """What one window did to the condition lineages and rules of a namespace."""

    written: list[str] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)
    confirmed: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    followed: list[str] = field(default_factory=list)
    """New versions of rules that keep their state: an active rule's helpful / harmful
    counts, a candidate's blocks of later episodes gathered for its test."""
    refused: list[tuple[str, str]] = field(default_factory=list)


def _newest(
    store: MemoryStore,
    namespace: str,
    tier: Tier,
    prefixes: tuple[str, ...],
    states: Sequence[EntryState] | None = None,
) -> dict[str, MemoryEntry]:
    out: dict[str, MemoryEntry] = {}
    for entry in store.entries(namespace, (tier,), states):
        tag = entry.tags[0] if entry.tags else ""
        if entry.state is EntryState.SUPERSEDED or not tag.startswith(prefixes):
            continue
        if tag not in out or entry.created_episode >= out[tag].created_episode:
            out[tag] = entry
    return out


def newest_rules(store: MemoryStore, namespace: str) -> dict[str, MemoryEntry]:
    """Each condition's newest rule version: waiting (candidate), active or retired."""
    return _newest(store, namespace, Tier.PROCEDURAL, RuleConfig().prefixes)


def live_rules(rules: Mapping[str, MemoryEntry]) -> dict[str, MemoryEntry]:
    """Of `newest_rules`, those waiting or active: a retired condition is retired for good."""
    return {c: r for c, r in rules.items() if r.state is not EntryState.RETIRED}


def _moments(episodes: Sequence[MemoryEntry], condition: str | None = None) -> Moments:
    return Moments.of(
        e.outcome
        for e in episodes
        if e.outcome is not None and (condition is None or condition in e.tags)
    )


def _tests_so_far(rules: Mapping[str, MemoryEntry]) -> int:
    """Confirmatory tests the namespace has run: the highest test number a rule carries.

    The highest, not a count, so that a judged rule evicted from a full tier does not
    hand its share of the error budget back.
    """
    numbers = [
        int(r.stats["confirm"].get("test", 1))
        for r in rules.values()
        if r.stats and r.stats.get("confirm")
    ]
    return max(numbers, default=0)


def _mirrored(
    pattern: MemoryEntry, rules: Mapping[str, MemoryEntry], lineages: Mapping[str, MemoryEntry]
) -> bool:
    """Whether a condition with a rule splits the episodes exactly the other way.

    Like `direction:long` and `direction:short`: one contrast, a second rule would spend
    the error budget on it again. Its lineage's carriers are then this one's rest.
    """
    mine = pattern.stats or {}
    flipped = (Moments.from_json(mine.get("rest")), Moments.from_json(mine.get("carriers")))
    for condition in rules:
        theirs = getattr(lineages.get(condition), "stats", None) or {}
        pair = (Moments.from_json(theirs.get("carriers")), Moments.from_json(theirs.get("rest")))
        if theirs and all(_same(a, b) for a, b in zip(pair, flipped, strict=True)):
            return True
    return False


def _same(a: Moments, b: Moments) -> bool:
    return a.n == b.n and a.losses == b.losses and math.isclose(a.total, b.total, abs_tol=1e-9)


def _base(pattern: MemoryEntry) -> dict[str, Any]:
    """The lineage's cumulative moments now: later figures are differences from these."""
    stats = pattern.stats or {}
    return {"carriers": stats["carriers"], "rest": stats["rest"]}


class _Window:
    """One namespace's window: the episodes so far, the lineages and rules to extend."""

    def __init__(
        self,
        store: MemoryStore,
        namespace: str,
        episodes: Sequence[MemoryEntry],
        start: int,
        end: int,
        cfg: RuleConfig,
    ) -> None:
        self.store = store
        self.namespace = namespace
        self.start, self.end = start, end
        self.cfg = cfg
        self.episodes = [e for e in episodes if e.outcome is not None and e.created_episode < end]
        self.out = RulesOutcome()
        order = np.array([e.created_episode for e in self.episodes], dtype=np.int64)
        s = np.array([e.outcome for e in self.episodes], dtype=float)
        sort = np.argsort(order, kind="stable")
        self._index, s = order[sort], s[sort]
        self._outcomes = s
        blocks = [
            e.created_episode // cfg.block if (b := tagged_block(e.tags)) is None else b
            for e in self.episodes
        ]
        self._block = np.array(blocks, dtype=np.int64)[sort]
        self._keys, self._where = np.unique(self._block, return_inverse=True)
        zero = np.zeros(1)
        self._cum = [
            np.concatenate([zero, np.cumsum(v)]) for v in (np.ones_like(s), s, s * s, s < 0)
        ]

    def span(self, first: int, end: int) -> Moments:
        """Moments of every episode with index in [first, end), from prefix sums."""
        a, b = np.searchsorted(self._index, [first, end])
        n, total, squares, losses = (float(c[b] - c[a]) for c in self._cum)
        return Moments(int(n), total, squares, int(losses))

    def put(self, entry: MemoryEntry, into: list[str]) -> bool:
        result = self.store.put(entry)
        if result.stored:
            into.append(entry.id)
        else:
            self.out.refused.append((entry.id, result.reason or "refused"))
        return result.stored

    def run(self) -> RulesOutcome:
        cfg = self.cfg
        current = [e for e in self.episodes if e.created_episode >= self.start]
        self._current = current
        conditions = sorted({t for e in current for t in e.tags if cfg.is_condition(t)})
        lineages = _newest(
            self.store,
            self.namespace,
            Tier.SEMANTIC,
            cfg.prefixes,
            (EntryState.ACTIVE, EntryState.CANDIDATE),
        )
        rules = _newest(self.store, self.namespace, Tier.PROCEDURAL, cfg.prefixes)
        written: list[tuple[MemoryEntry, list[BlockRow]]] = []
        for condition in conditions:
            prev = lineages.get(condition)
            here = _moments(current, condition)
            # The lineage's rest grows by every episode since its last version that did
            # not carry it (windows in between carried none of it, by construction).
            since = prev.created_episode + 1 if prev is not None else self.start
            old = prev.stats if prev is not None and prev.stats else {}
            carriers = here + Moments.from_json(old.get("carriers"))
            rest = self.span(since, self.end) - here + Moments.from_json(old.get("rest"))
            rows = self._window_blocks(condition, since)
            blocks = PairBlocks.from_json(old.get("blocks")).add(rows)
            sources = tuple(  # the cases themselves, as lesson lineages cite them
                dict.fromkeys(
                    src for e in current if condition in e.tags for src in (e.source_ids or (e.id,))
                )
            )
            pattern = pattern_entry(
                self.namespace,
                condition,
                carriers,
                rest,
                prev,
                sources,
                self.end,
                cfg.min_support,
                cfg.screen_p,
                blocks,
            )
            if not self.put(pattern, self.out.written):
                continue
            if prev is not None:
                done = (
                    EntryState.SUPERSEDED if prev.state is EntryState.ACTIVE else EntryState.RETIRED
                )
                self.store.set_state(prev.id, done)
            lineages[condition] = pattern
            written.append((pattern, rows))
        # Rules step once every lineage of the window is written, so a condition is
        # compared with the others as they stand now (`_mirrored`).
        for pattern, rows in written:
            self._step(pattern, rules, rows, lineages)
        return self.out

    def _window_blocks(self, condition: str, since: int) -> list[BlockRow]:
        """Per-block figures of the episodes [since, end) for a condition, in block order.

        Only this window carries the condition (windows in between carried none of it).
        """
        a, b = np.searchsorted(self._index, [since, self.end])
        index, outcomes = self._index[a:b], self._outcomes[a:b]
        mine = [e.created_episode for e in self._current if condition in e.tags]
        carried = np.zeros(len(index), dtype=bool)
        carried[np.searchsorted(index, mine)] = True  # the window's own, all in `index`
        where, size = self._where[a:b], len(self._keys)
        n_in = np.bincount(where, weights=carried, minlength=size)
        s_in = np.bincount(where, weights=np.where(carried, outcomes, 0.0), minlength=size)
        n_all = np.bincount(where, minlength=size)
        s_all = np.bincount(where, weights=outcomes, minlength=size)
        seen = np.flatnonzero(n_all)  # the slice's blocks, in block order
        n_out, s_out = (n_all - n_in)[seen], (s_all - s_in)[seen]
        columns = (self._keys[seen], n_in[seen], s_in[seen], n_out, s_out)
        return list(zip(*(c.tolist() for c in columns), strict=True))

    def _step(
        self,
        pattern: MemoryEntry,
        rules: dict[str, MemoryEntry],
        rows: list[BlockRow],
        lineages: Mapping[str, MemoryEntry],
    ) -> None:
        condition = pattern.tags[0]
        rule = rules.get(condition)
        if rule is None:
            if pattern.state is EntryState.ACTIVE and pattern.stats and pattern.stats["contrast"]:
                if _mirrored(pattern, rules, lineages):  # only when a rule would form
                    return
                formed = pattern.stats["contrast"]
                stats = {
                    "direction": 1 if formed["effect"] > 0 else -1,
                    "formed": formed,
                    "formed_block": time_block(pattern.stats, (e.tags for e in self._current)),
                    "base": _base(pattern),
                    "blocks": PairBlocks().as_json(),
                }
                candidate = rule_entry(pattern, EntryState.CANDIDATE, "", stats)
                if self.put(candidate, self.out.promoted):
                    rules[condition] = candidate
            return
        if rule.state is EntryState.CANDIDATE:
            self._confirm(pattern, rule, rules, rows)
        elif rule.state is EntryState.ACTIVE:
            self._follow(pattern, rule, rules)

    def _later(
        self, pattern: MemoryEntry, stats: Mapping[str, Any]
    ) -> tuple[Moments, Moments] | None:
        """Carriers and rest after ``stats["base"]`` was taken, or None (too few)."""
        now, base = pattern.stats or {}, stats["base"]
        carriers = Moments.from_json(now["carriers"]) - Moments.from_json(base["carriers"])
        rest = Moments.from_json(now["rest"]) - Moments.from_json(base["rest"])
        if min(carriers.n, rest.n) < self.cfg.confirm_support:
            return None
        return carriers, rest

    def _confirm(
        self,
        pattern: MemoryEntry,
        rule: MemoryEntry,
        rules: dict[str, MemoryEntry],
        rows: list[BlockRow],
    ) -> None:
        stats = dict(rule.stats or {})
        if "blocks" not in stats:  # written before blocks: rebased, judged on what follows
            stats |= {"base": _base(pattern), "blocks": PairBlocks().as_json()}
            rows = []
        blocks = PairBlocks.from_json(stats.get("blocks")).add(rows)
        stats["blocks"] = blocks.as_json()
        later = self._later(pattern, stats)
        direction = int(stats["direction"])
        test = None if later is None else blocks.contrast(*later, direction=direction)
        if test is None:
            waiting = rule_entry(pattern, EntryState.CANDIDATE, f"@{self.end}", stats, rule.id)
            if self.put(waiting, self.out.followed):
                self.store.set_state(rule.id, EntryState.SUPERSEDED)
                rules[pattern.tags[0]] = waiting
            return
        k = _tests_so_far(rules) + 1
        stats["confirm"] = test.as_json() | {"test": k, "alpha": spent_alpha(k, self.cfg.q)}
        confirmed = test.p_value <= stats["confirm"]["alpha"]
        if confirmed:
            stats |= {"helpful": 0, "harmful": 0, "base": _base(pattern)}
        stats.pop("blocks")
        state = EntryState.ACTIVE if confirmed else EntryState.RETIRED
        judged = rule_entry(pattern, state, f"@{self.end}", stats, rule.id)
        if self.put(judged, self.out.confirmed if confirmed else self.out.rejected):
            self.store.set_state(rule.id, EntryState.SUPERSEDED)
            rules[pattern.tags[0]] = judged

    def _follow(
        self, pattern: MemoryEntry, rule: MemoryEntry, rules: dict[str, MemoryEntry]
    ) -> None:
        stats = dict(rule.stats or {})
        condition, direction = pattern.tags[0], int(stats["direction"])
        reference = float(stats["confirm"]["mean_out"])
        window = [
            e for e in self.episodes if e.created_episode >= self.start and condition in e.tags
        ]
        helpful = sum(1 for e in window if direction * ((e.outcome or 0.0) - reference) > 0)
        stats["helpful"] = int(stats.get("helpful", 0)) + helpful
        stats["harmful"] = int(stats.get("harmful", 0)) + len(window) - helpful
        later = self._later(pattern, stats)
        since = None if later is None else contrast(*later, direction=-direction)
        turned = since is not None and since.p_value < self.cfg.retire_p
        if turned:
            stats["turned"] = since.as_json() if since else None
        state = EntryState.RETIRED if turned else EntryState.ACTIVE
        into = self.out.rejected if turned else self.out.followed
        followed = rule_entry(pattern, state, f"@{self.end}", stats, rule.id)
        if self.put(followed, into):
            self.store.set_state(rule.id, EntryState.SUPERSEDED)
            rules[condition] = followed


def distil_conditions(
    store: MemoryStore,
    namespace: str,
    episodes: Sequence[MemoryEntry],
    start: int,
    end: int,
    cfg: RuleConfig,
) -> RulesOutcome:
    """Extend every condition lineage the window carries; form, confirm, follow rules."""
    return _Window(store, namespace, episodes, start, end, cfg).run()
