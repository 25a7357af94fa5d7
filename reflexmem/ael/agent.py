"""Deterministic reference agents (no memory yet) for the AEL benchmark.

Two variants stand in for the paper's non-memory LLM rows:

- `StatelessAgent`: a fixed short-horizon momentum blend on raw closes.
- `ToolsAgent`: runs the analysis tools and a fixed planner that holds cash.

The planner takes an optional `PlannerContext`, the hook through which a memory
or retrieval layer will later bias decisions; with `None` it is the plain tools
agent. Randomness comes only from the `numpy.random.Generator` handed in, and it
is drawn unconditionally (same number of draws every bar, whatever the prices),
so a seed reproduces a run exactly and the draws cannot depend on the future.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from reflexmem.ael.environment import Decision, MarketView
from reflexmem.ael.pit_guard import Evidence, EvidenceGuard
from reflexmem.ael.tools import ToolConfig, ToolReport, run_tools
from reflexmem.prices.panel import FloatArray

RISK_OFF = "risk_off"
RISK_ON = "risk_on"


@dataclass(frozen=True)
class RecalledEntry:
    """One item a memory layer recalled for this decision.

    `ticker_tilts` are signed additions to the planner's composite score (about
    one unit = one cross-sectional standard deviation); `cash_bias` is a signed
    change of the cash weight. Both are scaled by `relevance` and by the
    context's confidence.
    """

    text: str
    relevance: float = 1.0
    ticker_tilts: Mapping[str, float] = field(default_factory=dict)
    cash_bias: float = 0.0


@dataclass(frozen=True)
class PlannerContext:
    """What a memory/retrieval layer may tell the planner before it decides.

    `insight` is carried into the decision notes only; the planner never parses
    free text, so the bias it applies is fully determined by the numbers here.
    """

    regime: str | None = None
    insight: str = ""
    confidence: float = 0.0
    recalled: tuple[RecalledEntry, ...] = ()


ContextSource = PlannerContext | Callable[[MarketView], PlannerContext | None] | None


@dataclass(frozen=True)
class PlannerConfig:
    """Knobs of the fixed planner.

    Cash = base_cash + risk_cash_slope * (book risk - 0.5), clipped to
    [0, max_cash]; the risky part blends score-proportional weights with 1/N by
    `diversification` so no single score can concentrate the book.
    """

    base_cash: float = 0.10
    risk_cash_slope: float = 0.5
    max_cash: float = 0.5
    diversification: float = 0.25
    noise: float = 0.02
    regime_cash_shift: float = 0.2


@dataclass(frozen=True, eq=False)
class Plan:
    """Planner output: risky weights plus cash summing to 1."""

    weights: FloatArray
    cash: float
    notes: tuple[str, ...]


def _tilt_weights(scores: FloatArray, diversification: float) -> FloatArray:
    """Long-only weights summing to 1 from scores (1/N when none is positive)."""
    n = scores.shape[0]
    positive = np.clip(scores, 0.0, None)
    total = float(positive.sum())
    if not np.isfinite(total) or total <= 0:
        return np.full(n, 1.0 / n)
    return np.asarray((1.0 - diversification) * positive / total + diversification / n)


def plan_allocation(
    report: ToolReport,
    context: PlannerContext | None,
    rng: np.random.Generator,
    config: PlannerConfig | None = None,
) -> Plan:
    """Turn tool outputs (and optionally a memory context) into weights and cash.

    Context bias, all scaled by confidence c in [0, 1]:
    - each recalled entry adds c * relevance * tilt to the named tickers' scores
      and c * relevance * cash_bias to the cash weight;
    - regime `risk_off` adds c * regime_cash_shift to cash, `risk_on` removes it;
      other labels change nothing.
    Cash is clipped to [0, max_cash] after the bias.
    """
    cfg = config or PlannerConfig()
    n = len(report.tickers)
    noise = rng.standard_normal(n)
    scores = report.signal.score + cfg.noise * noise
    cash = cfg.base_cash + cfg.risk_cash_slope * (report.risk_score.portfolio - 0.5)
    notes = [f"risk {report.risk_score.portfolio:.2f} ({report.risk_score.regime})"]
    if context is not None:
        conf = float(np.clip(context.confidence, 0.0, 1.0))
        index = {t: i for i, t in enumerate(report.tickers)}
        for entry in context.recalled:
            scale = conf * float(entry.relevance)
            for ticker, tilt in entry.ticker_tilts.items():
                if ticker in index:
                    scores[index[ticker]] += scale * float(tilt)
            cash += scale * float(entry.cash_bias)
        if context.regime == RISK_OFF:
            cash += conf * cfg.regime_cash_shift
        elif context.regime == RISK_ON:
            cash -= conf * cfg.regime_cash_shift
        notes.append(
            f"context regime={context.regime} confidence={conf:.2f}"
            f" recalled={len(context.recalled)}"
            + (f" insight={context.insight!r}" if context.insight else "")
        )
    cash = float(np.clip(cash, 0.0, cfg.max_cash))
    weights = (1.0 - cash) * _tilt_weights(scores, cfg.diversification)
    notes.append(f"cash {cash:.3f}")
    return Plan(np.asarray(weights, dtype=np.float64), cash, tuple(notes))


_REPORTS: dict[tuple[bytes, ToolConfig], ToolReport] = {}
_REPORTS_SIZE = 20_000


def cached_report(view: MarketView, config: ToolConfig) -> ToolReport:
    """`run_tools` keyed by the view's history digest, shared by every seed in a process.

    Tools read closes 0..t only, so identical visible histories get identical reports;
    reports are never mutated by their readers.
    """
    key = (view.history_key, config)
    hit = _REPORTS.get(key)
    if hit is None:
        hit = run_tools(view, config)
        if len(_REPORTS) >= _REPORTS_SIZE:
            _REPORTS.clear()
        _REPORTS[key] = hit
    return hit


class StatelessAgent:
    """Fixed short-horizon momentum blend, fully invested, no memory.

    Score = sum_k blend_k * (C_t / C_t-L_k - 1) (0 for lookbacks longer than the
    history) plus tiny seeded noise for tie-breaking; weights follow the positive
    part of the score, blended with 1/N.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        lookbacks: tuple[int, ...] = (1, 2, 4),
        blend: tuple[float, ...] = (0.5, 0.3, 0.2),
        noise: float = 1e-4,
        diversification: float = 0.25,
    ) -> None:
        if len(lookbacks) != len(blend):
            raise ValueError("lookbacks and blend must have the same length")
        self.rng = rng
        self.lookbacks = np.asarray(lookbacks, dtype=np.int64)
        self.blend = np.asarray(blend, dtype=np.float64)
        self.noise = noise
        self.diversification = diversification

    def __call__(self, view: MarketView, /) -> Decision:
        """Weights from the visible closes."""
        c = view.closes
        available = self.lookbacks <= view.t
        past = c[np.where(available, view.t - self.lookbacks, view.t)]
        moves = np.where(available[:, None], c[-1][None, :] / past - 1.0, 0.0)
        noise = self.rng.standard_normal(view.n_assets)
        scores = self.blend @ moves + self.noise * noise
        return Decision(_tilt_weights(np.asarray(scores), self.diversification))


class ToolsAgent:
    """Tools + fixed planner with a cash weight; optional memory context and evidence.

    Evidence (e.g. the D-full snapshots) goes through an `EvidenceGuard` at every
    decision; refusals are attached to the `Decision` and listed in its notes,
    so a leak attempt is visible in the agent's own output. Admitted evidence is
    only listed: the reference planner trades on prices alone.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        *,
        context: ContextSource = None,
        evidence: Sequence[Evidence] = (),
        guard: EvidenceGuard | None = None,
        planner: PlannerConfig | None = None,
        tools: ToolConfig | None = None,
    ) -> None:
        self.rng = rng
        self.context = context
        self.evidence = tuple(evidence)
        self.guard = guard if guard is not None else EvidenceGuard()
        self.planner = planner or PlannerConfig()
        self.tools = tools or ToolConfig()

    def _context_for(self, view: MarketView) -> PlannerContext | None:
        if self.context is None or isinstance(self.context, PlannerContext):
            return self.context
        return self.context(view)

    def __call__(self, view: MarketView, /) -> Decision:
        """Weights (and notes, refusals) for bar t."""
        report = cached_report(view, self.tools)
        admitted, refused = self.guard.admit(self.evidence, view.decision_time)
        plan = plan_allocation(report, self._context_for(view), self.rng, self.planner)
        notes = list(plan.notes)
        if admitted:
            notes.append("admitted evidence: " + ", ".join(e.source for e in admitted))
        notes.extend(r.describe() for r in refused)
        return Decision(plan.weights, tuple(notes), refused)
