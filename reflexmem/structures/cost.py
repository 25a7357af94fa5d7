"""Total cost of a structure over a set of episodes: measured counts times declared prices.

The counts come from running the episodes (skill runs by runtime, knowledge entries
loaded into context, activated modules and needless areas, delivered messages,
verified sub-goals, escalations to the fallback) plus the stored edges. The prices are
declared here, never fitted to any task set:

- `EXPERIMENT_B` is the definition of docs/design.md §11 and nothing else: stored edges plus
  unnecessarily activated areas (upkeep 1 per edge, routing waste 1 per area).
- `DEFAULT` prices a skill run at 1 unit, an independent agent's run at 3 (it carries
  its own context), a deterministic function at 0.1, a loaded knowledge entry at 0.01,
  a routing decision at 0.1, a needless area at 1 (its knowledge is loaded for
  nothing), a broker hop at 0.2, a verification at 0.2, an escalation to review at 5
  (a person or an L3 model has to look), an edge's upkeep at 1 per evaluated set; a
  search's spend is amortised over 10,000 episodes of use.
- `TRADING` prices the trading environment in basis points of return: the realized
  return of what proceeded is credited at 10,000 units per unit of return (one unit is
  one basis point), against 0.05 per check run, 0.1 per module activation, 0.5 per
  message, 5 per escalation and 1 per stored edge per evaluated set. A role's own
  decision costs nothing extra: every structure pays it alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class CostModel:
    """Prices per counted unit (see the module docstring for the two declared models)."""

    name: str
    stored_edge: float
    unneeded_area: float
    inference: Mapping[str, float] = field(default_factory=dict, hash=False)
    context_entry: float = 0.0
    routing: float = 0.0
    messaging: float = 0.0
    verification: float = 0.0
    recovery: float = 0.0
    search_horizon: float = 0.0
    realized_value: float = 0.0

    def to_dict(self) -> dict[str, object]:
        """Plain form (recorded with every search; `realized_value` only where priced)."""
        extra: dict[str, object] = (
            {"realized_value": self.realized_value} if self.realized_value else {}
        )
        return extra | {
            "name": self.name,
            "stored_edge": self.stored_edge,
            "unneeded_area": self.unneeded_area,
            "inference": dict(self.inference),
            "context_entry": self.context_entry,
            "routing": self.routing,
            "messaging": self.messaging,
            "verification": self.verification,
            "recovery": self.recovery,
            "search_horizon": self.search_horizon,
        }


EXPERIMENT_B = CostModel("experiment-b", stored_edge=1.0, unneeded_area=1.0)
DEFAULT = CostModel(
    "default",
    stored_edge=1.0,
    unneeded_area=1.0,
    inference={"function": 0.1, "skill-module": 1.0, "independent-agent": 3.0},
    context_entry=0.01,
    routing=0.1,
    messaging=0.2,
    verification=0.2,
    recovery=5.0,
    search_horizon=10_000.0,
)
TRADING = CostModel(
    "trading",
    stored_edge=1.0,
    unneeded_area=0.0,
    inference={"function": 0.05, "skill-module": 0.0, "independent-agent": 0.0},
    routing=0.1,
    messaging=0.5,
    recovery=5.0,
    search_horizon=10_000.0,
    realized_value=10_000.0,
)
MODELS = {m.name: m for m in (EXPERIMENT_B, DEFAULT, TRADING)}


@dataclass(frozen=True)
class CostCounts:
    """What a set of episodes used, counted."""

    episodes: int
    stored_edges: int
    unneeded_areas: int
    runs: Mapping[str, int]
    context_entries: int
    activations: int
    messages: int
    verifications: int
    recoveries: int
    realized: float = 0.0

    def to_dict(self) -> dict[str, object]:
        """Plain form."""
        return {
            "episodes": self.episodes,
            "stored_edges": self.stored_edges,
            "unneeded_areas": self.unneeded_areas,
            "runs": dict(self.runs),
            "context_entries": self.context_entries,
            "activations": self.activations,
            "messages": self.messages,
            "verifications": self.verifications,
            "recoveries": self.recoveries,
        } | ({"realized": self.realized} if self.realized else {})


def components(model: CostModel, counts: CostCounts, search_spend: float = 0.0) -> dict[str, float]:
    """Cost by component.

    Inference, routing, messaging, verification, recovery, upkeep, and the amortised
    search (`search_spend` units spread over `search_horizon` episodes).
    """
    inference = sum(model.inference.get(rt, 0.0) * n for rt, n in counts.runs.items())
    amortised = 0.0
    if model.search_horizon > 0:
        amortised = search_spend * counts.episodes / model.search_horizon
    outcome = {"outcome": -model.realized_value * counts.realized} if model.realized_value else {}
    return outcome | {
        "inference": inference + model.context_entry * counts.context_entries,
        "routing": model.routing * counts.activations + model.unneeded_area * counts.unneeded_areas,
        "messaging": model.messaging * counts.messages,
        "verification": model.verification * counts.verifications,
        "recovery": model.recovery * counts.recoveries,
        "upkeep": model.stored_edge * counts.stored_edges,
        "amortised_search": amortised,
    }


def total(model: CostModel, counts: CostCounts, search_spend: float = 0.0) -> float:
    """The sum of :func:`components`."""
    return float(sum(components(model, counts, search_spend).values()))
