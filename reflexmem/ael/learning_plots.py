"""PNG plots of a benchmark run: equity per fold, rule choices per regime, policies, posteriors.

As in `plots.py`, matplotlib is imported inside the functions and drives the Agg
canvas directly (no pyplot, no global backend switch), so importing this module
is free and plotting works headless.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from reflexmem.prices.panel import FloatArray

if TYPE_CHECKING:
    from reflexmem.ael.results import BenchmarkResult, RunRecord

SPLIT_ORDER = ("train", "val", "test")


def _figure(width: float, height: float) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110)
    return fig, FigureCanvasAgg(fig)


def plot_fold_equity(result: BenchmarkResult, panel: str, out: Path, *, cost_bp: float) -> Path:
    """Compounded test value per method, one panel per fold (seeded: seed mean)."""
    keys = [k for k in result.series if k[0] == panel]
    folds = sorted({k[1] for k in keys})
    if not folds:
        raise ValueError(f"no test series for panel {panel}")
    fig, _ = _figure(6.0 * min(len(folds), 3), 4.8 * ((len(folds) + 2) // 3))
    methods = [m for m in result.methods if any(k[2].split("@")[0] == m for k in keys)]
    colours = dict(zip(methods, _colours(len(methods)), strict=True))
    cols = min(len(folds), 3)
    for i, fold in enumerate(folds):
        ax = fig.add_subplot((len(folds) + 2) // 3, cols, i + 1)
        for method in methods:
            nets = [
                pair[0] - cost_bp * 1e-4 * pair[1]
                for (p, f, m, _s), pair in result.series.items()
                if p == panel and f == fold and m in (method, f"{method}@{cost_bp:g}")
            ]
            if not nets:
                continue
            net = np.mean(np.stack(nets), axis=0)
            curve = np.concatenate([[1.0], np.cumprod(1.0 + net)])
            style = "-" if len(nets) > 1 else "--"
            ax.plot(curve, style, color=colours[method], linewidth=1.1, label=method)
        ax.axhline(1.0, color="0.6", linewidth=0.8, linestyle=":")
        ax.set_title(f"{panel} fold {fold} test ({cost_bp:g} bp)", fontsize=9)
        ax.grid(alpha=0.3)
        if i == 0:
            ax.legend(fontsize=6, ncol=2, loc="upper left")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def plot_rule_choices(runs: Sequence[RunRecord], method: str, out: Path) -> Path:
    """Share of test decisions per rule within each regime (mean over seeds and folds)."""
    from reflexmem.ael.regimes import REGIMES
    from reflexmem.ael.rules import RULE_NAMES

    grid = np.zeros((len(REGIMES), len(RULE_NAMES)))
    counts = np.zeros(len(REGIMES))
    for run in runs:
        if run.method != method:
            continue
        for regime, shares in run.rule_frequencies.get("test", {}).items():
            r = REGIMES.index(regime)
            counts[r] += 1
            for rule, share in shares.items():
                grid[r, RULE_NAMES.index(rule)] += share
    grid = grid / np.maximum(counts, 1)[:, None]
    fig, _ = _figure(10, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(grid, vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(np.arange(len(RULE_NAMES)), RULE_NAMES, rotation=35, ha="right", fontsize=8)
    ax.set_yticks(np.arange(len(REGIMES)), REGIMES, fontsize=8)
    for (i, j), v in np.ndenumerate(grid):
        if v > 0:
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="w")
    fig.colorbar(image, ax=ax, label="share of test decisions in the regime")
    ax.set_title(f"{method}: rule chosen per regime (test, frozen; mean over seeds and folds)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def mean_frequencies(runs: Sequence[RunRecord]) -> dict[str, dict[str, dict[str, float]]]:
    """Policy selection shares per method and split, averaged over seeds."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    by_method: dict[str, list[RunRecord]] = {}
    for run in runs:
        by_method.setdefault(run.method, []).append(run)
    for method, members in by_method.items():
        splits: dict[str, dict[str, float]] = {}
        for split in SPLIT_ORDER:
            shares: dict[str, float] = {}
            for run in members:
                for policy, share in run.policy_frequencies.get(split, {}).items():
                    shares[policy] = shares.get(policy, 0.0) + share / len(members)
            if shares:
                splits[split] = shares
        out[method] = splits
    return out


def plot_policy_frequencies(
    frequencies: Mapping[str, Mapping[str, Mapping[str, float]]], out: Path
) -> Path:
    """One panel per method: share of decisions per retrieval policy, bars per split."""
    if not frequencies:
        raise ValueError("no policy frequencies to plot")
    methods = list(frequencies)
    fig, _ = _figure(4.2 * len(methods), 4.6)
    split_colours = {"train": "#4c72b0", "val": "#dd8452", "test": "#55a868"}
    for k, method in enumerate(methods):
        ax = fig.add_subplot(1, len(methods), k + 1)
        per_split = frequencies[method]
        policies = sorted({p for shares in per_split.values() for p in shares})
        x = np.arange(len(policies))
        width = 0.8 / max(len(per_split), 1)
        for j, split in enumerate(s for s in SPLIT_ORDER if s in per_split):
            values = [per_split[split].get(p, 0.0) for p in policies]
            ax.bar(
                x + j * width - 0.4 + width / 2,
                values,
                width,
                label=split,
                color=split_colours.get(split),
            )
        ax.set_xticks(x, policies, rotation=35, ha="right", fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_title(method, fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        if k == 0:
            ax.set_ylabel("share of decisions (mean over seeds)")
            ax.legend(fontsize=8)
    fig.suptitle("Retrieval policy selected per decision")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def plot_posterior_means(
    traces: Mapping[str, tuple[Sequence[str], FloatArray, Sequence[tuple[str, int]]]],
    out: Path,
    *,
    warmup: Mapping[str, int] | None = None,
) -> Path:
    """One panel per method: posterior mean of every arm before each decision.

    `traces` maps a method to (arms, means of shape decisions x arms, split marks
    as (split, decisions so far)). Dotted lines mark split ends; the shaded span
    is the warm-up, during which the posterior cannot move.
    """
    if not traces:
        raise ValueError("no posterior traces to plot")
    methods = list(traces)
    fig, _ = _figure(4.6 * len(methods), 4.4)
    for k, method in enumerate(methods):
        arms, means, marks = traces[method]
        ax = fig.add_subplot(1, len(methods), k + 1)
        x = np.arange(means.shape[0])
        for j, arm in enumerate(arms):
            ax.plot(x, means[:, j], label=arm, linewidth=1.3)
        for split, stop in marks[:-1]:
            ax.axvline(stop, color="0.4", linestyle=":", linewidth=0.9)
            ax.text(
                stop,
                0.98,
                f" end {split}",
                fontsize=7,
                va="top",
                color="0.3",
                transform=ax.get_xaxis_transform(),
            )
        w = (warmup or {}).get(method, 0)
        if w:
            ax.axvspan(0, w, color="0.85", alpha=0.6, label=f"warm-up ({w})")
        spread = float(np.nanmax(np.abs(means - 0.5))) if np.isfinite(means).any() else 0.0
        ax.set_ylim(*((0.3, 0.7) if spread < 0.2 else (0.0, 1.0)))
        ax.set_title(method, fontsize=10)
        ax.set_xlabel("decision (episode)")
        ax.grid(alpha=0.3)
        if k == 0:
            ax.set_ylabel("posterior mean reward (mean over seeds)")
        ax.legend(fontsize=7, loc="lower right", ncol=2)
    fig.suptitle("Thompson bandit posterior means over episodes (frozen after validation)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out)
    return out


def mean_posterior_traces(
    runs: Sequence[RunRecord],
) -> dict[str, tuple[tuple[str, ...], FloatArray, list[tuple[str, int]]]]:
    """Posterior-mean traces averaged over seeds, for methods with more than one arm.

    Seeds can end with different arms (the evolution gate may add one); only the
    arms every seed has are averaged.
    """
    by_method: dict[str, list[RunRecord]] = {}
    for run in runs:
        if len(run.arms) > 1:
            by_method.setdefault(run.method, []).append(run)
    out: dict[str, tuple[tuple[str, ...], FloatArray, list[tuple[str, int]]]] = {}
    for method, members in by_method.items():
        arms = tuple(a for a in members[0].arms if all(a in r.arms for r in members))
        n = min(r.posterior_means.shape[0] for r in members)
        stack = np.stack([r.posterior_means[:n, [r.arms.index(a) for a in arms]] for r in members])
        out[method] = (arms, np.asarray(np.nanmean(stack, axis=0)), members[0].marks)
    return out


def write_plots(result: BenchmarkResult, out_dir: Path) -> list[Path]:
    """Write every benchmark plot into `out_dir`; return the paths written."""
    from reflexmem.ael.learning_variants import VARIANTS

    out_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for panel in result.panels:
        for cost in sorted({0.0, 10.0} & set(result.cost_bps)) or [result.cost_bps[0]]:
            name = f"equity_{panel}_{cost:g}bp.png"
            paths.append(plot_fold_equity(result, panel, out_dir / name, cost_bp=cost))
    if result.runs:
        paths.append(
            plot_policy_frequencies(
                mean_frequencies(result.runs), out_dir / "policy_frequencies.png"
            )
        )
        paths.extend(
            plot_rule_choices(result.runs, method, out_dir / f"rule_choices_{method}.png")
            for method in dict.fromkeys(r.method for r in result.runs)
        )
        first = result.runs[0]
        traces = mean_posterior_traces(
            [r for r in result.runs if (r.panel, r.fold) == (first.panel, first.fold)]
        )
        if traces:
            warmup = {m: VARIANTS[m].warmup for m in traces if m in VARIANTS}
            paths.append(
                plot_posterior_means(traces, out_dir / "posterior_means.png", warmup=warmup)
            )
    return paths


def plot_run_posteriors(run: RunRecord, out: Path) -> Path:
    """Posterior means of one (method, seed) run, for its MLflow artifacts."""
    from reflexmem.ael.learning_variants import VARIANTS

    label = f"{run.method} seed {run.seed}"
    warmup = {label: VARIANTS[run.method].warmup} if run.method in VARIANTS else None
    return plot_posterior_means(
        {label: (run.arms, run.posterior_means, run.marks)}, out, warmup=warmup
    )
