"""The AEL benchmark end to end: panels, walk-forward folds, every method, statistics.

`run_benchmark(inputs, ...)` runs, for every panel and fold: every fixed rule of the
family, the validation-selected and the hindsight-best rule (`run_tasks`), the
online-portfolio peers if their weights are supplied (computed in an isolated
environment, see `apps.bench.olps`), and every seeded method (the reference agents and
the learning variants) once per seed. Seeded units are independent and run in
`workers` processes; the rows do not depend on how they were scheduled. Then
`significance` adds standard errors, bootstrap intervals and SPA p-values and the
verdict in words.

Nothing is tuned on a test split: the learning agent has no tuned hyperparameter
(its constants are fixed a priori, `docs/ael-benchmark.md`), the validation split is
read by `val_selected_rule` only, and every learner is frozen from the first test
decision (checked by fingerprint; a run whose test changed learning state raises).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from datetime import date
from pathlib import Path

import numpy as np

from reflexmem.ael.learning_variants import LEARNING_METHODS
from reflexmem.ael.metrics import BARS_PER_YEAR
from reflexmem.ael.results import BenchmarkResult, RunRecord, SeriesKey
from reflexmem.ael.roles import evidence_for
from reflexmem.ael.rules import RULE_NAMES, RuleBook
from reflexmem.ael.run_tasks import (
    HINDSIGHT,
    SELECTED,
    PanelInputs,
    UnitResult,
    peer_unit,
    rule_units,
    seeded_unit,
)
from reflexmem.ael.significance import add_statistics
from reflexmem.ael.splits import (
    DFULL_TRAIN_END,
    DFULL_VAL_END,
    ChronoSplits,
    split_by_dates,
    split_by_fractions,
    walk_forward,
)
from reflexmem.ael.table import DEFAULT_COST_BPS, DEFAULT_SEEDS, Row, get_method
from reflexmem.prices.panel import PricePanel, load_dfull, load_panel

ProgressCallback = Callable[[int, int, str], None]
"""Called as (steps done, steps in total, what just finished)."""

PeerWeights = dict[tuple[str, str, int], np.ndarray]
"""(panel, peer, fold) -> weights per decision bar of the fold."""

FALLBACK_FRACTIONS = (0.6, 0.2)
PEER_METHODS = ("olmar", "pamr", "ons", "up", "bcrp")
AGENT_METHODS = ("stateless", "tools")
COMPARATOR_METHODS = (*RULE_NAMES, SELECTED, HINDSIGHT)


def default_methods(with_peers: bool) -> tuple[str, ...]:
    """Every method of the table, in display order."""
    peers = PEER_METHODS if with_peers else ()
    return (*COMPARATOR_METHODS, *peers, *AGENT_METHODS, *LEARNING_METHODS)


def known_methods() -> tuple[str, ...]:
    """Every name `--methods` accepts."""
    return default_methods(True)


def default_splits(panel: PricePanel) -> ChronoSplits:
    """D-full's protocol dates when the panel spans them, else 60/20/20 by bars."""
    days = panel.local_dates
    train_end, val_end = np.datetime64(DFULL_TRAIN_END), np.datetime64(DFULL_VAL_END)
    if days.size and days[0] <= train_end < val_end < days[-1]:
        return split_by_dates(days, DFULL_TRAIN_END, DFULL_VAL_END)
    return split_by_fractions(panel.n_bars, *FALLBACK_FRACTIONS)


def panel_inputs(
    panel: PricePanel,
    *,
    name: str,
    folds: int = 1,
    bars_per_year: float = BARS_PER_YEAR,
    splits: ChronoSplits | None = None,
    source: str | None = None,
) -> PanelInputs:
    """Cut a panel into folds: the given splits, one protocol fold, or K walk-forward ones."""
    if splits is not None:
        cut: tuple[ChronoSplits, ...] = (splits,)
    elif folds == 1:
        cut = (default_splits(panel),)
    else:
        cut = walk_forward(panel.n_bars, folds)
    for f, fold in enumerate(cut):
        for split in fold:
            if split.n_returns < 2:
                raise ValueError(
                    f"{name} fold {f}: split {split.name} has {split.n_returns} returns; need >= 2"
                )
    return PanelInputs(
        name, panel, cut, evidence_for(panel.tickers), source or panel.source, bars_per_year
    )


def load_inputs(
    prices: Path | None = None,
    *,
    train_end: date | None = None,
    val_end: date | None = None,
    folds: int = 1,
    bars_per_year: float = BARS_PER_YEAR,
) -> PanelInputs:
    """D-full (protocol splits) or a CSV/Parquet panel; dates, one fold or K folds."""
    if (train_end is None) != (val_end is None):
        raise ValueError("give both train_end and val_end, or neither")
    panel = load_dfull() if prices is None else load_panel(prices)
    name = "dfull" if prices is None else Path(prices).stem
    splits = None
    if train_end is not None and val_end is not None:
        splits = split_by_dates(panel.local_dates, train_end, val_end)
    return panel_inputs(
        panel,
        name=name,
        folds=folds,
        bars_per_year=bars_per_year,
        splits=splits,
        source=panel.source or str(prices),
    )


_WORKER_INPUTS: tuple[PanelInputs, ...] = ()


def _run_seeded(job: tuple[int, int, str, int, tuple[float, ...]]) -> UnitResult:
    p, fold, method, seed, costs = job
    return seeded_unit(_WORKER_INPUTS[p], fold, method, seed, costs)


def run_benchmark(
    inputs: PanelInputs | PricePanel | Sequence[PanelInputs],
    *,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    methods: Sequence[str] | None = None,
    cost_bps: Sequence[float] = DEFAULT_COST_BPS,
    peers: PeerWeights | Callable[[], PeerWeights] | None = None,
    workers: int = 1,
    progress_callback: ProgressCallback | None = None,
    include_deterministic: bool = True,
    statistics: bool = True,
) -> BenchmarkResult:
    """Every method x seed x panel x fold x split x cost level, plus statistics."""
    started = time.perf_counter()
    if isinstance(inputs, PricePanel):
        panels: tuple[PanelInputs, ...] = (panel_inputs(inputs, name="panel"),)
    elif isinstance(inputs, PanelInputs):
        panels = (inputs,)
    else:
        panels = tuple(inputs)
    costs = tuple(float(c) for c in cost_bps)
    names = tuple(methods) if methods is not None else default_methods(peers is not None)
    unknown = [m for m in names if m not in known_methods()]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; known: {list(known_methods())}")
    seeded = [m for m in names if m in (*AGENT_METHODS, *LEARNING_METHODS)]
    for m in seeded:
        get_method(m)
    seed_list = tuple(int(s) for s in seeds)
    jobs = [
        (p, f, m, s, costs)
        for p, pin in enumerate(panels)
        for f in range(len(pin.folds))
        for m in seeded
        for s in seed_list
    ]
    total = len(jobs) + (len(panels) if include_deterministic else 0)
    done = 0

    def step(label: str) -> None:
        nonlocal done
        done += 1
        if progress_callback is not None:
            progress_callback(done, total, label)

    units: list[UnitResult] = []
    selections: dict[str, object] = {}
    global _WORKER_INPUTS
    _WORKER_INPUTS = panels
    if workers > 1 and len(jobs) > 1:
        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            futures = [pool.submit(_run_seeded, j) for j in jobs]
            if statistics:
                import arch.bootstrap  # noqa: F401  (a 2-5 s import, done while workers run)
            det = _deterministic(panels, names, costs, selections) if include_deterministic else []
            units.extend(det)
            if include_deterministic:
                for pin in panels:
                    step(f"{pin.name}: rules")
            for job, fut in zip(jobs, futures, strict=True):
                units.append(fut.result())
                step(f"{job[2]} seed {job[3]} {panels[job[0]].name} fold {job[1]}")
    else:
        if include_deterministic:
            units += _deterministic(panels, names, costs, selections)
            for pin in panels:
                step(f"{pin.name}: rules")
        for job in jobs:
            units.append(_run_seeded(job))
            step(f"{job[2]} seed {job[3]} {panels[job[0]].name} fold {job[1]}")
    peer_seconds = 0.0
    peer_info: dict[str, object] = {"ran": False}
    wanted_peers = [m for m in names if m in PEER_METHODS]
    if peers is not None and wanted_peers and include_deterministic:
        t0 = time.perf_counter()
        weights = peers() if callable(peers) else peers
        peer_seconds = time.perf_counter() - t0
        missing: list[str] = []
        for pin in panels:
            for f in range(len(pin.folds)):
                for peer in wanted_peers:
                    w = weights.get((pin.name, peer, f))
                    if w is None:
                        missing.append(f"{pin.name}/{peer}/{f}")
                        continue
                    units.append(peer_unit(pin, f, peer, w, costs))
        peer_info = {
            "ran": len(missing) < len(panels) * len(wanted_peers),
            "methods": wanted_peers,
            "wait_seconds": peer_seconds,
            "missing": missing,
        }
    return _assemble(
        panels, names, seed_list, costs, units, selections, peer_info, started, statistics
    )


def _deterministic(
    panels: tuple[PanelInputs, ...],
    names: tuple[str, ...],
    costs: tuple[float, ...],
    selections: dict[str, object],
) -> list[UnitResult]:
    rules = [m for m in names if m in RULE_NAMES]
    out: list[UnitResult] = []
    for pin in panels:
        book = RuleBook(pin.panel)
        for f in range(len(pin.folds)):
            units, chosen = rule_units(pin, f, book, rules, costs)
            keep = set(names)
            out += [u for u in units if u.method in keep]
            selections[f"{pin.name}/{f}"] = chosen
    return out


def _assemble(
    panels: tuple[PanelInputs, ...],
    names: tuple[str, ...],
    seeds: tuple[int, ...],
    costs: tuple[float, ...],
    units: list[UnitResult],
    selections: dict[str, object],
    peer_info: dict[str, object],
    started: float,
    statistics: bool,
) -> BenchmarkResult:
    order = {m: i for i, m in enumerate(names)}
    panel_order = {p.name: i for i, p in enumerate(panels)}
    rows = _sorted_rows([r for u in units for r in u.rows if r["method"] in order], names, panels)
    series: dict[SeriesKey, tuple[np.ndarray, np.ndarray]] = {}
    runs: list[RunRecord] = []
    per_method: dict[str, float] = {}
    for u in units:
        series.update(u.series)
        per_method[u.method] = per_method.get(u.method, 0.0) + u.seconds
        if u.record is not None:
            runs.append(u.record)
    runs.sort(key=lambda r: (panel_order[r.panel], r.fold, order[r.method], r.seed))
    timing: dict[str, object] = {
        "runs_seconds": time.perf_counter() - started,
        "per_method_seconds": per_method,
    }
    result = BenchmarkResult(
        rows,
        names,
        seeds,
        costs,
        timing,
        runs,
        series,
        {
            p.name: {
                "source": p.source,
                "bars": p.panel.n_bars,
                "assets": p.panel.n_assets,
                "bars_per_year": p.bars_per_year,
                "folds": [{s.name: [s.start, s.stop] for s in fold} for fold in p.folds],
            }
            for p in panels
        },
        selections,
        peers=peer_info,
    )
    return _finish(result, statistics, started)


def _sorted_rows(
    rows: list[Row], names: Sequence[str], panels: Sequence[PanelInputs] | Sequence[str]
) -> list[Row]:
    order = {m: i for i, m in enumerate(names)}
    labels = [p if isinstance(p, str) else p.name for p in panels]
    panel_order = {p: i for i, p in enumerate(labels)}
    split_order = {"train": 0, "val": 1, "test": 2}
    return sorted(
        rows,
        key=lambda r: (
            panel_order[r["panel"]],
            r["fold"],
            order[r["method"]],
            -1 if r["seed"] is None else r["seed"],
            split_order[r["split"]],
            r["cost_bp"],
        ),
    )


def _finish(result: BenchmarkResult, statistics: bool, started: float) -> BenchmarkResult:
    if statistics:
        t0 = time.perf_counter()
        bpy = {name: float(info["bars_per_year"]) for name, info in result.panels.items()}
        add_statistics(result, bpy)
        result.timing["statistics_seconds"] = time.perf_counter() - t0
    result.timing["total_seconds"] = time.perf_counter() - started
    return result


def combine_parts(
    parts: Sequence[BenchmarkResult], *, started: float | None = None, statistics: bool = True
) -> BenchmarkResult:
    """Merge per-seed parts (run with `statistics=False`) into the result of one call."""
    began = time.perf_counter() if started is None else started
    first = parts[0]
    names = first.methods
    panels = list(first.panels)
    rows = _sorted_rows([r for p in parts for r in p.fold_rows()], names, panels)
    seeds = tuple(sorted({s for p in parts for s in p.seeds}))
    order = {m: i for i, m in enumerate(names)}
    runs = sorted(
        (r for p in parts for r in p.runs),
        key=lambda r: (panels.index(r.panel), r.fold, order[r.method], r.seed),
    )
    per_method: dict[str, float] = {}
    series: dict[SeriesKey, tuple[np.ndarray, np.ndarray]] = {}
    selections: dict[str, object] = {}
    for part in parts:
        series.update(part.series)
        selections.update(part.selections)
        for m, s in part.timing["per_method_seconds"].items():
            per_method[m] = per_method.get(m, 0.0) + s
    timing: dict[str, object] = {"runs_seconds": time.perf_counter() - began}
    timing["per_method_seconds"] = per_method
    result = BenchmarkResult(
        rows, names, seeds, first.cost_bps, timing, runs, series, first.panels, selections
    )
    return _finish(result, statistics, began)
