"""The AEL benchmark end to end: tune on validation, run every method, time it.

`run_benchmark` runs each seed on its own (so a flow can map seeds in parallel
and get exactly the rows of one direct call) and merges the parts with
`combine_results`. Per seed and learning method it

1. picks the memory-tilt strength from `TILT_GRID` by *validation* Sharpe (mean
   over the cost levels; ties go to the smaller strength). The tuning runs see a
   panel cut after the last validation bar, so the test split cannot influence
   the choice even by accident;
2. runs the method through train -> val -> test with `run_table`, the agent
   freezing its memory and posteriors before test; the runner then requires the
   agent's `FrozenCheck` to show byte-identical learned state after the test
   split and raises otherwise;
3. keeps what the plots and the lineage need: test episodes, policy selection
   frequencies per split, posterior means per episode, the final memory and
   posterior snapshots, reflections and the agent's own overhead per episode
   (tools incl. guard and roles / memory / bandit / reflection / planner).

Deterministic baselines run once (seed None).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np

from reflexmem.ael.environment import Episode, MarketEnvironment
from reflexmem.ael.learning import (
    LEARNING_METHODS,
    SHARED_TOOL_CACHE,
    TILT_GRID,
    LearningAgent,
    agent_session,
    default_evidence,
)
from reflexmem.ael.metrics import BARS_PER_YEAR, compute_metrics_batch
from reflexmem.ael.panel import PricePanel, load_dfull, load_panel
from reflexmem.ael.pit_guard import Evidence
from reflexmem.ael.splits import (
    DFULL_TRAIN_END,
    DFULL_VAL_END,
    SPLIT_NAMES,
    ChronoSplits,
    split_by_dates,
    split_by_fractions,
)
from reflexmem.ael.table import (
    DEFAULT_COST_BPS,
    DEFAULT_SEEDS,
    Row,
    aggregate,
    get_method,
    registered_methods,
    run_episodes,
    run_table,
)

ProgressCallback = Callable[[int, int, str], None]
"""Called as (steps done, steps in total, what just finished)."""

FALLBACK_FRACTIONS = (0.6, 0.2)


@dataclass(frozen=True, eq=False)
class BenchmarkInputs:
    """Everything a benchmark run reads: prices, splits, evidence, where they came from."""

    panel: PricePanel
    splits: ChronoSplits
    evidence: tuple[Evidence, ...]
    source: str


def default_splits(panel: PricePanel) -> ChronoSplits:
    """D-full's protocol dates when the panel spans them, else 60/20/20 by bars.

    A panel that does not straddle both D-full cut-off dates would get an empty
    split from them, so it is cut by shares of bars instead.
    """
    days = panel.local_dates
    train_end, val_end = np.datetime64(DFULL_TRAIN_END), np.datetime64(DFULL_VAL_END)
    if days.size and days[0] <= train_end < val_end < days[-1]:
        return split_by_dates(days, DFULL_TRAIN_END, DFULL_VAL_END)
    return split_by_fractions(panel.n_bars, *FALLBACK_FRACTIONS)


def evidence_for(panel: PricePanel) -> tuple[Evidence, ...]:
    """The D-full snapshots of the panel's tickers (all refused for 2025 decisions)."""
    wanted = set(panel.tickers)
    return tuple(e for e in default_evidence() if e.source.rsplit("/", 1)[-1] in wanted)


def load_inputs(
    prices: Path | None = None,
    *,
    train_end: date | None = None,
    val_end: date | None = None,
) -> BenchmarkInputs:
    """Load a price panel (D-full if `prices` is None) and cut its splits.

    Explicit `train_end`/`val_end` (both or neither) split by printed date;
    otherwise `default_splits` applies.
    """
    if (train_end is None) != (val_end is None):
        raise ValueError("give both train_end and val_end, or neither")
    panel = load_dfull() if prices is None else load_panel(prices)
    if train_end is not None and val_end is not None:
        splits = split_by_dates(panel.local_dates, train_end, val_end)
    else:
        splits = default_splits(panel)
    for split in splits:
        if split.n_returns < 2:
            raise ValueError(f"split {split.name} has {split.n_returns} returns; need >= 2")
    return BenchmarkInputs(panel, splits, evidence_for(panel), panel.source or str(prices))


@dataclass(eq=False)
class RunRecord:
    """What one (learning method, seed) run left behind, beyond its rows."""

    method: str
    seed: int
    tilt: float
    validation: dict[float, float]
    overhead_us: dict[str, float]
    decisions: int
    policy_frequencies: dict[str, dict[str, float]]
    arms: tuple[str, ...]
    posterior_means: np.ndarray
    marks: list[tuple[str, int]]
    frozen_checks: list[dict[str, Any]]
    reflections: list[dict[str, object]]
    learned_state: dict[str, Any]
    refusals_per_decision: float
    refusal_example: str

    def posteriors(self) -> dict[str, Any]:
        """Final posterior and the per-episode trace of posterior means (JSON-able)."""
        trace = [
            [None if math.isnan(v) else v for v in row] for row in self.posterior_means.tolist()
        ]
        return {
            "method": self.method,
            "seed": self.seed,
            "arms": list(self.arms),
            "final": self.learned_state["loop"]["bandit"],
            "means_before_each_decision": trace,
            "split_marks": [list(m) for m in self.marks],
        }


@dataclass(eq=False)
class BenchmarkResult:
    """Rows of Table 2 plus timing, tuning, traces and test episodes of one run."""

    rows: list[Row]
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    cost_bps: tuple[float, ...]
    timing: dict[str, Any]
    runs: list[RunRecord] = field(default_factory=list)
    test_episodes: dict[str, list[Episode]] = field(default_factory=dict)
    splits: ChronoSplits | None = None

    def aggregated(self) -> list[Row]:
        """Mean and std over seeds per method, split and cost level."""
        return aggregate(self.rows)

    def hyperparameters(self) -> dict[str, dict[str, Any]]:
        """Chosen tilt and the validation score of every candidate, per method and seed."""
        out: dict[str, dict[str, Any]] = {}
        for run in self.runs:
            out.setdefault(run.method, {})[str(run.seed)] = {
                "tilt": run.tilt,
                "validation_sharpe": {f"{k:g}": v for k, v in run.validation.items()},
            }
        return out

    def refusals(self) -> dict[str, Any]:
        """How much evidence the point-in-time guard refused per decision, with an example."""
        if not self.runs:
            return {"per_decision": 0.0, "example": ""}
        return {
            "per_decision": max(r.refusals_per_decision for r in self.runs),
            "example": next((r.refusal_example for r in self.runs if r.refusal_example), ""),
        }

    def to_document(self) -> dict[str, Any]:
        """The JSON document of `--json`: rows, timing, tuning, frozen checks, refusals.

        Non-finite metric values become null, which strict JSON readers accept.
        """
        return {
            "rows": [_json_row(r) for r in self.rows],
            "methods": list(self.methods),
            "seeds": list(self.seeds),
            "cost_bps": list(self.cost_bps),
            "timing": self.timing,
            "hyperparameters": self.hyperparameters(),
            "frozen_checks": [
                {"method": r.method, "seed": r.seed, **c}
                for r in self.runs
                for c in r.frozen_checks
            ],
            "refusals": self.refusals(),
            "policy_frequencies": {f"{r.method}/{r.seed}": r.policy_frequencies for r in self.runs},
        }


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _json_row(row: Row) -> Row:
    return {k: (_finite(v) if k != "timing" else dict(v)) for k, v in row.items()}


def _sharpe_score(episode: Episode, cost_bps: Sequence[float], bars_per_year: float) -> float:
    metrics = compute_metrics_batch(episode.net_returns_grid(cost_bps), bars_per_year)
    values = [m.sharpe for m in metrics if math.isfinite(m.sharpe)]
    return float(np.mean(values)) if values else -math.inf


def _cut_after_validation(panel: PricePanel, splits: ChronoSplits) -> PricePanel:
    stop = splits.val.stop
    return PricePanel(
        panel.timestamps[:stop],
        panel.local_dates[:stop],
        panel.tickers,
        panel.closes[:stop],
        panel.source,
    )


def select_tilt(
    method: str,
    seed: int,
    inputs: BenchmarkInputs,
    *,
    grid: Sequence[float] = TILT_GRID,
    cost_bps: Sequence[float] = DEFAULT_COST_BPS,
    bars_per_year: float = BARS_PER_YEAR,
) -> tuple[float, dict[float, float]]:
    """Pick the tilt with the best validation Sharpe (mean over cost levels).

    Runs train -> val on a panel that ends at the last validation bar: the test
    split is not even loaded. Ties keep the earlier (smaller) grid value.
    """
    panel = _cut_after_validation(inputs.panel, inputs.splits)
    env = MarketEnvironment(panel)
    scores: dict[float, float] = {}
    for tilt in grid:
        agent = LearningAgent(
            np.random.default_rng(seed), method, tilt=tilt, evidence=inputs.evidence
        )
        episode: Episode | None = None
        for split in (inputs.splits.train, inputs.splits.val):
            episode = env.run(split, agent)
            agent.observe_episode(episode)
        assert episode is not None
        scores[float(tilt)] = _sharpe_score(episode, cost_bps, bars_per_year)
    best = max(scores, key=lambda k: (scores[k], -k))
    return best, scores


def _record(agent: LearningAgent, seed: int, tilt: float, scores: dict[float, float]) -> RunRecord:
    arms, means = agent.posterior_trace()
    decisions = [d for ep in agent.episodes.values() for d in ep.decisions]
    refused = sum(len(d.refusals) for d in decisions)
    example = next((d.refusals[0].describe() for d in decisions if d.refusals), "")
    return RunRecord(
        method=agent.name,
        seed=seed,
        tilt=tilt,
        validation=scores,
        overhead_us=agent.overhead.per_episode_us(),
        decisions=agent.overhead.decisions,
        policy_frequencies=agent.policy_frequencies(),
        arms=arms,
        posterior_means=means,
        marks=list(agent.trace.marks),
        frozen_checks=[c.to_dict() for c in agent.frozen_checks],
        reflections=[r.to_dict() for r in agent.reflections],
        learned_state=agent.learned_state(),
        refusals_per_decision=refused / max(len(decisions), 1),
        refusal_example=example,
    )


def _check_frozen(agent: LearningAgent, method: str, seed: int) -> None:
    tested = [c for c in agent.frozen_checks if c.split == "test"]
    if not tested:
        raise RuntimeError(f"{method} seed {seed}: the test split did not run frozen")
    for check in tested:
        if not check.identical:
            raise RuntimeError(
                f"{method} seed {seed}: learned state changed during the frozen {check.split}"
                f" split ({check.before_sha256[:12]} -> {check.after_sha256[:12]})"
            )


def _run_part(
    inputs: BenchmarkInputs,
    methods: Sequence[str],
    seed: int | None,
    *,
    cost_bps: Sequence[float],
    bars_per_year: float,
    grid: Sequence[float],
    step: Callable[[str], None],
) -> BenchmarkResult:
    """Run the seeded `methods` for one seed, or the deterministic ones (seed None)."""
    started = time.perf_counter()
    rows: list[Row] = []
    runs: list[RunRecord] = []
    episodes: dict[str, list[Episode]] = {}
    per_method: dict[str, float] = {}
    tuning: dict[str, float] = {}
    for method in methods:
        spec = get_method(method)
        if spec.seeded != (seed is not None):
            continue
        t0 = time.perf_counter()
        if seed is None:
            rows += run_table(inputs.panel, inputs.splits, [method], (0,), cost_bps, bars_per_year)
            episodes[method] = [run_episodes(method, inputs.panel, inputs.splits)["test"]]
        elif method in LEARNING_METHODS:
            tilt, scores = select_tilt(
                method, seed, inputs, grid=grid, cost_bps=cost_bps, bars_per_year=bars_per_year
            )
            tuning[method] = time.perf_counter() - t0
            with agent_session({method: tilt}, inputs.evidence) as session:
                rows += run_table(
                    inputs.panel, inputs.splits, [method], (seed,), cost_bps, bars_per_year
                )
            (agent,) = session.built
            _check_frozen(agent, method, seed)
            runs.append(_record(agent, seed, tilt, scores))
            episodes[method] = [agent.episodes["test"]]
        else:
            rows += run_table(
                inputs.panel, inputs.splits, [method], (seed,), cost_bps, bars_per_year
            )
            episodes[method] = [run_episodes(method, inputs.panel, inputs.splits, seed)["test"]]
        per_method[method] = time.perf_counter() - t0
        step(method if seed is None else f"{method} seed {seed}")
    timing = {
        "total_seconds": time.perf_counter() - started,
        "per_method_seconds": per_method,
        "tuning_seconds": tuning,
    }
    seeds = () if seed is None else (seed,)
    return BenchmarkResult(
        rows, tuple(methods), seeds, tuple(float(c) for c in cost_bps), timing, runs, episodes
    )


def _overhead(runs: Iterable[RunRecord]) -> dict[str, dict[str, float]]:
    """Decision-weighted mean overhead per method, and over all learning runs."""
    groups: dict[str, list[RunRecord]] = {}
    for run in runs:
        groups.setdefault(run.method, []).append(run)
        groups.setdefault("all_learning", []).append(run)
    out: dict[str, dict[str, float]] = {}
    for name, members in groups.items():
        total = sum(r.decisions for r in members)
        keys = members[0].overhead_us.keys()
        out[name] = {
            k: sum(r.overhead_us[k] * r.decisions for r in members) / max(total, 1) for k in keys
        }
        out[name]["decisions"] = float(total)
    return out


def combine_results(
    parts: Sequence[BenchmarkResult],
    methods: Sequence[str],
    seeds: Sequence[int],
    *,
    wall_seconds: float | None = None,
) -> BenchmarkResult:
    """Merge per-seed parts into one result with rows in canonical order.

    Order: method (as in `methods`), seed (None first, then as in `seeds`),
    split (train, val, test), cost level - the order `run_table` uses, so a
    direct run and a flow that maps seeds produce identical row lists. Timing:
    per-method seconds are summed; `total_seconds` is `wall_seconds` if given,
    else the sum of the parts.
    """
    method_pos = {m: i for i, m in enumerate(methods)}
    seed_pos = {s: i for i, s in enumerate(seeds)}
    cost_bps = parts[0].cost_bps if parts else tuple(float(c) for c in DEFAULT_COST_BPS)
    cost_pos = {c: i for i, c in enumerate(cost_bps)}
    split_pos = {s: i for i, s in enumerate(SPLIT_NAMES)}
    rows = sorted(
        (r for p in parts for r in p.rows),
        key=lambda r: (
            method_pos[r["method"]],
            -1 if r["seed"] is None else seed_pos[r["seed"]],
            split_pos[r["split"]],
            cost_pos[float(r["cost_bp"])],
        ),
    )
    runs = sorted(
        (r for p in parts for r in p.runs), key=lambda r: (method_pos[r.method], seed_pos[r.seed])
    )
    episodes: dict[str, list[Episode]] = {m: [] for m in methods}
    per_method: dict[str, float] = dict.fromkeys(methods, 0.0)
    tuning: dict[str, float] = {}
    for part in sorted(parts, key=lambda p: -1 if not p.seeds else seed_pos[p.seeds[0]]):
        for m, eps in part.test_episodes.items():
            episodes[m].extend(eps)
        for m, s in part.timing["per_method_seconds"].items():
            per_method[m] += s
        for m, s in part.timing["tuning_seconds"].items():
            tuning[m] = tuning.get(m, 0.0) + s
    total = (
        wall_seconds if wall_seconds is not None else sum(p.timing["total_seconds"] for p in parts)
    )
    timing = {
        "total_seconds": total,
        "per_method_seconds": per_method,
        "tuning_seconds": tuning,
        "agent_overhead_us": _overhead(runs),
        "tool_cache": {"hits": SHARED_TOOL_CACHE.hits, "misses": SHARED_TOOL_CACHE.misses},
    }
    return BenchmarkResult(
        rows,
        tuple(methods),
        tuple(seeds),
        cost_bps,
        timing,
        runs,
        {m: e for m, e in episodes.items() if e},
    )


def run_benchmark(
    panel: PricePanel | BenchmarkInputs,
    *,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    methods: Sequence[str] | None = None,
    cost_bps: Sequence[float] = DEFAULT_COST_BPS,
    bars_per_year: float = BARS_PER_YEAR,
    progress_callback: ProgressCallback | None = None,
    splits: ChronoSplits | None = None,
    tilt_grid: Sequence[float] = TILT_GRID,
    include_deterministic: bool = True,
) -> BenchmarkResult:
    """Run the benchmark table: every method x seed x split x cost level.

    `panel` may be a bare panel (splits default to `default_splits`, evidence to
    the D-full snapshots of its tickers) or prepared `BenchmarkInputs`. `methods`
    defaults to every registered method. `include_deterministic=False` skips the
    seedless baselines (a flow runs them in one mapped task only).
    """
    started = time.perf_counter()
    if isinstance(panel, BenchmarkInputs):
        inputs = panel
        if splits is not None:
            inputs = BenchmarkInputs(inputs.panel, splits, inputs.evidence, inputs.source)
    else:
        chosen = splits if splits is not None else default_splits(panel)
        inputs = BenchmarkInputs(panel, chosen, evidence_for(panel), panel.source)
    names = tuple(methods) if methods is not None else registered_methods()
    specs = {m: get_method(m) for m in names}
    seed_list = tuple(int(s) for s in seeds)
    deterministic = [m for m in names if not specs[m].seeded] if include_deterministic else []
    seeded = [m for m in names if specs[m].seeded]
    total = len(deterministic) + len(seed_list) * len(seeded)
    done = 0

    def step(label: str) -> None:
        nonlocal done
        done += 1
        if progress_callback is not None:
            progress_callback(done, total, label)

    def part(names_: Sequence[str], seed: int | None) -> BenchmarkResult:
        return _run_part(
            inputs,
            names_,
            seed,
            cost_bps=cost_bps,
            bars_per_year=bars_per_year,
            grid=tilt_grid,
            step=step,
        )

    parts = [part(deterministic, None)] if deterministic else []
    parts += [part(seeded, seed) for seed in seed_list]
    result = combine_results(parts, names, seed_list, wall_seconds=time.perf_counter() - started)
    result.splits = inputs.splits
    return result


def learning_verdict(result: BenchmarkResult, split: str = "test") -> list[str]:
    """State, per cost level, whether each learning method beat the best baseline.

    Compared by mean Sharpe over seeds; baselines are the deterministic methods,
    and `tools` (the same agent without memory) is named too. Whatever the
    answer, it is stated, because a table that only reports wins misleads.
    """
    agg = [a for a in result.aggregated() if a["split"] == split]
    lines: list[str] = []
    for cost in result.cost_bps:
        at = {a["method"]: a for a in agg if a["cost_bp"] == cost}
        base = {m: a for m, a in at.items() if not get_method(m).seeded}
        if not base:
            continue
        best = max(base, key=lambda m: base[m]["sharpe_mean"])
        best_sharpe = base[best]["sharpe_mean"]
        for method in (m for m in at if m in LEARNING_METHODS):
            mean = at[method]["sharpe_mean"]
            verdict = "beats" if mean > best_sharpe else "does not beat"
            text = (
                f"{cost:g} bp: {method} Sharpe {mean:.2f} {verdict} the best baseline"
                f" ({best} {best_sharpe:.2f})"
            )
            if "tools" in at:
                tools = at["tools"]["sharpe_mean"]
                text += f"; {'above' if mean > tools else 'not above'} tools ({tools:.2f})"
            lines.append(text)
    return lines
