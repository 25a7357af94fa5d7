"""`make demo`, structures of the user's own roles: search, decisions under it, drift, rollback.

`WEEKS_BEFORE_END` weekly clocks before the newest bar, the trading structure search
runs on the decisions settled so far: the roles isolated are the start, and an edge
must earn its place on the final-test returns, with an interval (or the demo prints
why none did). From that clock on, the stream carries a planted drift: every fill is
`DRIFT_COST` worse than the close (a broken route; no record says so). Decisions are
checked under the active bundle and record it. At the next-to-last clock the daily
audit (`audit_structures`) finds the decisions the structure let through losing far
more often than when it was chosen, quarantines the bundle and restores the previous
one, pins verified before and after; the last week is checked under the restored one.

A rollback needs an earlier bundle. When the search keeps the roles isolated, the demo
switches one edge on by hand (what `reflexmem structures mutate` stores, then
activated) and says so, so that the safety net is still shown on real decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import polars as pl
import sqlalchemy as sa
from rich.console import Console
from rich.markup import escape

from apps.demo.runner import table
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.operations.structure_audit import StructureAuditRefused, audit_structures
from reflexmem.operations.structures import SearchParams, run_structure_search
from reflexmem.structures import persist, rollout
from reflexmem.structures.evaluate import replay
from reflexmem.structures.mutations import Step
from reflexmem.structures.operations import mutate
from reflexmem.structures.refusals import StructureRefused
from reflexmem.structures.trading_drift import win_baseline
from reflexmem.structures.trading_gate import SCOPE
from reflexmem.structures.trading_ledger import trading_setup

DRIFT_COST = 0.02
WEEKS_BEFORE_END = 6
"""Six weeks: on daily bars a drifted decision settles five to thirty bars later, and the
audit needs at least twenty settled since the drift in a role."""


def worse_fills_from(
    stream: dict[str, pl.DataFrame], start: datetime, fraction: float = DRIFT_COST
) -> dict[str, pl.DataFrame]:
    """Every decision from `start` on fills `fraction` worse: fills, entries and returns."""
    sign = stream["decisions"].select(
        "decision_id",
        pl.when(pl.col("direction") == "long").then(1.0).otherwise(-1.0).alias("_sign"),
        (pl.col("decided_at") >= start).alias("_late"),
    )
    by_exec = stream["executions"].select("execution_id", "decision_id").join(sign, "decision_id")
    worse = 1 + pl.col("_sign") * fraction
    fills = (
        stream["fills"]
        .join(by_exec.drop("decision_id"), "execution_id", how="left", maintain_order="left")
        .with_columns(pl.when(pl.col("_late")).then(pl.col("price") * worse).otherwise("price"))
        .drop("_sign", "_late")
    )
    entry = pl.col("entry_price") * worse
    moved = pl.col("_sign") * (pl.col("exit_price") / entry - 1)
    outcomes = (
        stream["outcomes"]
        .join(sign, "decision_id", how="left", maintain_order="left")
        .with_columns(
            pl.when(pl.col("_late"))
            .then(moved)
            .otherwise("realized_return")
            .alias("realized_return"),
            pl.when(pl.col("_late")).then(entry).otherwise("entry_price").alias("entry_price"),
        )
        .drop("_sign", "_late")
    )
    return {**stream, "fills": fills, "outcomes": outcomes}


def search(res: Resources, console: Console) -> None:
    """The trading search; a hand-made edge when it keeps isolation (a rollback needs two)."""
    try:
        out = run_structure_search(DirectRunner(res), SearchParams(environment="trading")).summary
    except ValueError as exc:  # no settled decision yet (a short stream): said, not fatal
        console.print(f"[yellow]no trading structure search[/yellow]: {escape(str(exc))}")
        return
    console.print(
        f"trading search {out['search_id']}: {out['parent']} -> {out['winner']} "
        f"({'registered' if out['registered'] else 'parent kept'}; {out['operator']})"
    )
    rows = [
        (r["name"], str(r["tasks"]), f"{r['cost'] / max(r['tasks'], 1):+.2f}",
         escape(", ".join(r["edges"]) or "none"))
        for r in out["final_test"]
    ]  # fmt: skip
    console.print(table("final test, after all the search read (cost in bp per decision: "
                        "the checks' and messages' cost minus realized return; lower is better)",
                        ("candidate", "decisions", "cost", "edges"), rows))  # fmt: skip
    evidence = out["edge_evidence"]
    console.print(f"edge evidence: [bold]{escape(evidence['verdict'])}[/bold]")
    for e in evidence["edges"]:
        console.print(
            f"  {e['edge']}: {e['mean']:+.2f} bp per decision [{e['low']:+.2f}, {e['high']:+.2f}]"
        )
    if out["mlflow"]:
        console.print(f"MLflow: {out['mlflow']['model']} v{out['mlflow']['version']}")
    if not out["registered"]:
        _hand_edge(res, console)


def _hand_edge(res: Resources, console: Console) -> None:
    found = rollout.active(res.engine, SCOPE)
    if found is None:
        return
    structure = found[1]
    by_checks = sorted(structure.modules, key=lambda m: (-len(m.skills), m.id))
    if len(by_checks) < 2:
        console.print("[yellow]one role only: no second bundle to roll back to[/yellow]")
        return
    source, target = by_checks[0], by_checks[1]
    step = Step("add_edge", {
        "source": source.id, "target": target.id, "fields": ["checks"],
        "contract": "lend-checks-v1", "contract_fields": {"checks": "string"},
    })  # fmt: skip
    try:
        child = mutate(res.engine, structure.structure_id, step).child
    except StructureRefused as exc:
        console.print(f"[yellow]no second bundle[/yellow]: {escape(str(exc.refusals[0]))}")
        return
    with res.engine.connect() as conn:
        env, sets, _ = trading_setup(conn, res.registry)
    counts = win_baseline(replay(child, env, sets.test))
    res.structure_tracker.register(res.engine, child.structure_id, families=sets.families())
    rollout.activate(res.engine, SCOPE, child.structure_id, counts=counts)
    console.print(
        f"no edge beat isolation; a person switches on {source.id} -> {target.id} by hand "
        f"(`structures mutate`, then active): {child.structure_id}"
    )


def audit(res: Resources, console: Console) -> None:
    """The structure audit of the daily `audit` flow on the trading scope."""
    try:
        report = audit_structures(res, scope=SCOPE, apply=True).scopes[0]
    except StructureAuditRefused as exc:  # drifted with nothing to restore: said below
        report = exc.report.scopes[0]
    if report.skipped:
        console.print(f"no structure audit of scope {SCOPE!r}: {report.skipped}")
        return
    families = (report.drift or {}).get("families", [])
    rows = [
        (f["family"], f"{f['baseline_rate']:.0%} of {f['baseline_n']}",
         f"{f['recent_rate']:.0%} of {f['recent_n']}", f"{f['z']:.1f}", str(f["drifted"]))
        for f in families
    ]  # fmt: skip
    console.print(table("drift per role: proceeded decisions that won (z >= 3 drifts)",
                        ("role", "when chosen", "since", "z", "drifted"), rows))  # fmt: skip
    if report.restored:
        same = report.pins_before == report.pins_after
        console.print(
            f"[bold]rolled back[/bold]: {report.quarantined} quarantined, {report.restored} "
            f"restored (pin checksums before and after {'equal' if same else 'DIFFER'})"
        )
    elif report.refused:
        console.print(f"[yellow]drift found, rollback refused[/yellow]: {escape(report.refused)}")
    else:
        least = int((report.drift or {}).get("min_episodes", 0))
        thin = [f["family"] for f in families if f["recent_n"] < least]
        why = f" ({', '.join(thin)}: under {least} settled decisions since)" if thin else ""
        console.print(f"no drift: {report.active} stays active{why}")


def at_clocks(
    res: Resources, console: Console, weeks: list[datetime]
) -> dict[datetime, Callable[[], None]]:
    """What runs after which weekly cycle: the search, then the audit two weeks later."""
    if len(weeks) <= WEEKS_BEFORE_END:
        return {}
    return {
        weeks[-1 - WEEKS_BEFORE_END]: lambda: search(res, console),
        weeks[-2]: lambda: audit(res, console),
    }


def drift_start(weeks: list[datetime]) -> datetime | None:
    """The clock the trading search runs at, where the planted drift starts."""
    return weeks[-1 - WEEKS_BEFORE_END] if len(weeks) > WEEKS_BEFORE_END else None


def show_runs(res: Resources, console: Console) -> None:
    """Decisions checked under each trading bundle, and the bundle active now."""
    ds = sa.table("decision_structures", sa.column("bundle_id"), sa.column("checked_at"))
    stmt = (
        sa.select(ds.c.bundle_id, sa.func.count(), sa.func.min(ds.c.checked_at),
                  sa.func.max(ds.c.checked_at))
        .group_by(ds.c.bundle_id).order_by(sa.func.min(ds.c.checked_at))
    )  # fmt: skip
    with res.engine.connect() as conn:
        rows = [(b, str(n), str(lo)[:10], str(hi)[:10]) for b, n, lo, hi in conn.execute(stmt)]
        active = persist.active_bundle_id(conn, SCOPE)
    console.print(table("decisions checked under each trading bundle",
                        ("bundle", "decisions", "first check", "last check"), rows))  # fmt: skip
    console.print(f"active trading bundle now: [bold]{active}[/bold]")
