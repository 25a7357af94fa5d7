"""Benchmark profiles: the versioned recipe an evaluation run was computed with.

A run records its profile name and version, so changing how a factor is computed is a
new version and a replay, never a silent change to what an old run means. Promotion is
per (decision, profile): versions of one profile compete for the one primary slot.
"""

from __future__ import annotations

from dataclasses import dataclass

COMPONENTS = (
    "raw_return",
    "excess_vs_benchmark",
    "risk_adjusted",
    "direction_hit",
    "benchmark_return",
    "realized_vol",
    "benchmark_shock_sigma",
    "signal_at_decision",
)
"""Every factor a run stores, each with its own missing flag and quality label.

The first four are the evaluation proper; the last four are the measurements reflection
reads (benchmark move, volatility, shock size, the tape's signal at decision time), kept
as components so that reflection judges exactly what the primary run measured.
"""


@dataclass(frozen=True)
class BenchmarkProfile:
    """How a run is computed.

    `signal_lookback_bars` / `signal_vol_bars` define the tape signal at decision time;
    `benchmark_vol_days` is the trailing window of the benchmark volatility a shock is
    measured in; `max_staleness_days` is how old the last benchmark close may be before
    the benchmark counts as missing rather than being carried forward silently.
    """

    name: str
    version: int
    benchmark: str = "SPY"
    signal_lookback_bars: int = 4
    signal_vol_bars: int = 20
    benchmark_vol_days: int = 20
    max_staleness_days: float = 4.0

    def __post_init__(self) -> None:
        if not self.name or "'" in self.name or self.version < 1:
            raise ValueError(f"invalid profile {self.name!r} v{self.version}")
        if min(self.signal_lookback_bars, self.signal_vol_bars, self.benchmark_vol_days) < 2:
            raise ValueError("profile windows must span at least two bars")


PROFILES: dict[tuple[str, int], BenchmarkProfile] = {
    ("spy_daily", 1): BenchmarkProfile("spy_daily", 1),
    ("spy_daily", 2): BenchmarkProfile(
        "spy_daily", 2, signal_lookback_bars=8, signal_vol_bars=40, benchmark_vol_days=40
    ),
}
DEFAULT_PROFILE = "spy_daily"


def get_profile(name: str = DEFAULT_PROFILE, version: int | None = None) -> BenchmarkProfile:
    """A shipped profile; `version=None` is the lowest (the original) version of `name`."""
    versions = sorted(v for n, v in PROFILES if n == name)
    if not versions:
        raise KeyError(f"unknown evaluation profile {name!r}")
    chosen = versions[0] if version is None else version
    try:
        return PROFILES[(name, chosen)]
    except KeyError:
        raise KeyError(f"profile {name!r} has no version {chosen} (have {versions})") from None
