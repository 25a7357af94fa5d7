"""Statistics for a benchmark result: per-row intervals, pooled rows, comparisons, verdict.

Seeded methods enter the significance tests as their *seed ensemble*: at every bar the
mean net return of the seeds (an equal split of capital over the seeds), which is the
method's expected behaviour and not one lucky seed; per-seed rows keep their own
standard error and interval. Test windows are bootstrapped independently per
(panel, fold) and pooled by adding their sums (`stats.pooled_sharpes`). The headline
comparator of every row is `val_selected_rule`; `comparisons` holds every learning
method against every comparator, pooled per panel and over all panels.

SPA p-values (1,000 bootstrap replicates each) are computed on the headline scope
only, the test windows of all panels pooled (of the one panel when there is one):
for the seed-ensemble rows against `val_selected_rule`, for every learning method
against `val_selected_rule` and `equal_weight`, and for `ael` against every
comparator. Per-fold and per-panel rows carry the Sharpe standard error and the
bootstrap interval, which cost two matrix products.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from reflexmem.ael.learning_variants import LEARNING_METHODS
from reflexmem.ael.results import BenchmarkResult, SeriesKey, metric_rows
from reflexmem.ael.run_tasks import HINDSIGHT, SELECTED
from reflexmem.ael.stats import ALPHA, Difference, Window, beats_all_pvalue, compare, make_window
from reflexmem.ael.table import Row

HEADLINE = (SELECTED, "equal_weight")
HEADLINE_COST = 10.0
SPA_ROW_KINDS = ("learning", "agent")


def _net(pair: tuple[np.ndarray, np.ndarray], cost: float) -> np.ndarray:
    gross, turnover = pair
    return np.asarray(gross - cost * 1e-4 * turnover, dtype=np.float64)


class _Windows:
    """Bootstrap windows per (panel, fold, cost) with every series of the run."""

    def __init__(self, result: BenchmarkResult) -> None:
        self.result = result
        keys = sorted({(k[0], k[1]) for k in result.series}, key=str)
        self.windows: dict[tuple[str, int, float], Window] = {}
        self.kinds: dict[str, str] = {}
        for r in result.rows:
            self.kinds.setdefault(r["method"], r["kind"])
        for panel, fold in keys:
            counts = None
            for cost in result.cost_bps:
                names, rows = self._series(panel, fold, cost)
                if counts is None:
                    w = make_window(names, rows, seed=len(self.windows))
                    counts, block = w.counts, w.block
                self.windows[(panel, fold, cost)] = Window(tuple(names), rows, counts, block)

    def _series(self, panel: str, fold: int, cost: float) -> tuple[list[str], np.ndarray]:
        names: list[str] = []
        rows: list[np.ndarray] = []
        seeded: dict[str, list[np.ndarray]] = {}
        order = {m: i for i, m in enumerate(self.result.methods)}

        def position(item: tuple[SeriesKey, object]) -> tuple[int, int, str]:
            (_p, _f, method, seed), _ = item
            base = method.split("@")[0]
            return (order.get(base, len(order)), -1 if seed is None else seed, method)

        for (p, f, method, seed), pair in sorted(self.result.series.items(), key=position):
            if (p, f) != (panel, fold):
                continue
            if "@" in method:
                base, at = method.split("@")
                if float(at) != cost:
                    continue
                names.append(base)
                rows.append(_net(pair, cost))
            elif seed is None:
                names.append(method)
                rows.append(_net(pair, cost))
            else:
                names.append(f"{method}#{seed}")
                net = _net(pair, cost)
                rows.append(net)
                seeded.setdefault(method, []).append(net)
        for method, nets in seeded.items():
            names.append(method)
            rows.append(np.mean(np.stack(nets), axis=0))
        return names, np.stack(rows)

    def scope(self, panel: str | None, cost: float) -> list[Window]:
        """Windows of one panel (or all panels) at one cost level."""
        return [w for (p, _f, c), w in self.windows.items() if c == cost and panel in (None, p)]


def add_statistics(result: BenchmarkResult, bars_per_year: dict[str, float]) -> None:
    """Fill ci/spa of the fold rows, add pooled rows, comparisons and the verdict."""
    if not result.series:
        return
    wins = _Windows(result)
    for row in result.rows:
        if row["split"] != "test" or row["method"] == SELECTED:
            continue
        name = row["method"] if row["seed"] is None else f"{row['method']}#{row['seed']}"
        w = wins.windows.get((row["panel"], row["fold"], row["cost_bp"]))
        if w is None or SELECTED not in w.names:
            continue
        (d,) = compare([w], name, [SELECTED], bars_per_year[row["panel"]])
        row["ci_low"], row["ci_high"] = d.ci_low, d.ci_high
    panels = list(bars_per_year)
    scopes: list[str | None] = [*panels, None] if len(panels) > 1 else [panels[0]]
    common = Counter(bars_per_year.values()).most_common(1)[0][0]
    pooled: list[Row] = []
    for scope in scopes:
        bpy = bars_per_year[scope] if scope is not None else common
        members = [p for p in panels if scope in (None, p) and bars_per_year[p] == bpy]
        for cost in result.cost_bps:
            windows = [w for w in wins.scope(None, cost) if _panel_of(wins, w) in members]
            spa = scope is scopes[-1]
            pooled += _pooled_rows(windows, wins, scope or "all", cost, bpy, spa)
    result.rows += pooled
    result.comparisons, result.verdict = _comparisons(wins, scopes, bars_per_year, common, result)


def _panel_of(wins: _Windows, window: Window) -> str:
    return next(p for (p, _f, _c), w in wins.windows.items() if w is window)


def _pooled_rows(
    windows: Sequence[Window], wins: _Windows, panel: str, cost: float, bpy: float, spa_on: bool
) -> list[Row]:
    if not windows:
        return []
    names = [n for n in windows[0].names if all(n in w.names for w in windows)]
    rows: list[Row] = []
    for name in names:
        method, _, seed_text = name.partition("#")
        kind = wins.kinds.get(method, "rule")
        seed: int | str | None = int(seed_text) if seed_text else None
        if not seed_text and kind in SPA_ROW_KINDS:
            seed = "ensemble"
        series = np.concatenate([w.series[w.names.index(name)] for w in windows])
        (row,) = metric_rows(
            panel=panel,
            fold="pooled",
            method=method,
            seed=seed,
            kind=kind,
            split="test",
            gross=series,
            turnover=np.zeros_like(series),
            cost_bps=(0.0,),
            bars_per_year=bpy,
        )
        row["cost_bp"] = cost
        if method != SELECTED and SELECTED in names:
            spa = [SELECTED] if seed == "ensemble" and spa_on else []
            (d,) = compare(windows, name, [SELECTED], bpy, spa_for=spa)
            row["ci_low"], row["ci_high"], row["spa_p"] = d.ci_low, d.ci_high, d.spa_p
        rows.append(row)
    return rows


def _comparisons(
    wins: _Windows,
    scopes: list[str | None],
    bars_per_year: dict[str, float],
    common: float,
    result: BenchmarkResult,
) -> tuple[list[dict[str, Any]], list[str]]:
    learners = [m for m in result.methods if m in LEARNING_METHODS]
    out: list[dict[str, Any]] = []
    verdict: list[str] = []
    headline_scope = scopes[-1]
    for scope in scopes:
        bpy = bars_per_year[scope] if scope is not None else common
        members = [p for p in bars_per_year if scope in (None, p) and bars_per_year[p] == bpy]
        for cost in result.cost_bps:
            windows = [w for w in wins.scope(None, cost) if _panel_of(wins, w) in members]
            if not windows:
                continue
            present = [n for n in windows[0].names if all(n in w.names for w in windows)]
            comparators = [
                n
                for n in present
                if "#" not in n and wins.kinds.get(n) not in ("learning",) and n != "stateless"
            ]
            for method in learners:
                if method not in present:
                    continue
                every = scope == headline_scope and method == "ael"
                headline = [c for c in comparators if c in HEADLINE]
                spa = comparators if every else headline if scope == headline_scope else []
                diffs = compare(windows, method, comparators, bpy, spa_for=spa)
                out.extend(
                    _as_dict(d, scope or "all", cost, wins.kinds.get(d.comparator, ""))
                    for d in diffs
                )
                if scope == headline_scope:
                    verdict += _verdict_lines(method, cost, diffs, wins.kinds, every)
    return out, verdict


def _as_dict(d: Difference, scope: str, cost: float, kind: str) -> dict[str, Any]:
    return {
        "scope": scope,
        "cost_bp": cost,
        "method": d.method,
        "comparator": d.comparator,
        "comparator_kind": kind,
        "sharpe_diff": d.diff,
        "ci_low": d.ci_low,
        "ci_high": d.ci_high,
        "spa_p": d.spa_p,
        "verdict": d.words(),
    }


def _verdict_lines(
    method: str, cost: float, diffs: list[Difference], kinds: dict[str, str], every: bool
) -> list[str]:
    by = {d.comparator: d for d in diffs}
    lines = [f"{cost:g} bp, pooled: {by[c].words()}" for c in HEADLINE if c in by]
    honest = [d for d in diffs if kinds.get(d.comparator) not in ("hindsight",)]
    if every:
        p = beats_all_pvalue(honest)
        wins = all(d.ci_low > 0 for d in honest)
        lines.append(
            f"{cost:g} bp, pooled: {method} beats every non-hindsight comparator"
            f" ({len(honest)}): {'yes' if wins and p is not None and p < ALPHA else 'no'}"
            f" (all intervals above zero: {'yes' if wins else 'no'};"
            f" intersection-union SPA p = {p if p is None else round(p, 3)})"
        )
        peers = [d for d in diffs if kinds.get(d.comparator) == "peer"]
        lines += [f"{cost:g} bp, pooled: {d.words()}" for d in peers]
    if cost == HEADLINE_COST and all(c in by for c in HEADLINE):
        ok = all(by[c].ci_low > 0 and (by[c].spa_p or 1.0) < ALPHA for c in HEADLINE)
        lines.append(
            f"TARGET ({cost:g} bp, pooled): {method} beats {SELECTED} and equal_weight with"
            f" the 95% interval above zero and SPA p < {ALPHA}: {'YES' if ok else 'NO'}"
        )
    return lines


__all__ = ["HINDSIGHT", "add_statistics"]
