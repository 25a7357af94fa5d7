"""Whether one structure beats another on the same episodes, beyond noise.

Office tasks are deterministic: a lower selection cost is a real improvement. Where a
cost model prices realized value (trading), each episode's net value carries market
noise, so with enough edges tried some lower the selection cost by chance, and the
search would stack them into its winner. There a candidate counts as better than the
structure it came from only when its paired gain per episode on the selection set has
a Student-t interval above zero (`earns`, 95 % across all the candidates tested
against that structure): the rule `edge_evidence` applies, on the final test, to
every edge of the chosen structure.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from scipy import special

from reflexmem.structures.cost import CostCounts, CostModel, total
from reflexmem.structures.evaluate import COUNTERS, Evaluation, episode_counters

CONFIDENCE = 0.95


def _unit_price(model: CostModel, **one: Any) -> float:
    """What one unit of a counter costs under the model's one pricing (`cost.total`)."""
    zero = CostCounts(0, 0, 0, {}, 0, 0, 0, 0, 0)
    return total(model, replace(zero, **one))


def net_values(model: CostModel, ev: Evaluation) -> np.ndarray:
    """Per episode: its realized value net of what it cost, in the model's units.

    `cost.total` of each episode's own counters (whose `outcome` component credits the
    realized return), computed for all episodes at once: the pricing is linear, so each
    counter's unit price is read from `cost.total` and applied to the counter matrix.
    Per-set upkeep is left out.
    """
    results = ev.results
    runtimes = sorted({rt for r in results for rt, _ in r.runs})
    counters = episode_counters(results).astype(float)
    prices = np.array([_unit_price(model, **{name: 1}) for name in COUNTERS])
    per_episode = [dict(r.runs) for r in results]
    runs = np.array([[d.get(rt, 0) for rt in runtimes] for d in per_episode], dtype=float)
    run_prices = np.array([_unit_price(model, runs={rt: 1}) for rt in runtimes])
    value = np.array([r.value for r in results], dtype=float)
    cost = counters @ prices + value * _unit_price(model, realized=1.0)
    if runtimes:
        cost += runs.reshape(len(results), -1) @ run_prices
    return np.asarray(-cost, dtype=float)


def paired(a: np.ndarray, b: np.ndarray, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """Mean of `a - b` per task with its Student-t interval (95 %) and counts."""
    d = a - b
    n = len(d)
    mean = float(d.mean()) if n else 0.0
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    q = float(special.stdtrit(n - 1, 0.5 + confidence / 2)) if n > 1 else 0.0
    half = float(q * sd / np.sqrt(n)) if n > 1 else 0.0
    return {
        "n": n,
        "changed": int(np.count_nonzero(np.abs(d) > 1e-12)),
        "mean": mean,
        "low": mean - half,
        "high": mean + half,
        "total": float(d.sum()),
    }


@dataclass(frozen=True)
class Base:
    """The structure candidates are tested against: its episodes' net values, once.

    `tries` is how many candidates are tested against it (the Bonferroni count).
    """

    task_ids: tuple[str, ...]
    values: np.ndarray = field(compare=False)
    tries: int = 1

    @classmethod
    def of(cls, model: CostModel, ev: Evaluation, tries: int = 1) -> Base:
        """The base of `ev` under `model` (no values where the model prices no value)."""
        values = net_values(model, ev) if model.realized_value else np.zeros(0)
        return cls(tuple(r.task_id for r in ev.results), values, tries)


def earns(model: CostModel, ev: Evaluation, base: Base) -> bool:
    """Whether `ev` beats `base` (same episodes, same order) beyond noise.

    One of `base.tries` candidates tested against the same base: the interval is
    widened to `1 - (1 - CONFIDENCE) / tries` (Bonferroni), so that across them all a
    chance gain is taken for a real one at most 5 % of the time. Always true where the
    model prices no realized value (deterministic tasks: a lower cost is a real gain).
    """
    if not model.realized_value:
        return True
    if tuple(r.task_id for r in ev.results) != base.task_ids:
        raise ValueError("paired gain needs the same episodes in the same order")
    level = 1 - (1 - CONFIDENCE) / max(base.tries, 1)
    return bool(paired(net_values(model, ev), base.values, level)["low"] > 0)
