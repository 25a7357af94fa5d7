"""Run registered methods over splits and cost levels; aggregate; render Table 2.

The runner knows methods only through a registry of factories, so variants that
live elsewhere (memory, ael, -warm-up, -reflection) plug in with one call:

    from reflexmem.ael.table import register_method
    register_method("memory", lambda rng: MemoryAgent(rng, store), seeded=True)

A factory receives a `numpy.random.Generator` built from the seed (or None for a
deterministic method registered with `seeded=False`) and returns an allocator.
One allocator instance serves all splits of one (method, seed) run, in time order
train -> val -> test, so a learning method can carry what it saw forward; if it
has an `observe_episode(episode)` method, that is called after each split.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reflexmem.ael.agent import StatelessAgent, ToolsAgent
from reflexmem.ael.baselines import EqualWeight, InverseMomentum, MinVariance, Momentum
from reflexmem.ael.environment import Allocator, Episode, MarketEnvironment
from reflexmem.ael.metrics import BARS_PER_YEAR, compute_metrics_batch
from reflexmem.ael.rules import RULE_FAMILY, Rule, RuleAllocator
from reflexmem.ael.splits import ChronoSplits
from reflexmem.prices.panel import PricePanel

AllocatorFactory = Callable[[np.random.Generator | None], Allocator]
Row = dict[str, Any]

METRIC_KEYS = (
    "sharpe",
    "sortino",
    "calmar",
    "return_pct",
    "max_dd_pct",
    "win_rate",
    "tail_ratio",
)
ROW_KEYS = ("method", "seed", "split", "cost_bp", *METRIC_KEYS, "n_returns", "timing")
DEFAULT_COST_BPS = (0.0, 5.0, 10.0, 20.0)
DEFAULT_SEEDS = (0, 1, 2, 3, 4)
TABLE2_COLUMNS = (
    ("sharpe", "Sharpe"),
    ("sortino", "Sortino"),
    ("calmar", "Calmar"),
    ("return_pct", "Return %"),
    ("max_dd_pct", "MaxDD %"),
    ("win_rate", "WinR"),
    ("tail_ratio", "TailR"),
)


@dataclass(frozen=True)
class MethodSpec:
    """A registered method: its name, how to build it, and whether seeds matter."""

    name: str
    factory: AllocatorFactory
    seeded: bool


_REGISTRY: dict[str, MethodSpec] = {}


def register_method(
    name: str, factory: AllocatorFactory, *, seeded: bool, replace: bool = False
) -> MethodSpec:
    """Make `name` available to `run_table`.

    `seeded=False` methods run once with seed None and get `None` as generator;
    seeded ones run once per seed with `np.random.default_rng(seed)`. Re-using a
    name raises unless `replace=True`, so two modules cannot silently shadow
    each other's variant.
    """
    if name in _REGISTRY and not replace:
        raise ValueError(f"method {name!r} is already registered")
    spec = MethodSpec(name, factory, seeded)
    _REGISTRY[name] = spec
    return spec


def unregister_method(name: str) -> None:
    """Drop a registered method, e.g. a temporary one a test added."""
    _REGISTRY.pop(name, None)


def get_method(name: str) -> MethodSpec:
    """Look up the spec registered under `name`."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown method {name!r}; registered: {registered_methods()}") from None


def registered_methods() -> tuple[str, ...]:
    """Names in registration order (the built-ins first)."""
    return tuple(_REGISTRY)


def _need_rng(rng: np.random.Generator | None) -> np.random.Generator:
    if rng is None:
        raise ValueError("a seeded method was built without a generator")
    return rng


register_method("equal_weight", lambda _rng: EqualWeight(), seeded=False)
register_method("momentum", lambda _rng: Momentum(), seeded=False)
register_method("min_variance", lambda _rng: MinVariance(), seeded=False)
register_method("inverse_momentum", lambda _rng: InverseMomentum(), seeded=False)
register_method("stateless", lambda rng: StatelessAgent(_need_rng(rng)), seeded=True)
register_method("tools", lambda rng: ToolsAgent(_need_rng(rng)), seeded=True)

BASELINES = ("equal_weight", "momentum", "min_variance", "inverse_momentum")


def _rule_factory(rule: Rule) -> AllocatorFactory:
    def build(_rng: np.random.Generator | None) -> Allocator:
        return RuleAllocator(rule)

    return build


for _rule in RULE_FAMILY:
    if _rule.name not in _REGISTRY:
        register_method(_rule.name, _rule_factory(_rule), seeded=False)


def run_episodes(
    method: str, panel: PricePanel, splits: ChronoSplits, seed: int | None = None
) -> dict[str, Episode]:
    """One allocator of `method` through all splits in time order -> episodes by split.

    One continuous run (the README's cost rule): no buy-in at the first decision, and
    each later split pays the turnover from the weights held at the end of the one
    before.
    """
    spec = get_method(method)
    rng = np.random.default_rng(seed) if spec.seeded else None
    return MarketEnvironment(panel).run_splits(tuple(splits), spec.factory(rng))


def run_table(
    panel: PricePanel,
    splits: ChronoSplits,
    methods: Sequence[str] | None = None,
    seeds: Sequence[int] = DEFAULT_SEEDS,
    cost_bps: Sequence[float] = DEFAULT_COST_BPS,
    bars_per_year: float = BARS_PER_YEAR,
) -> list[Row]:
    """Rows (keys `ROW_KEYS`) for every method x seed x split x cost level.

    Weights do not depend on costs, so each episode runs once and all cost
    levels are priced from its turnover in one vectorised step. `timing` holds
    the episode's wall time (decisions + pricing + metrics) in seconds and per
    decision in microseconds.
    """
    rows: list[Row] = []
    for method in methods if methods is not None else registered_methods():
        spec = get_method(method)
        for seed in seeds if spec.seeded else (None,):
            for split_name, episode in run_episodes(method, panel, splits, seed).items():
                started = time.perf_counter()
                metrics = compute_metrics_batch(episode.net_returns_grid(cost_bps), bars_per_year)
                seconds = episode.seconds + time.perf_counter() - started
                timing = {
                    "seconds": seconds,
                    "per_episode_us": seconds * 1e6,
                    "per_decision_us": seconds * 1e6 / max(episode.n_returns, 1),
                }
                for cost, m in zip(cost_bps, metrics, strict=True):
                    row: Row = {"method": method, "seed": seed, "split": split_name}
                    row["cost_bp"] = float(cost)
                    row.update({k: getattr(m, k) for k in METRIC_KEYS})
                    row["n_returns"] = m.n_returns
                    row["timing"] = dict(timing)
                    rows.append(row)
    return rows


def aggregate(rows: Iterable[Row]) -> list[Row]:
    """Mean and population std (ddof 0) over seeds per method / split / cost level.

    Output rows carry `method`, `split`, `cost_bp`, `n_seeds`, `n_returns` and
    `<metric>_mean`, `<metric>_std` for each metric; a deterministic method has
    one seed and std 0. Order follows first appearance in `rows`.
    """
    groups: dict[tuple[str, str, float], list[Row]] = {}
    for row in rows:
        key = (str(row["method"]), str(row["split"]), float(row["cost_bp"]))
        groups.setdefault(key, []).append(row)
    out: list[Row] = []
    for (method, split, cost), members in groups.items():
        values = np.array([[float(r[k]) for k in METRIC_KEYS] for r in members], dtype=np.float64)
        with np.errstate(invalid="ignore"):
            mean = values.mean(axis=0)
            std = values.std(axis=0, ddof=0)
        agg: Row = {"method": method, "split": split, "cost_bp": cost, "n_seeds": len(members)}
        agg["n_returns"] = members[0]["n_returns"]
        for i, k in enumerate(METRIC_KEYS):
            agg[f"{k}_mean"] = float(mean[i])
            agg[f"{k}_std"] = float(std[i])
        out.append(agg)
    return out


def _cell(key: str, mean: float, std: float, n_seeds: int) -> str:
    signed = key == "return_pct"
    text = f"{mean:+.2f}" if signed else f"{mean:.2f}"
    return text if n_seeds <= 1 else f"{text} ± {std:.2f}"


def render_table2(aggregated: Iterable[Row], split: str = "test", cost_bp: float = 0.0) -> str:
    """Plain-text Table 2: methods as rows, the seven metrics as columns.

    Seeded methods show mean ± std over seeds; deterministic ones show the value.
    """
    chosen = [r for r in aggregated if r["split"] == split and r["cost_bp"] == float(cost_bp)]
    header = ["Method", *(label for _, label in TABLE2_COLUMNS)]
    body = [
        [
            str(r["method"]),
            *(
                _cell(
                    k,
                    float(r[f"{k}_mean"]),
                    float(r[f"{k}_std"]),
                    int(r["n_seeds"]),
                )
                for k, _ in TABLE2_COLUMNS
            ),
        ]
        for r in chosen
    ]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def fmt(line: list[str]) -> str:
        first = line[0].ljust(widths[0])
        rest = (cell.rjust(w) for cell, w in zip(line[1:], widths[1:], strict=True))
        return "  ".join([first, *rest])

    title = f"Table 2 ({split} split, {cost_bp:g} bp)"
    rule = "-" * len(fmt(header))
    return "\n".join([title, rule, fmt(header), rule, *(fmt(line) for line in body), rule])
