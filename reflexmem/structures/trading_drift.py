"""Drift of a trading structure's outcome: the win rate of what it let through, per role.

An office bundle drifts when its tasks stop being solved. A trading decision is never
"solved"; what a structure is chosen for is the realized return of the decisions it
lets proceed. So a trading bundle's drift test (the same one-sided two-proportion test
as every bundle's, `bundle.detect_drift`) compares, per role, the share of proceeded
decisions that won (realized return > 0):

- baseline: the decisions the search replayed the structure on when it was chosen
  (`win_baseline`, from its evaluation: a held decision is not counted);
- recent: the decisions the production check stage recorded under the bundle
  (`decision_structures`) that no check held and whose return has since settled
  (`recent_wins`).

A route that starts filling every trade badly, a role whose signal stopped working, a
market the checks were not learned on: each shows as proceeded decisions losing more
often than when the structure was chosen, whatever the cause, and the daily audit then
restores the previous bundle.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.models import Episode, TradingDecision
from reflexmem.ledger.structure_models import DecisionStructure
from reflexmem.reflex.trading import read_episodes
from reflexmem.registry import RoleRegistry
from reflexmem.structures.evaluate import Evaluation
from reflexmem.structures.trading import HOLD


def win_baseline(ev: Evaluation) -> dict[str, list[int]]:
    """Per role [wins, proceeded] of a replay: the outcome a trading bundle is held to."""
    out: dict[str, list[int]] = {}
    for r in ev.results:
        if not r.answers or HOLD in r.answers.values():
            continue
        pair = out.setdefault(r.family, [0, 0])
        pair[0] += int(r.value > 0)
        pair[1] += 1
    return out


def recent_wins(
    conn: sa.Connection, registry: RoleRegistry, bundle_id: str
) -> dict[str, tuple[int, int]]:
    """Per role (wins, settled) of the decisions that ran under `bundle_id` unheld."""
    ds, d, e = DecisionStructure.__table__, TradingDecision.__table__, Episode.__table__
    held = sa.exists().where(
        e.c.decision_id == ds.c.decision_id, e.c.case_id.is_(None), e.c.status != "success"
    )
    ran = (
        sa.select(ds.c.decision_id, d.c.decided_at)
        .join(d, d.c.decision_id == ds.c.decision_id)
        .where(ds.c.bundle_id == bundle_id, ~held)
    )
    rows = conn.execute(ran).all()
    if not rows:
        return {}
    ids = pl.Series("decision_id", [r.decision_id for r in rows], dtype=pl.String)
    first = min(r.decided_at for r in rows) - timedelta(microseconds=1)
    settled = read_episodes(conn, registry, after=first)
    done = (
        settled.filter(
            pl.col("decision_id").is_in(ids.implode()) & pl.col("realized_return").is_not_null()
        )
        .unique("decision_id")
        .group_by("role_id")
        .agg((pl.col("realized_return") > 0).sum().alias("wins"), pl.len().alias("n"))
    )
    return {str(r): (int(w), int(n)) for r, w, n in done.iter_rows()}
