"""Memory-using reference agents for the AEL benchmark: memory, ael and two ablations.

All four share one agent, `LearningAgent`, and differ only in a `Variant`:

| method (JSON `method`) | retrieval policy | slow-loop reflection | warm-up |
| --- | --- | --- | --- |
| `memory` | fixed `full_detailed`, no bandit | no | 15 episodes |
| `ael` | Thompson bandit over the five default policies | every window | 15 episodes |
| `ael_no_warmup` (the paper's "-warm-up") | bandit | every window | none |
| `ael_no_reflection` (the paper's "-reflection") | bandit | no | 15 episodes |

An *episode* is one decision bar. At the close of bar t the agent runs the tools
(price-only, point in time, cached across seeds and methods because they depend
on nothing but closes 0..t), puts the D-full snapshots through the point-in-time
guard (every one is refused, and the refusal is in every decision's notes and
`refusals`), lets the analysis roles of the registry say whether they can act,
asks the bandit for a retrieval policy, recalls memory for a query describing the
current state, and hands the planner a `PlannerContext`. The episode settles at
the next visible close: outcome s = tanh(r / 0.005) of the book's gross bar
return r (0.5 % a bar maps to s = 0.76; D-full's equal-weight bar return has a
standard deviation of about 0.42 %), bandit reward clip((s + 1) / 2, 0, 1) as in
the memory package. Costs are not in s: one run serves every cost level.

During the warm-up (the loop's first 15 episodes) episodes are recorded but
nothing is learned and memory is not applied. Before the test split the agent
freezes its loop (memory, posteriors, policies): it still selects and recalls, but
writes nothing, and `FrozenCheck` proves the learned state is byte-identical after
the test split. Reflection keeps running in test: it is inference over visible
prices and realised outcomes and writes nothing.

One hyperparameter is tuned (on validation only, see `reflexmem.ael.run`): the
memory-tilt strength `tilt`, which scales every per-ticker tilt and cash bias that
recalled entries and the reflection feed the planner.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reflexmem.ael.agent import PlannerConfig, PlannerContext, RecalledEntry, plan_allocation
from reflexmem.ael.environment import Decision, Episode, MarketView
from reflexmem.ael.panel import default_dfull_root
from reflexmem.ael.pit_guard import Evidence, EvidenceGuard, Refusal, load_dfull_snapshots
from reflexmem.ael.reflect import Reflection, reflect
from reflexmem.ael.table import register_method, registered_methods
from reflexmem.ael.tools import ToolConfig, ToolReport, run_tools
from reflexmem.memory.entries import MemoryEntry, Tier
from reflexmem.memory.loop import LearningLoop
from reflexmem.memory.policies import FULL_DETAILED, Retrieval, default_policies
from reflexmem.memory.ranking import RankedEntry
from reflexmem.memory.schedule import LearningSchedule
from reflexmem.memory.store import InMemoryStore
from reflexmem.registry import load_registry

OUTCOME_SCALE = 0.005
"""r at which s = tanh(r / scale) reaches 0.76; about one D-full bar standard deviation."""

DEFAULT_TILT = 0.5
TILT_GRID = (0.25, 0.5, 1.0, 2.0)
"""Memory-tilt strengths tried on validation. 0 is left out: it would switch memory off."""

WIN_TILT = 0.5
CASH_PER_OUTCOME = 0.1
REFLECTION_TILT = 0.5
TREND_THRESHOLD = 0.003
N_LEADERS = 2
ROLE_IDS = ("valuation", "momentum", "cycle_analysis", "risk")
PRICE_EVIDENCE = frozenset({"price_history", "technicals", "quant_risk"})
"""Evidence kinds derived from the visible closes, point in time by construction."""

LEARNING_METHODS = ("memory", "ael", "ael_no_warmup", "ael_no_reflection")


@dataclass(frozen=True)
class Variant:
    """What distinguishes one learning method from another."""

    name: str
    bandit: bool
    reflection: bool
    warmup: int


VARIANTS: dict[str, Variant] = {
    "memory": Variant("memory", bandit=False, reflection=False, warmup=15),
    "ael": Variant("ael", bandit=True, reflection=True, warmup=15),
    "ael_no_warmup": Variant("ael_no_warmup", bandit=True, reflection=True, warmup=0),
    "ael_no_reflection": Variant("ael_no_reflection", bandit=True, reflection=False, warmup=15),
}


class ToolCache:
    """Tool reports keyed by the exact visible history, shared across seeds and methods.

    Tools read nothing but closes 0..t, so two views with byte-identical closes,
    clock and tickers get identical reports; the key is a digest of exactly that,
    which keeps the cache correct even for panels whose futures differ (tests
    poison future prices to prove point-in-time behaviour). Reports are never
    mutated by their readers. Oldest entries go first beyond `maxsize`.
    """

    def __init__(self, maxsize: int = 8192) -> None:
        self._maxsize = maxsize
        self._data: dict[tuple[bytes, ToolConfig], ToolReport] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(view: MarketView) -> bytes:
        """Digest of the visible closes, the bar's instant and the tickers."""
        h = hashlib.blake2b(view.closes.tobytes(), digest_size=16)
        h.update(np.asarray(view.timestamp, dtype="datetime64[us]").tobytes())
        h.update("\x1f".join(view.tickers).encode())
        return h.digest()

    def report(self, view: MarketView, config: ToolConfig) -> ToolReport:
        """The cached report for this view, computing it on a miss."""
        key = (self.key(view), config)
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self.hits += 1
                return hit
        report = run_tools(view, config)
        with self._lock:
            self.misses += 1
            if len(self._data) >= self._maxsize:
                self._data.pop(next(iter(self._data)))
            self._data[key] = report
        return report

    def clear(self) -> None:
        """Drop every cached report (benchmarks time cold and warm runs)."""
        with self._lock:
            self._data.clear()
            self.hits = self.misses = 0


SHARED_TOOL_CACHE = ToolCache()


@functools.cache
def role_requirements() -> dict[str, tuple[str, ...]]:
    """Evidence kinds each analysis role requires, from the shipped role registry."""
    registry = load_registry()
    return {
        role: tuple(e.kind for e in registry.get(role).policy.required_evidence)
        for role in ROLE_IDS
    }


def evidence_kind(item: Evidence | Refusal) -> str:
    """Kind of a piece of evidence: `snapshots/<kind>/<T>` -> kind, else the source."""
    return _source_kind(item.source)


@functools.lru_cache(maxsize=4096)
def _source_kind(source: str) -> str:
    # Cached: the same 40 sources are classified at every bar of every run.
    parts = source.split("/")
    return parts[1] if len(parts) >= 3 and parts[0] == "snapshots" else source


@functools.cache
def role_notes(admitted: frozenset[str], refused: frozenset[str]) -> tuple[str, tuple[str, ...]]:
    """One note line on the roles and the ids of those that act, for these verdicts.

    A role abstains when evidence it requires was refused by the point-in-time
    guard (its thesis would rest on the future); evidence that is simply not
    supplied (no macro calendar on D-full) leaves it acting on prices only, and
    the note says so. Price evidence is always available point in time.
    """
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


@functools.cache
def default_evidence() -> tuple[Evidence, ...]:
    """The D-full snapshots (all refused for 2025 decisions), or none if not vendored."""
    root = default_dfull_root()
    return load_dfull_snapshots(root) if (root / "snapshots").is_dir() else ()


@dataclass(frozen=True)
class FrozenCheck:
    """Proof that a split ran with read-only memory: digests before and after."""

    split: str
    before_sha256: str
    after_sha256: str
    decisions: int

    @property
    def identical(self) -> bool:
        """Whether memory, posteriors and policies are byte-identical across the split."""
        return self.before_sha256 == self.after_sha256

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "split": self.split,
            "before_sha256": self.before_sha256,
            "after_sha256": self.after_sha256,
            "identical": self.identical,
            "decisions": self.decisions,
        }


@dataclass
class Overhead:
    """Nanoseconds the agent spent per part of its own loop, over all decisions."""

    tools_ns: int = 0
    memory_ns: int = 0
    bandit_ns: int = 0
    reflection_ns: int = 0
    planner_ns: int = 0
    decisions: int = 0

    def per_episode_us(self) -> dict[str, float]:
        """Mean microseconds per decision, per part and in total."""
        n = max(self.decisions, 1)
        parts = {
            "tools": self.tools_ns,
            "memory": self.memory_ns,
            "bandit": self.bandit_ns,
            "reflection": self.reflection_ns,
            "planner": self.planner_ns,
        }
        out = {k: v / n / 1e3 for k, v in parts.items()}
        out["total"] = sum(parts.values()) / n / 1e3
        return out


@dataclass(frozen=True)
class _Pending:
    bar: int
    weights: np.ndarray
    tags: tuple[str, ...]
    policy: str


@dataclass
class _Trace:
    policies: list[str] = field(default_factory=list)
    arms: list[tuple[str, ...]] = field(default_factory=list)
    means: list[tuple[float, ...]] = field(default_factory=list)
    marks: list[tuple[str, int]] = field(default_factory=list)


def _lower_index(tickers: Sequence[str]) -> dict[str, str]:
    return {t.lower(): t for t in tickers}


def recalled_entry(
    item: RankedEntry, tickers: dict[str, str], strength: float
) -> RecalledEntry | None:
    """Translate one recalled memory entry into numbers the planner applies.

    Episodic: the tickers the agent led with get + s (their bet paid or not),
    the bar's realised winners + 0.5 and losers - 0.5, and cash moves by
    -0.1 s (a state that lost money asks for more cash). Distilled patterns
    (semantic, or active procedural rules) on a `lead_<T>` tag tilt T by
    +/- confidence, and patterns on a state tag move cash by -/+ 0.1 confidence.
    Everything is scaled by `strength`; relevance is the rank score, capped at 1.
    """
    e: MemoryEntry = item.entry
    tilts: dict[str, float] = {}
    cash = 0.0
    if e.tier is Tier.EPISODIC:
        s = e.outcome or 0.0
        for tag in e.tags:
            kind, _, name = tag.partition("_")
            ticker = tickers.get(name)
            if ticker is None:
                continue
            if kind == "lead":
                tilts[ticker] = tilts.get(ticker, 0.0) + s
            elif kind == "win":
                tilts[ticker] = tilts.get(ticker, 0.0) + WIN_TILT
            elif kind == "lose":
                tilts[ticker] = tilts.get(ticker, 0.0) - WIN_TILT
        cash = -CASH_PER_OUTCOME * s
    else:
        sign = 1.0 if "polarity:positive" in e.tags else -1.0
        direction = sign * e.confidence
        tag = e.tags[0] if e.tags else ""
        kind, _, name = tag.partition("_")
        if kind == "lead" and name in tickers:
            tilts[tickers[name]] = direction
        elif kind in ("risk", "trend", "regime"):
            cash = -CASH_PER_OUTCOME * direction
        else:
            return None
    return RecalledEntry(
        text=e.text,
        relevance=min(1.0, item.score),
        ticker_tilts={t: strength * v for t, v in tilts.items()},
        cash_bias=strength * cash,
    )


def _zscore(x: np.ndarray) -> np.ndarray:
    sd = float(x.std())
    return (x - x.mean()) / sd if sd > 0 else np.zeros_like(x)


class LearningAgent:
    """Tools + roles + memory + bandit (+ reflection) + the fixed planner, one per run.

    Randomness: the planner's noise comes from the generator handed in (drawn every
    bar, as in `ToolsAgent`); the bandit gets its own generator seeded once from it
    at construction, so policy picks never shift the planner's noise stream.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        variant: Variant | str,
        *,
        tilt: float = DEFAULT_TILT,
        evidence: Sequence[Evidence] | None = None,
        tool_cache: ToolCache | None = None,
        planner: PlannerConfig | None = None,
        tools: ToolConfig | None = None,
        outcome_scale: float = OUTCOME_SCALE,
        freeze_after: str = "val",
        window: int = 10,
    ) -> None:
        self.variant = VARIANTS[variant] if isinstance(variant, str) else variant
        if tilt < 0 or outcome_scale <= 0:
            raise ValueError("tilt must be >= 0 and outcome_scale > 0")
        self.rng = rng
        self.tilt = float(tilt)
        self.evidence = tuple(default_evidence() if evidence is None else evidence)
        self.guard = EvidenceGuard()
        self.tool_cache = tool_cache if tool_cache is not None else SHARED_TOOL_CACHE
        self.planner = planner or PlannerConfig()
        self.tools = tools or ToolConfig()
        self.outcome_scale = float(outcome_scale)
        self.freeze_after = freeze_after
        bandit_rng = np.random.default_rng(int(rng.integers(0, 2**63 - 1)))
        policies = default_policies() if self.variant.bandit else (FULL_DETAILED,)
        schedule = LearningSchedule(window_size=window, warmup_episodes=self.variant.warmup)
        self.store = InMemoryStore()
        self.loop = LearningLoop(
            f"agent:{self.variant.name}",
            store=self.store,
            policies=policies,
            schedule=schedule,
            rng=bandit_rng,
        )
        self.overhead = Overhead()
        self.trace = _Trace()
        self.outcomes: list[float] = []
        self.reflections: list[Reflection] = []
        self.frozen_checks: list[FrozenCheck] = []
        self.episodes: dict[str, Episode] = {}
        self._reflection: Reflection | None = None
        self._reflected_at = 0
        self._pending: _Pending | None = None
        self._frozen_digest: str | None = None
        self._frozen_decisions = 0
        self._recall_memo: dict[tuple[str, str, int], Retrieval] = {}

    @property
    def name(self) -> str:
        """The method name this agent runs under."""
        return self.variant.name

    @property
    def reflection(self) -> Reflection | None:
        """The reflection in force for the next decisions, if any yet."""
        return self._reflection

    def _in_warmup(self) -> bool:
        return self.loop.episode < self.variant.warmup and not self.loop.frozen

    # -- settlement ----------------------------------------------------------------

    def _settle(self, gross: float, extra_tags: tuple[str, ...]) -> None:
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        s = math.tanh(gross / self.outcome_scale)
        self.outcomes.append(s)
        if self.loop.frozen:
            return
        tags = (*pending.tags, *extra_tags)
        text = (
            f"bar {pending.bar}: {' '.join(pending.tags)} -> book {gross:+.3%} (s={s:+.2f});"
            f" {' '.join(extra_tags)}"
        )
        self.loop.record_episode(text, s, 0.5 + 0.5 * abs(s), tags)

    @staticmethod
    def _movers(asset_returns: np.ndarray, tickers: Sequence[str]) -> tuple[str, ...]:
        order = np.argsort(asset_returns, kind="stable")
        win = [f"win_{tickers[i].lower()}" for i in order[::-1][:N_LEADERS]]
        lose = [f"lose_{tickers[i].lower()}" for i in order[:N_LEADERS]]
        return (*win, *lose)

    def _settle_visible(self, view: MarketView) -> None:
        pending = self._pending
        if pending is None or pending.bar + 1 > view.t:
            return
        c = view.closes
        asset = c[pending.bar + 1] / c[pending.bar] - 1.0
        self._settle(float(pending.weights @ asset), self._movers(asset, view.tickers))

    # -- one decision ----------------------------------------------------------------

    def _state_tags(self, report: ToolReport) -> tuple[str, ...]:
        trend = float(report.momentum.values[-1].mean())
        direction = (
            "up" if trend > TREND_THRESHOLD else "down" if trend < -TREND_THRESHOLD else "flat"
        )
        tags = [f"risk_{report.risk_score.regime}", f"trend_{direction}"]
        if self.variant.reflection and self._reflection is not None:
            tags.append(f"regime_{self._reflection.label}")
        return tuple(tags)

    def _recall(self, query: str) -> Retrieval:
        policy = self.loop.current_policy
        assert policy is not None
        # Every write goes through record_episode, which advances the episode, so
        # (policy, query, episode) identifies the store state: no re-ranking when
        # nothing changed (e.g. the whole frozen test split at one episode count).
        key = (policy.name, query, self.loop.episode)
        hit = self._recall_memo.get(key)
        if hit is None:
            hit = self.loop.retrieve(query)
            if len(self._recall_memo) > 256:
                self._recall_memo.clear()
            self._recall_memo[key] = hit
        return hit

    def _context(
        self, report: ToolReport, retrieval: Retrieval | None
    ) -> tuple[PlannerContext | None, str]:
        recalled: list[RecalledEntry] = []
        if retrieval is not None:
            index = _lower_index(report.tickers)
            for item in retrieval.ranked:
                entry = recalled_entry(item, index, self.tilt)
                if entry is not None:
                    recalled.append(entry)
        refl = self._reflection if self.variant.reflection else None
        if refl is None:
            if retrieval is None:
                return None, ""
            return PlannerContext(confidence=1.0, recalled=tuple(recalled)), ""
        if refl.momentum_tilt != 0.0:
            z = _zscore(report.momentum.blend())
            scale = self.tilt * REFLECTION_TILT * refl.momentum_tilt
            tilts = {t: scale * float(v) for t, v in zip(report.tickers, z, strict=True)}
            recalled.append(RecalledEntry(f"reflection: {refl.label}", 1.0, tilts))
        # The reflection can damp memory (weak read) but never amplify it beyond
        # the memory variant's full trust.
        ctx = PlannerContext(
            regime=refl.planner_regime,
            insight=refl.insight,
            confidence=0.5 + 0.5 * refl.confidence,
            recalled=tuple(recalled),
        )
        return ctx, f"reflection {refl.label} confidence {refl.confidence:.2f}"

    def _maybe_reflect(self, view: MarketView) -> None:
        window = self.loop.schedule.window_size
        n = len(self.outcomes)
        if (
            not self.variant.reflection
            or n < max(window, self.variant.warmup)
            or n % window
            or n == self._reflected_at
        ):
            return
        self._reflected_at = n
        refl = reflect(view.closes, self.outcomes[-window:], window=window, episode_end=n)
        self._reflection = refl
        self.reflections.append(refl)

    def __call__(self, view: MarketView, /) -> Decision:
        """Settle the previous episode, then decide weights for bar t."""
        ov = self.overhead
        clock = time.perf_counter_ns
        t0 = clock()
        self._settle_visible(view)
        t1 = clock()
        report = self.tool_cache.report(view, self.tools)
        admitted, refused = self.guard.admit(self.evidence, view.decision_time)
        roles_line, _acting = role_notes(
            frozenset(evidence_kind(e) for e in admitted),
            frozenset(evidence_kind(r) for r in refused),
        )
        t2 = clock()
        self._maybe_reflect(view)
        t3 = clock()
        state = self.loop.bandit_state
        self.trace.arms.append(state.arms)
        self.trace.means.append(tuple(state.means().tolist()))
        policy = self.loop.select_policy()
        self.trace.policies.append(policy.name)
        t4 = clock()
        tags = self._state_tags(report)
        retrieval: Retrieval | None = None
        if not self._in_warmup():
            order = np.argsort(-report.signal.score, kind="stable")[:N_LEADERS]
            query = " ".join([*tags, *(f"lead_{view.tickers[i].lower()}" for i in order)])
            retrieval = self._recall(query)
        context, reflection_note = self._context(report, retrieval)
        t5 = clock()
        plan = plan_allocation(report, context, self.rng, self.planner)
        t6 = clock()
        held = np.argsort(-plan.weights, kind="stable")[:N_LEADERS]
        leads = tuple(f"lead_{view.tickers[i].lower()}" for i in held)
        self._pending = _Pending(view.t, plan.weights, (*tags, *leads), policy.name)
        notes = [*plan.notes, roles_line]
        if retrieval is None:
            notes.append(f"policy {policy.name}: warm-up, memory not applied")
        else:
            recalled = len(retrieval.ranked)
            notes.append(f"policy {policy.name}: recalled {recalled} ({retrieval.tokens} tokens)")
        if reflection_note:
            notes.append(reflection_note)
        if refused:
            kinds: dict[str, int] = {}
            for r in refused:
                kinds[evidence_kind(r)] = kinds.get(evidence_kind(r), 0) + 1
            listed = ", ".join(f"{k} x{n}" for k, n in kinds.items())
            notes.append(f"point-in-time guard refused {len(refused)} items ({listed})")
            notes.append(refused[0].describe())
        ov.memory_ns += (t1 - t0) + (t5 - t4)
        ov.tools_ns += t2 - t1
        ov.reflection_ns += t3 - t2
        ov.bandit_ns += t4 - t3
        ov.planner_ns += t6 - t5
        ov.decisions += 1
        if self.loop.frozen:
            self._frozen_decisions += 1
        return Decision(plan.weights, tuple(notes), refused)

    # -- phases ----------------------------------------------------------------------

    def learned_state(self) -> dict[str, Any]:
        """Memory store and loop (posteriors, policies, history) as JSON-able data."""
        return {"store": self.store.to_dict(), "loop": self.loop.snapshot()}

    def fingerprint(self) -> str:
        """SHA-256 of the canonical JSON of `learned_state()`."""
        blob = json.dumps(self.learned_state(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def observe_episode(self, episode: Episode) -> None:
        """Settle the split's last episode; freeze after `freeze_after`; check frozen splits.

        The last decision's return ends on the split's own last bar, which is
        visible once the split is over, so settling it here is point in time and
        keeps a write from landing inside the next (possibly frozen) split.
        """
        n = episode.n_returns
        if self._pending is not None and n and self._pending.bar == int(episode.bars[-1]):
            asset = episode.asset_returns[-1]
            self._settle(float(episode.gross_returns[-1]), self._movers(asset, episode.tickers))
        name = episode.split.name
        self.episodes[name] = episode
        self.trace.marks.append((name, len(self.trace.policies)))
        if self._frozen_digest is not None:
            after = self.fingerprint()
            check = FrozenCheck(name, self._frozen_digest, after, self._frozen_decisions)
            self.frozen_checks.append(check)
            self._frozen_decisions = 0
        if name == self.freeze_after and not self.loop.frozen:
            self.loop.freeze()
            self._frozen_digest = self.fingerprint()

    def policy_frequencies(self) -> dict[str, dict[str, float]]:
        """Share of decisions per retrieval policy, per split."""
        out: dict[str, dict[str, float]] = {}
        start = 0
        for split, stop in self.trace.marks:
            chosen = self.trace.policies[start:stop]
            counts: dict[str, float] = {}
            for p in chosen:
                counts[p] = counts.get(p, 0.0) + 1.0
            out[split] = {p: c / max(len(chosen), 1) for p, c in counts.items()}
            start = stop
        return out

    def posterior_trace(self) -> tuple[tuple[str, ...], np.ndarray]:
        """Arms (final order) and their posterior means before each decision.

        Arms added later by the evolution gate are NaN before they existed.
        """
        arms = self.trace.arms[-1] if self.trace.arms else self.loop.bandit_state.arms
        out = np.full((len(self.trace.means), len(arms)), np.nan)
        for i, (names, means) in enumerate(zip(self.trace.arms, self.trace.means, strict=True)):
            out[i, : len(names)] = means
        return arms, out


# -- registration ---------------------------------------------------------------------


@dataclass
class AgentSession:
    """Per-run settings for the registered factories, and the agents they built.

    The method registry hands factories only a generator; a session (a context
    variable, so concurrent flows do not see each other's) carries the tuned tilt
    and the evidence, and collects the agents so the runner can read their traces.
    """

    tilt: dict[str, float] = field(default_factory=dict)
    evidence: tuple[Evidence, ...] | None = None
    built: list[LearningAgent] = field(default_factory=list)


_SESSION: ContextVar[AgentSession | None] = ContextVar("ael_agent_session", default=None)


@contextmanager
def agent_session(
    tilt: dict[str, float] | None = None, evidence: Sequence[Evidence] | None = None
) -> Iterator[AgentSession]:
    """Build registered learning agents with these settings inside the block."""
    session = AgentSession(dict(tilt or {}), None if evidence is None else tuple(evidence))
    token = _SESSION.set(session)
    try:
        yield session
    finally:
        _SESSION.reset(token)


def build_agent(name: str, rng: np.random.Generator | None) -> LearningAgent:
    """Build the learning agent `name` with the active session's settings (if any)."""
    if rng is None:
        raise ValueError(f"{name} is seeded and needs a generator")
    session = _SESSION.get()
    tilt = session.tilt.get(name, DEFAULT_TILT) if session is not None else DEFAULT_TILT
    evidence = session.evidence if session is not None else None
    agent = LearningAgent(rng, name, tilt=tilt, evidence=evidence)
    if session is not None:
        session.built.append(agent)
    return agent


for _name in LEARNING_METHODS:
    if _name not in registered_methods():
        register_method(_name, functools.partial(build_agent, _name), seeded=True)
