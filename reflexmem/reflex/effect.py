"""The measured effect of a trading check (pure): its failure mode with the check off and on.

What "effect" means here, honestly: the decision stream is history, so a decision the
check held was still executed in the stream and its outcome is still known. That is
what makes the measurement possible: for every decision the check did or did not stop,
reflection later said whether it carried the check's lesson. The effect is the rate of
that failure mode among the decisions that went ahead:

* **off**: decisions made before the check was limited; nothing stopped them, so the
  rate is the failure mode's base rate;
* **rollout control / treated**: decisions made while it was limited, by the sticky
  arm of their account and symbol; the treated arm was checked, the control was not:
  the same weeks, side by side;
* **on**: decisions made while it was active (until a quarantine or retirement).

The windows are those of the version's first promotion (a revalidated version's later
rollout is not measured again here).

Only decisions the check was not generated from count: its source experiences and the
whole fit split are left out, and so are decisions another version of the same skill
checked (a limited successor inside its rollout): they are that version's effect.
`caught` are stopped decisions with the lesson, `false_stops` stopped decisions
without it (what the check cost).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import polars as pl

from reflexmem.reflex.evidence import ROLLOUT_FRACTION, VersionView, in_scope
from reflexmem.reflex.monitor import rollout_assign
from reflexmem.reflex.shadow import EXPECTED
from reflexmem.reflex.trading import PROCEED


@dataclass(frozen=True)
class EffectWindow:
    """A window of decisions and what the check did to its failure mode."""

    skill: str
    window: str
    decisions: int
    failure_cases: int
    stopped: int
    caught: int
    proceeded: int
    failures_proceeded: int

    @property
    def rate_without_check(self) -> float:
        """Share of the window's decisions that had the failure mode."""
        return self.failure_cases / self.decisions if self.decisions else 0.0

    @property
    def rate_proceeded(self) -> float:
        """Share of the decisions that went ahead that had the failure mode."""
        return self.failures_proceeded / self.proceeded if self.proceeded else 0.0

    @property
    def false_stops(self) -> int:
        """Decisions stopped without the failure mode."""
        return self.stopped - self.caught


def _window(skill: str, name: str, rows: pl.DataFrame) -> EffectWindow:
    failure = pl.col(EXPECTED) != PROCEED
    stopped = pl.col("stopped")
    counts = rows.select(
        pl.len().alias("n"),
        failure.sum().alias("fail"),
        stopped.sum().alias("stop"),
        (stopped & failure).sum().alias("caught"),
        (~stopped & failure).sum().alias("fail_proceeded"),
    ).row(0)
    n, fail, stop, caught, fail_proceeded = (int(v or 0) for v in counts)
    return EffectWindow(skill, name, n, fail, stop, caught, n - stop, fail_proceeded)


def measure_effect(
    view: VersionView, episodes: pl.DataFrame, checks: pl.DataFrame, *, through: datetime
) -> tuple[EffectWindow, ...]:
    """The check's windows (off, rollout arms, on) on decisions held apart from it."""
    rows = in_scope(view.spec, episodes, through=through).filter(pl.col("split") != "fit")
    mine = (
        checks.filter(pl.col("checked_key") == view.key)
        .group_by("decision_id")
        .agg(pl.col("stopped").any())
    )
    others = checks.filter(
        (pl.col("checked_id") == view.spec.skill_id) & (pl.col("checked_key") != view.key)
    ).select("decision_id")
    rows = (
        rows.join(others, on="decision_id", how="anti")
        .join(mine, on="decision_id", how="left")
        .with_columns(pl.col("stopped").fill_null(False))
    )
    when = pl.col("decided_at_ts")
    limited, end, stop = _first_promotion(view)
    out = []
    before = rows if limited is None else rows.filter(when <= limited)
    out.append(_window(view.key, "off", before))
    if limited is None:
        return tuple(out)
    during = rows.filter(when > limited)
    if end is not None:
        during = during.filter(when <= end)
    arms = rollout_assign(during, view.key, ROLLOUT_FRACTION)
    out.append(_window(view.key, "rollout control", arms.filter(pl.col("arm") == "control")))
    out.append(_window(view.key, "rollout treated", arms.filter(pl.col("arm") == "treated")))
    if end is not None:
        after = rows.filter(when > end)
        if stop is not None:
            after = after.filter(when <= stop)
        out.append(_window(view.key, "on", after))
    return tuple(out)


def _first_promotion(
    view: VersionView,
) -> tuple[datetime | None, datetime | None, datetime | None]:
    """When it first became limited, then active, then left active (each None if never)."""
    limited = active = left = None
    for state, at in view.history:
        if limited is None and state == "limited":
            limited = at
        elif limited is not None and active is None and state == "active":
            active = at
        elif active is not None and state in ("quarantined", "retired"):
            left = at
            break
    return limited, active, left
