"""The units of a benchmark run: fixed rules and selections per fold, one seeded run.

Fixed rules are priced from a `RuleBook` (vectorised, identical to stepping their
allocators bar by bar; tested). `val_selected_rule` is, per fold and cost level, the
family rule with the best *validation* Sharpe at that cost, held through test: what a
careful user does without learning. `hindsight_best_rule` is the rule with the best
*test* Sharpe, a ceiling no method could know in advance (kind `hindsight`). A seeded
unit runs one allocator through one fold with `MarketEnvironment.run_splits`.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np

from reflexmem.ael.environment import Episode, MarketEnvironment
from reflexmem.ael.learning import RuleAgent, agent_session
from reflexmem.ael.learning_variants import LEARNING_METHODS
from reflexmem.ael.metrics import sharpe
from reflexmem.ael.pit_guard import Evidence
from reflexmem.ael.pricing import fold_span, price_path
from reflexmem.ael.regimes import REGIMES
from reflexmem.ael.results import RunRecord, episode_rows
from reflexmem.ael.rules import RuleBook
from reflexmem.ael.splits import ChronoSplits
from reflexmem.ael.table import Row, get_method
from reflexmem.prices.panel import PricePanel

SELECTED = "val_selected_rule"
HINDSIGHT = "hindsight_best_rule"


@dataclass(frozen=True, eq=False)
class PanelInputs:
    """One panel of a benchmark run: prices, walk-forward folds, evidence, clock."""

    name: str
    panel: PricePanel
    folds: tuple[ChronoSplits, ...]
    evidence: tuple[Evidence, ...]
    source: str
    bars_per_year: float


@dataclass(eq=False)
class UnitResult:
    """Rows, the test series and (for learning) the record of one unit."""

    rows: list[Row]
    series: dict[tuple[str, int, str, int | None], tuple[np.ndarray, np.ndarray]]
    record: RunRecord | None
    seconds: float
    method: str


def _test_series(ep: Episode) -> tuple[np.ndarray, np.ndarray]:
    return ep.gross_returns.copy(), ep.turnover.copy()


def rule_units(
    inputs: PanelInputs, fold: int, book: RuleBook, rules: list[str], cost_bps: tuple[float, ...]
) -> tuple[list[UnitResult], dict[str, Any]]:
    """Every fixed rule, the validation-selected and the hindsight-best rule of one fold."""
    splits = inputs.folds[fold]
    start, stop = fold_span(splits)
    wanted = set(rules) | {SELECTED, HINDSIGHT}
    names = book.names()
    episodes: dict[str, dict[str, Episode]] = {}
    units: list[UnitResult] = []
    for k, name in enumerate(names):
        began = time.perf_counter()
        eps = price_path(inputs.panel, splits, book.weights[k, start : stop - 1], name)
        episodes[name] = eps
        if name in wanted:
            units.append(_unit(inputs, fold, name, "rule", eps, cost_bps, began))
    selections: dict[str, Any] = {}
    for label, split, kind in ((SELECTED, "val", "selected"), (HINDSIGHT, "test", "hindsight")):
        if label not in wanted:
            continue
        chosen: dict[str, str] = {}
        for cost in cost_bps:
            scores = [
                float(sharpe(episodes[n][split].net_returns(cost), inputs.bars_per_year))
                for n in names
            ]
            finite = [s if math.isfinite(s) else -math.inf for s in scores]
            chosen[f"{cost:g}"] = names[int(np.argmax(finite))]
        selections[label] = chosen
        began = time.perf_counter()
        rows: list[Row] = []
        series: dict[tuple[str, int, str, int | None], tuple[np.ndarray, np.ndarray]] = {}
        for cost in cost_bps:
            eps = episodes[chosen[f"{cost:g}"]]
            part = episode_rows(
                eps,
                panel=inputs.name,
                fold=fold,
                method=label,
                seed=None,
                kind=kind,
                cost_bps=(cost,),
                bars_per_year=inputs.bars_per_year,
            )
            rows += part
            series[(inputs.name, fold, f"{label}@{cost:g}", None)] = _test_series(eps["test"])
        units.append(UnitResult(rows, series, None, time.perf_counter() - began, label))
    return units, selections


def _unit(
    inputs: PanelInputs,
    fold: int,
    method: str,
    kind: str,
    eps: dict[str, Episode],
    cost_bps: tuple[float, ...],
    began: float,
    seed: int | None = None,
    record: RunRecord | None = None,
) -> UnitResult:
    rows = episode_rows(
        eps,
        panel=inputs.name,
        fold=fold,
        method=method,
        seed=seed,
        kind=kind,
        cost_bps=cost_bps,
        bars_per_year=inputs.bars_per_year,
    )
    series = {(inputs.name, fold, method, seed): _test_series(eps["test"])}
    return UnitResult(rows, series, record, time.perf_counter() - began, method)


def peer_unit(
    inputs: PanelInputs,
    fold: int,
    peer: str,
    weights: np.ndarray,
    cost_bps: tuple[float, ...],
) -> UnitResult:
    """Price one peer's weights on one fold with the project's cost rule."""
    began = time.perf_counter()
    eps = price_path(inputs.panel, inputs.folds[fold], weights, f"{peer} fold {fold}")
    kind = "hindsight" if peer == "bcrp" else "peer"
    return _unit(inputs, fold, peer, kind, eps, cost_bps, began)


def _frequencies(agent: RuleAgent) -> tuple[dict[str, Any], dict[str, Any]]:
    policies: dict[str, dict[str, float]] = {}
    rules: dict[str, dict[str, dict[str, float]]] = {}
    start = 0
    for split, stop in agent.marks:
        chosen = agent.choices[start:stop]
        n = max(len(chosen), 1)
        policies[split] = {p: c / n for p, c in Counter(c[2] for c in chosen).items()}
        per: dict[str, dict[str, float]] = {}
        for regime in {c[0] for c in chosen}:
            arms = [c[1] for c in chosen if c[0] == regime]
            per[REGIMES[regime]] = {agent.names[a]: c / len(arms) for a, c in Counter(arms).items()}
        rules[split] = per
        start = stop
    return policies, rules


def _record(agent: RuleAgent, seed: int, panel: str, fold: int, seconds: float) -> RunRecord:
    decisions = [d for ep in agent.episodes.values() for d in ep.decisions]
    refused = sum(len(d.refusals) for d in decisions)
    example = next((d.refusals[0].describe() for d in decisions if d.refusals), "")
    policies, rules = _frequencies(agent)
    width = max((len(m) for m in agent.posterior_means), default=0)
    means = np.full((len(agent.posterior_means), width), np.nan)
    for i, row in enumerate(agent.posterior_means):
        means[i, : len(row)] = row
    return RunRecord(
        method=agent.name,
        seed=seed,
        panel=panel,
        fold=fold,
        decisions=len(agent.choices),
        seconds=seconds,
        policy_frequencies=policies,
        rule_frequencies=rules,
        arms=agent.policy_names,
        posterior_means=means,
        marks=list(agent.marks),
        frozen_checks=[c.to_dict() for c in agent.frozen_checks],
        reflections=list(agent.reflections),
        learned_state=agent.learned_state(),
        refusals_per_decision=refused / max(len(decisions), 1),
        refusal_example=example,
    )


def check_frozen(agent: RuleAgent, where: str) -> None:
    """Raise unless the test split ran with byte-identical learning state."""
    tested = [c for c in agent.frozen_checks if c.split == "test"]
    if not tested:
        raise RuntimeError(f"{where}: the test split did not run frozen")
    for check in tested:
        if not check.identical:
            raise RuntimeError(
                f"{where}: learning state changed during the frozen {check.split} split"
                f" ({check.before_sha256[:12]} -> {check.after_sha256[:12]})"
            )


def seeded_unit(
    inputs: PanelInputs, fold: int, method: str, seed: int, cost_bps: tuple[float, ...]
) -> UnitResult:
    """One seeded method (agent or learning) through one fold."""
    began = time.perf_counter()
    splits = inputs.folds[fold]
    env = MarketEnvironment(inputs.panel)
    spec = get_method(method)
    if method in LEARNING_METHODS:
        with agent_session(inputs.evidence) as session:
            eps = env.run_splits(tuple(splits), spec.factory(np.random.default_rng(seed)))
        (agent,) = session.built
        check_frozen(agent, f"{method} seed {seed} {inputs.name} fold {fold}")
        record = _record(agent, seed, inputs.name, fold, time.perf_counter() - began)
        eps = {k: _strip(v) for k, v in eps.items()}
        return _unit(inputs, fold, method, "learning", eps, cost_bps, began, seed, record)
    eps = env.run_splits(tuple(splits), spec.factory(np.random.default_rng(seed)))
    eps = {k: _strip(v) for k, v in eps.items()}
    return _unit(inputs, fold, method, "agent", eps, cost_bps, began, seed)


def _strip(ep: Episode) -> Episode:
    """Drop per-decision notes (large, and not needed once the record is taken)."""
    return Episode(
        ep.split,
        ep.tickers,
        ep.bars,
        ep.weights,
        ep.asset_returns,
        ep.gross_returns,
        ep.turnover,
        (),
        ep.seconds,
        ep.carry,
    )
