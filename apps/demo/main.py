"""`make demo`: the main job on the embedded defaults, one numbered stage after another.

Loads the D-full daily market data (nine months) through the `bars` ingest, generates a
decision stream on those prices, ingests it, attempts double consumptions of previews,
then runs the learning cycle itself (`run_cycle`, the same sequence the `daily_cycle`
flow runs) with a runner that shows every stage, first at a clock ten days into the
stream, then once a week to the newest bar (`apps/demo/skills.py`: skills need time to
be judged). It ends with the line from lessons to semantic patterns to procedural rules,
a recall that shows all three tiers, the REFLEX checks learned from the lessons and the
outcome rules, a structure of the user's own roles searched, run, caught drifting and
rolled back (`apps/demo/trading.py`), one seed of the AEL benchmark, the versioned
definitions in the MLflow registry, and one trade's whole lineage with the HTML report.
Each clock is a bar time, so decisions not due yet are honestly pending.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta
from pathlib import Path

from rich.console import Console

from apps.demo import skills as demo_skills
from apps.demo import trading as demo_trading
from apps.demo.lineage import show_lineage, show_registry
from apps.demo.memory import show_memory_line, show_recall
from apps.demo.runner import DemoRunner
from apps.demo.structures import demo_structures
from reflexmem.operations import intake
from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.resources import Resources
from reflexmem.prices.dfull_bars import daily_panel, write_dfull_bars
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream


def _inputs(runner: DemoRunner, res: Resources, rows: int, workdir: Path) -> datetime:
    console = runner.console
    runner.heading("market data: nine months of D-full daily bars, through the `bars` ingest")
    bars = intake.ingest(res, [write_dfull_bars(workdir, daily=True)], "bars")
    console.print(
        f"bars: {bars.added.get('bars', 0)} new, {bars.unchanged_rows.get('bars', 0)} already "
        f"stored, {sum(bars.quarantined.values())} quarantined"
    )
    runner.heading("a decision stream on those prices, ingested in one transaction")
    panel = daily_panel()
    stream = generate(panel, rows, seed=7, fill_cost=demo_skills.FILL_COST)
    costly = ", ".join(f"{k} {v:.1%}" for k, v in demo_skills.FILL_COST.items())
    console.print(
        f"scenario: fills of {costly} worse than the close on every trade (a costly route): "
        "no record says so, only realized outcomes can"
    )
    first = stream["decisions"]["decided_at"].min()
    assert isinstance(first, datetime)
    lag = first + timedelta(days=demo_skills.LAG_DAYS)
    stream["decisions"] = demo_skills.lag_technicals(stream["decisions"], lag)
    newest = res.prices.newest()
    drift = demo_trading.drift_start(demo_skills.clocks(first, newest or first))
    if drift is not None:
        stream = demo_trading.worse_fills_from(stream, drift)
        console.print(
            f"scenario: from {drift:%Y-%m-%d} every fill is {demo_trading.DRIFT_COST:.0%} worse "
            "than the close (a broken route), the drift a structure's audit must catch"
        )
    paths = write_stream(stream, workdir / "stream", fmt="parquet")
    paths[-1] = write_stream({"outcomes": stream["outcomes"]}, workdir / "stream", fmt="csv")[0]
    report = intake.ingest(res, paths)
    again = intake.ingest(res, paths)
    console.print(
        f"{rows} decisions on {len(panel.tickers)} tickers: {dict(report.added.items())}; "
        f"re-ingest adds {again.total_added} rows ({len(again.skipped_files)} files unchanged)"
    )
    runner.heading("double-consumption attempts are refused and kept in quarantine")
    consumed = stream["previews"].filter(stream["previews"]["consumed_at"].is_not_null()).head(3)
    for preview_id, decision_id in consumed.select("preview_id", "decision_id").iter_rows():
        done = intake.consume(res, preview_id, decision_id)
        console.print(f"[yellow]refused[/yellow]: {done.reason}")
    return first


def run_demo(settings: Settings, res: Resources, *, rows: int, console: Console) -> None:
    """Run every stage on the ledger `res` was built for (migrated by `db upgrade`)."""
    runner = DemoRunner(res, console)
    workdir = Path(tempfile.mkdtemp(prefix="reflex-demo-"))
    try:
        first = _inputs(runner, res, rows, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    newest = res.prices.newest()
    weeks = demo_skills.clocks(first, newest if newest is not None else first)
    report = run_cycle(runner, CycleParams(as_of=weeks[0]))
    assert report.admission.rows_in == (
        report.admission.admitted + report.admission.pending + report.admission.quarantined
    )
    runner.heading("the cycle every week after, each at its own clock (skills need time)")
    console.print(
        "structures of your own roles: searched "
        f"{demo_trading.WEEKS_BEFORE_END} weeks before the end, audited for drift after"
    )
    demo_skills.walk(
        res, runner.console, weeks[1:], first, then=demo_trading.at_clocks(res, console, weeks)
    )
    demo_trading.show_runs(res, console)
    runner.heading("from lessons to patterns to rules")
    show_memory_line(res, console)
    runner.heading("recall in active mode shows every tier it holds; shadow mode has no recall")
    show_recall(res, console)
    runner.heading("REFLEX skills: checks from lessons and outcome rules, effect, registry")
    demo_skills.show(res, runner.console)
    runner.heading("REFLEX structures: experiment B, selection loop, current structure")
    demo_structures(res, console)
    runner.heading("AEL benchmark on D-full, one seed (the full table: reflexmem bench ael)")
    from apps.bench.ael import run_command

    out = settings.home / "ael"
    run_command(
        prices=None,
        seeds=1,
        methods=None,
        json_out=out / "ael.json",
        plots_dir=out / "plots",
        train_end=None,
        val_end=None,
        bars_per_year=1008,
        tracking_uri=settings.resolved_tracking_uri,
        console=console,
        peers=False,
    )
    console.print(f"plots: {(out / 'plots').resolve()}")
    runner.heading("versioned definitions: profiles, role skill files, REFLEX skills")
    show_registry(settings, res, console)
    runner.heading("lineage review: one trade from decision to rule, and the HTML report")
    show_lineage(settings, res, console)
    console.print(f"store: {settings.resolved_database_url}")
    console.print(
        f"MLflow UI: [bold]mlflow ui --backend-store-uri {settings.resolved_tracking_uri}[/bold]"
    )
    console.print("check it with: [bold]uv run reflexmem doctor[/bold]")
