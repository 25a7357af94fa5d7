"""What a benchmark run produces: rows, test series, learning traces, the JSON document.

Rows keep the keys of Table 2 (`table.ROW_KEYS`) and add `panel`, `fold` (an int, or
"pooled" for the concatenated test windows of a panel or of all panels, panel "all"),
`kind` (rule / selected / hindsight / peer / agent / learning), `sharpe_se` (Lo 2002,
non-iid), and on test rows `ci_low`, `ci_high` (95% stationary-bootstrap interval of
the Sharpe difference to `val_selected_rule`) and `spa_p` (Hansen's SPA p-value of
"beats val_selected_rule", on pooled rows of the seed ensemble, seed "ensemble").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from reflexmem.ael.environment import Episode
from reflexmem.ael.metrics import compute_metrics_batch
from reflexmem.ael.stats import sharpe_se
from reflexmem.ael.table import METRIC_KEYS, ROW_KEYS, Row

EXTRA_KEYS = ("panel", "fold", "kind", "sharpe_se", "ci_low", "ci_high", "spa_p")
ALL_ROW_KEYS = (*ROW_KEYS, *EXTRA_KEYS)
SeriesKey = tuple[str, int, str, int | None]
"""(panel, fold, method, seed) of one test window."""


def metric_rows(
    *,
    panel: str,
    fold: int | str,
    method: str,
    seed: int | str | None,
    kind: str,
    split: str,
    gross: np.ndarray,
    turnover: np.ndarray,
    cost_bps: tuple[float, ...],
    bars_per_year: float,
    seconds: float = 0.0,
) -> list[Row]:
    """One row per cost level for one return series."""
    c = np.asarray(cost_bps)[:, None] * 1e-4
    net = gross[None, :] - c * turnover[None, :]
    metrics = compute_metrics_batch(net, bars_per_year)
    n = max(int(gross.shape[0]), 1)
    timing = {
        "seconds": seconds,
        "per_episode_us": seconds * 1e6,
        "per_decision_us": seconds * 1e6 / n,
    }
    rows: list[Row] = []
    for cost, m, series in zip(cost_bps, metrics, net, strict=True):
        row: Row = {"method": method, "seed": seed, "split": split, "cost_bp": float(cost)}
        row.update({k: getattr(m, k) for k in METRIC_KEYS})
        row["n_returns"] = m.n_returns
        row["timing"] = dict(timing)
        row.update(
            panel=panel,
            fold=fold,
            kind=kind,
            sharpe_se=sharpe_se(series, bars_per_year),
            ci_low=None,
            ci_high=None,
            spa_p=None,
        )
        rows.append(row)
    return rows


def episode_rows(
    episodes: dict[str, Episode],
    *,
    panel: str,
    fold: int,
    method: str,
    seed: int | None,
    kind: str,
    cost_bps: tuple[float, ...],
    bars_per_year: float,
) -> list[Row]:
    """Rows for every split of one run."""
    rows: list[Row] = []
    for split, ep in episodes.items():
        rows += metric_rows(
            panel=panel,
            fold=fold,
            method=method,
            seed=seed,
            kind=kind,
            split=split,
            gross=ep.gross_returns,
            turnover=ep.turnover,
            cost_bps=cost_bps,
            bars_per_year=bars_per_year,
            seconds=ep.seconds,
        )
    return rows


@dataclass(eq=False)
class RunRecord:
    """What one (learning method, seed, panel, fold) run left beyond its rows."""

    method: str
    seed: int
    panel: str
    fold: int
    decisions: int
    seconds: float
    policy_frequencies: dict[str, dict[str, float]]
    rule_frequencies: dict[str, dict[str, dict[str, float]]]
    arms: tuple[str, ...]
    posterior_means: np.ndarray
    marks: list[tuple[str, int]]
    frozen_checks: list[dict[str, Any]]
    reflections: list[dict[str, Any]]
    learned_state: dict[str, Any]
    refusals_per_decision: float
    refusal_example: str

    @property
    def label(self) -> str:
        """`<method>-seed<k>` plus the fold when there are several."""
        return f"{self.method}-seed{self.seed}-{self.panel}-fold{self.fold}"

    def posteriors(self) -> dict[str, Any]:
        """Final posterior and the per-decision trace of posterior means (JSON-able)."""
        trace = [
            [None if math.isnan(v) else v for v in row] for row in self.posterior_means.tolist()
        ]
        return {
            "method": self.method,
            "seed": self.seed,
            "panel": self.panel,
            "fold": self.fold,
            "arms": list(self.arms),
            "final": {ns: loop["bandit"] for ns, loop in self.learned_state["loops"].items()},
            "means_before_each_decision": trace,
            "split_marks": [list(m) for m in self.marks],
        }


@dataclass(eq=False)
class BenchmarkResult:
    """Rows, test series, learning traces and timing of one benchmark run."""

    rows: list[Row]
    methods: tuple[str, ...]
    seeds: tuple[int, ...]
    cost_bps: tuple[float, ...]
    timing: dict[str, Any]
    runs: list[RunRecord] = field(default_factory=list)
    series: dict[SeriesKey, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    panels: dict[str, dict[str, Any]] = field(default_factory=dict)
    selections: dict[str, Any] = field(default_factory=dict)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    verdict: list[str] = field(default_factory=list)
    peers: dict[str, Any] = field(default_factory=dict)

    def fold_rows(self) -> list[Row]:
        """Rows of single folds (no pooled rows)."""
        return [r for r in self.rows if r["fold"] != "pooled"]

    def frozen_checks(self) -> list[dict[str, Any]]:
        """Every frozen-split check of every learning run."""
        return [
            {"method": r.method, "seed": r.seed, "panel": r.panel, "fold": r.fold, **c}
            for r in self.runs
            for c in r.frozen_checks
        ]

    def refusals(self) -> dict[str, Any]:
        """Evidence the point-in-time guard refused per decision, with an example."""
        if not self.runs:
            return {"per_decision": 0.0, "example": ""}
        return {
            "per_decision": max(r.refusals_per_decision for r in self.runs),
            "example": next((r.refusal_example for r in self.runs if r.refusal_example), ""),
        }

    def to_document(self) -> dict[str, Any]:
        """The JSON document of `--json` (non-finite numbers become null)."""
        return {
            "rows": [_json_row(r) for r in self.rows],
            "methods": list(self.methods),
            "seeds": list(self.seeds),
            "cost_bps": list(self.cost_bps),
            "panels": self.panels,
            "timing": self.timing,
            "selections": self.selections,
            "comparisons": [_clean(c) for c in self.comparisons],
            "verdict": list(self.verdict),
            "peers": self.peers,
            "frozen_checks": self.frozen_checks(),
            "refusals": self.refusals(),
            "policy_frequencies": {r.label: r.policy_frequencies for r in self.runs},
            "rule_frequencies": {r.label: r.rule_frequencies for r in self.runs},
        }


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _finite(v) for k, v in d.items()}


def _json_row(row: Row) -> Row:
    return {k: (_finite(v) if k != "timing" else dict(v)) for k, v in row.items()}
