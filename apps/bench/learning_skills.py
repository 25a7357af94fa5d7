"""The skill side of `bench learning`: avoid-rules become checks, promoted on outcomes.

As the stream is learned, every `CHECK_EVERY` decisions the cycle's two skill steps run
on what the memory holds at that moment: each formed or confirmed avoid-rule without a
check becomes one (`reflexmem.reflex.rule_checks.rule_check_file`, the generator's own
function), and each pending check takes the moves its evidence allows
(`rule_checks.rule_step`, the lifecycle's own step, with the newest version of its
rule) on the decisions whose positions had settled by then. Nothing here decides a
promotion: the production functions do, on the judged frame the ledger would hand them.
Adapted to the benchmark is only where the decisions come from (the generated stream
instead of the ledger) and the clock (the stream's decision times).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import numpy as np
import polars as pl

from reflexmem.ledger.enums import Tier
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.memory.outcome_rules import live_rules, newest_rules
from reflexmem.memory.store import InMemoryStore
from reflexmem.reflex.evidence import VersionView
from reflexmem.reflex.outcomes import DECIDED_AT, RETURN, STOPPED, check_stops, outcome_effect
from reflexmem.reflex.rule_checks import rule_check_file, rule_step
from reflexmem.reflex.skills import parse_skill
from reflexmem.reflex.trading import SETTLED_AT, observations, text_frame
from reflexmem.registry import RoleRegistry

CHECK_EVERY = 50
"""Decisions between two runs of the skill steps: about a weekly cycle on this stream."""
S = SkillState
PENDING = (S.CANDIDATE, S.VALIDATING, S.LIMITED)


def _advance(
    view: VersionView, known: pl.DataFrame, now: datetime, rule: MemoryEntry | None = None
) -> VersionView:
    """The moves a pending check's evidence allows at `now` (`rule_checks.rule_step`)."""
    for _ in range(3):
        if view.state not in PENDING:
            break
        step = rule_step(view, known, now, rule)
        if isinstance(step, str):
            break
        to = step[0]
        view = replace(view, state=to, changed_at=now, history=(*view.history, (to, now)))
        if to == S.LIMITED:
            view = replace(view, limited_at=now)
        elif to == S.ACTIVE:
            view = replace(view, active_at=now)
    return view


def judged(cases: pl.DataFrame, registry: RoleRegistry) -> pl.DataFrame:
    """The stream as the judged frame of `reflexmem.reflex.trading` (what checks decide on)."""
    raw = cases.select(
        "decision_id",
        "role_id",
        pl.lit("bench").alias("account"),
        "symbol",
        "direction",
        "scenario",
        pl.col("decided_at").dt.strftime("%Y-%m-%dT%H:%M:%S+00:00"),
        "evidence",
    )
    obs = observations(raw, registry)
    return text_frame(obs, registry).with_columns(
        obs["decision_id"],
        pl.lit(None, dtype=pl.String).alias("pattern"),
        pl.lit("evaluation").alias("split"),
        obs["decided_at"].alias("decided_at_ts"),
        cases["realized_return"],
        cases["settled_at"].alias(SETTLED_AT),
    )


def held_effect(held: np.ndarray, ret: np.ndarray, at: pl.Series) -> dict[str, Any] | None:
    """Mean return of what proceeds minus what is held (None: too few on a side).

    The interval is the production check's, over two-week blocks of `at`
    (`outcomes.outcome_effect`; None before five blocks).
    """
    rows = pl.DataFrame({STOPPED: held, RETURN: ret, DECIDED_AT: at})
    eff = outcome_effect(rows)
    if eff.effect is None:
        return None
    return {
        "effect": eff.effect,
        "ci_low": eff.ci_low,
        "ci_high": eff.ci_high,
        "n_held": eff.n_held,
        "n_passed": eff.n_passed,
    }


@dataclass
class Checks:
    """The rule checks of one stream and the moves they made."""

    role_id: str
    registry: RoleRegistry
    frame: pl.DataFrame
    views: dict[str, VersionView] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    known: tuple[str, ...] = ()
    """Conditions the bench knows (the planted one; on a null stream, every checkable
    one): each gets an oracle check at the stream's first cycle (`plant_oracles`)."""
    oracles: dict[str, VersionView] = field(default_factory=dict)
    planted_at: datetime | None = None
    """When the oracle checks were made (the first cycle)."""
    oracle_seconds: float = 0.0
    """Time spent on the oracle checks: the bench's, not the learner's."""

    def run(self, store: InMemoryStore, now: datetime) -> None:
        """One cycle's generation and promotion at `now`."""
        rules = newest_rules(store, role_namespace(self.role_id))
        for condition, rule in live_rules(rules).items():
            if condition in self.views or condition in self.skipped:
                continue
            made = rule_check_file(rule, self.role_id, self.registry, now=now)
            if isinstance(made, str):
                self.skipped[condition] = made
                continue
            spec = parse_skill(made[1], f"generated:{made[0]}.yaml", self.registry)
            self.views[condition] = VersionView(
                spec, S.CANDIDATE, now, history=((str(S.CANDIDATE), now),)
            )
        settled = self.frame.filter(pl.col(SETTLED_AT) <= now)
        for condition, view in self.views.items():
            self.views[condition] = _advance(view, settled, now, rules.get(condition))
        started = time.perf_counter()
        if self.planted_at is None:
            self.plant_oracles(now)
        for condition, view in self.oracles.items():
            self.oracles[condition] = _advance(view, settled, now)
        self.oracle_seconds += time.perf_counter() - started

    def plant_oracles(self, now: datetime) -> None:
        """The lifecycle's ceiling: a check of each known condition, made at `now`.

        Each is made as a confirmed avoid-rule's check would be (`rule_check_file`) and
        enters `validating` at once: it knows its condition, so it needs no rule and no
        confirmation. From there the production steps move it, on the same decisions as
        the learned checks. A condition no check can express gets none.
        """
        self.planted_at = now
        for condition in self.known:
            rule = MemoryEntry(
                id=f"oracle:{condition}",
                namespace=role_namespace(self.role_id),
                tier=Tier.PROCEDURAL,
                text=f"Oracle: a check of {condition}, known from the start.",
                tags=(condition,),
                stats={"direction": -1, "confirm": {"oracle": True}},
            )
            made = rule_check_file(rule, self.role_id, self.registry, now=now)
            if isinstance(made, str):
                continue
            spec = parse_skill(made[1], f"oracle:{made[0]}.yaml", self.registry)
            history = ((str(S.VALIDATING), now),)
            self.oracles[condition] = VersionView(spec, S.VALIDATING, now, history=history)

    def oracles_active(self) -> list[str]:
        """Conditions whose oracle check is active."""
        return sorted(c for c, v in self.oracles.items() if v.state == S.ACTIVE)

    def rolled_out(self) -> int:
        """Learned checks that reached a limited rollout (and so held some decisions)."""
        return sum(1 for v in self.views.values() if any(s == S.LIMITED for s, _ in v.history))

    def active(self) -> list[str]:
        """Conditions whose check is active."""
        return sorted(c for c, v in self.views.items() if v.state == S.ACTIVE)

    def after_activation(
        self, condition: str, truth: pl.Series, *, oracle: bool = False
    ) -> dict[str, Any] | None:
        """The check's effect on the decisions made after it became active (never judged it).

        `oracle`: the oracle check of `condition` rather than the learned one. `truth`
        marks, per stream row, what the oracle holds; its effect on the same decisions is
        returned beside (`oracle_effect`).
        """
        view = self.oracles.get(condition) if oracle else self.views.get(condition)
        if view is None or view.active_at is None:
            return None
        rows = self.frame.with_columns(truth.alias("_truth"))
        rows = rows.filter(
            (pl.col("decided_at_ts") > view.active_at) & (pl.col("role_id") == self.role_id)
        )
        ret, at = rows["realized_return"].to_numpy(), rows["decided_at_ts"]
        found = held_effect(check_stops(view.spec, rows).to_numpy(), ret, at)
        truth_held = held_effect(rows["_truth"].to_numpy(), ret, at)
        if found is None:
            return None
        return found | {"oracle_effect": truth_held["effect"] if truth_held else None}
