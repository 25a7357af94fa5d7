"""`reflexmem bench ael`: Table 2 per panel with statistics, pooled results, the verdict.

Loads the panels (D-full by default; `--panels classic` for the six classic panels of
`universal-portfolios`, read inside the isolated peer environment; `--prices` for any
CSV/Parquet panel; `--synthetic BARSxASSETS` for the timing panel), starts the
online-portfolio peers in their own environment in the background, runs
`reflexmem.ael.run.run_benchmark` behind a progress bar, prints each panel's pooled
Table 2 at every cost level with the statistics columns and the verdict in words,
writes the JSON document and PNG plots when asked, and logs to MLflow unless told not to.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import date
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import reflexmem.ael.learning  # noqa: F401  (registers the learning methods)
from reflexmem.ael.learning_plots import write_plots
from reflexmem.ael.metrics import BARS_PER_YEAR
from reflexmem.ael.report import render_pooled
from reflexmem.ael.results import BenchmarkResult
from reflexmem.ael.run import (
    COMPARATOR_METHODS,
    PeerWeights,
    known_methods,
    load_inputs,
    panel_inputs,
    run_benchmark,
)
from reflexmem.ael.run_tasks import PanelInputs
from reflexmem.prices.panel import PricePanel

DEFAULT_WORKERS = 2


def parse_methods(values: Sequence[str] | None) -> list[str] | None:
    """Split comma-separated and repeated `--methods` values; None means every method."""
    if not values:
        return None
    names = [v.strip() for value in values for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in known_methods()]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; known: {list(known_methods())}")
    return list(dict.fromkeys(names))


def synthetic_panel(spec: str, seed: int = 0) -> PricePanel:
    """A daily geometric random walk with a common factor, e.g. `8000x20`."""
    try:
        bars, assets = (int(x) for x in spec.lower().split("x"))
    except ValueError as exc:
        raise ValueError(f"--synthetic wants BARSxASSETS, e.g. 8000x20 (got {spec!r})") from exc
    rng = np.random.default_rng(seed)
    market = rng.normal(0.0003, 0.008, (bars, 1))
    steps = market + rng.normal(0.0, 0.012, (bars, assets))
    closes = 100.0 * np.exp(np.cumsum(steps, axis=0))
    days = np.busday_offset("2000-01-03", np.arange(bars), roll="forward")
    tickers = tuple(f"S{i:02d}" for i in range(assets))
    return PricePanel(
        days.astype("datetime64[us]"), days.astype("datetime64[D]"), tickers, closes, spec
    )


def load_panels(
    *,
    prices: Path | None,
    panels: str | None,
    synthetic: str | None,
    folds: int,
    train_end: date | None,
    val_end: date | None,
    bars_per_year: float | None,
    workdir: Path,
) -> tuple[PanelInputs, ...]:
    """Every panel the invocation asks for, cut into folds."""
    out: list[PanelInputs] = []
    names = [n.strip() for n in (panels or "").split(",") if n.strip()]
    if "classic" in names:
        from apps.bench.olps import CLASSIC_PANELS

        names = [n for n in names if n != "classic"] + list(CLASSIC_PANELS)
    if prices is None and synthetic is None and not names:
        names = ["dfull"]
    for name in dict.fromkeys(names):
        if name == "dfull":
            k = 1 if folds == 0 else folds
            out.append(load_inputs(None, folds=k, bars_per_year=bars_per_year or BARS_PER_YEAR))
            continue
        from apps.bench.olps import CLASSIC_BARS_PER_YEAR, load_classic_panel

        panel = load_classic_panel(name, workdir)
        out.append(
            panel_inputs(
                panel,
                name=name,
                folds=folds or 4,
                bars_per_year=bars_per_year or CLASSIC_BARS_PER_YEAR,
            )
        )
    if prices is not None:
        k = folds or 1
        out.append(
            load_inputs(
                prices,
                train_end=train_end,
                val_end=val_end,
                folds=k,
                bars_per_year=bars_per_year or BARS_PER_YEAR,
            )
        )
    if synthetic is not None:
        panel = synthetic_panel(synthetic)
        out.append(
            panel_inputs(
                panel,
                name=f"synthetic_{synthetic}",
                folds=folds or 4,
                bars_per_year=bars_per_year or 252.0,
            )
        )
    return tuple(out)


def run_command(
    *,
    prices: Path | None,
    seeds: int,
    methods: list[str] | None,
    json_out: Path | None,
    plots_dir: Path | None,
    train_end: date | None,
    val_end: date | None,
    bars_per_year: float | None,
    tracking_uri: str | None,
    console: Console,
    panels: str | None = None,
    synthetic: str | None = None,
    folds: int = 0,
    peers: bool = True,
    workers: int = DEFAULT_WORKERS,
) -> BenchmarkResult:
    """Run, print, write and log one benchmark invocation (`tracking_uri` None: no MLflow)."""
    if seeds < 1:
        raise ValueError("--seeds must be >= 1")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ael-peers-") as tmp:
        inputs = load_panels(
            prices=prices,
            panels=panels,
            synthetic=synthetic,
            folds=folds,
            train_end=train_end,
            val_end=val_end,
            bars_per_year=bars_per_year,
            workdir=Path(tmp),
        )
        peer_source, peer_note = _start_peers(inputs, Path(tmp), console) if peers else (None, "")
        with Progress(
            TextColumn("[bold]ael[/bold] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        ) as progress:
            task = progress.add_task("starting", total=None)

            def advance(done: int, total: int, label: str) -> None:
                progress.update(task, completed=done, total=total, description=label)

            result = run_benchmark(
                inputs,
                seeds=list(range(seeds)),
                methods=methods,
                peers=peer_source,
                workers=workers,
                progress_callback=advance,
            )
    result.timing["wall_seconds"] = time.perf_counter() - started
    if peer_note:
        result.peers["note"] = peer_note
    _print(result, inputs, console)
    if plots_dir is not None:
        for path in write_plots(result, plots_dir):
            console.print(f"plot: {path}", highlight=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result.to_document(), indent=1, allow_nan=False) + "\n")
        console.print(f"json: {json_out}", highlight=False)
    if tracking_uri is not None:
        from apps.bench.ael_tracking import log_benchmark

        run_id = log_benchmark(
            result,
            inputs[0].panel,
            tracking_uri=tracking_uri,
            source=",".join(p.source for p in inputs),
            plots_dir=plots_dir,
        )
        console.print(f"mlflow: parent run {run_id} at {tracking_uri}", highlight=False)
    return result


def _start_peers(
    inputs: tuple[PanelInputs, ...], workdir: Path, console: Console
) -> tuple[Callable[[], PeerWeights] | None, str]:
    from apps.bench.olps import PeerError, PeerJob

    try:
        jobs = {p.name: PeerJob.start(p.panel, p.folds, workdir / p.name) for p in inputs}
    except PeerError as exc:
        console.print(f"peers skipped: {exc}", markup=False, highlight=False)
        return None, f"skipped: {exc}"

    def collect() -> PeerWeights:
        out: PeerWeights = {}
        for name, job in jobs.items():
            try:
                weights, _seconds = job.result()
            except PeerError as exc:
                console.print(f"peers skipped on {name}: {exc}", markup=False, highlight=False)
                continue
            for (peer, fold), w in weights.items():
                out[(name, peer, fold)] = w
        return out

    return collect, "universal-portfolios 0.4.17, isolated environment, package defaults"


def _print(result: BenchmarkResult, inputs: tuple[PanelInputs, ...], console: Console) -> None:
    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    scopes: list[tuple[str, int | str]] = [(p.name, len(p.folds)) for p in inputs]
    if len(inputs) > 1:
        scopes.append(("all", "all"))
    for name, folds in scopes:
        for cost in result.cost_bps:
            say(render_pooled(result.rows, name, cost, result.methods, folds))
            say("")
    say("Verdict (pooled over folds and panels; seeded methods as their seed ensemble):")
    for line in result.verdict:
        say("  " + line)
    refusals = result.refusals()
    if refusals["example"]:
        say(
            f"point-in-time guard: {refusals['per_decision']:.0f} evidence items refused per"
            f" decision, e.g. {refusals['example']}"
        )
    t = result.timing
    floor = sum(t["per_method_seconds"].get(m, 0.0) for m in COMPARATOR_METHODS)
    say(
        f"full table wall time: {t.get('wall_seconds', t['total_seconds']):.1f} s"
        f" (runs {t['runs_seconds']:.1f} s, statistics {t.get('statistics_seconds', 0.0):.1f} s,"
        f" peers waited {result.peers.get('wait_seconds', 0.0):.1f} s); honest floor: the"
        f" fixed-rule table alone (vectorised rule book, same rows) {floor:.2f} s"
    )
