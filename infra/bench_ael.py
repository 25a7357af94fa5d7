"""`reflexmem bench ael`: the AEL Table 2 on D-full (or any panel), with lineage.

Runs `reflexmem.ael.run.run_benchmark` behind a rich progress bar, prints the
Table-2 layout for the test split at every cost level, says plainly whether the
learning variants beat the baselines, writes the JSON document and the PNG plots
when asked, and logs the invocation to MLflow unless told not to.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import reflexmem.ael.learning  # noqa: F401  (registers the learning methods)
from reflexmem.ael.learning_plots import write_plots
from reflexmem.ael.run import BenchmarkResult, learning_verdict, load_inputs, run_benchmark
from reflexmem.ael.table import registered_methods, render_table2


def parse_methods(values: Sequence[str] | None) -> list[str] | None:
    """Split comma-separated and repeated `--methods` values; None means every method."""
    if not values:
        return None
    names = [v.strip() for value in values for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in registered_methods()]
    if unknown:
        raise ValueError(f"unknown methods {unknown}; registered: {list(registered_methods())}")
    return list(dict.fromkeys(names))


def run_command(
    *,
    prices: Path | None,
    seeds: int,
    methods: list[str] | None,
    json_out: Path | None,
    plots_dir: Path | None,
    train_end: date | None,
    val_end: date | None,
    bars_per_year: float,
    tracking_uri: str | None,
    console: Console,
) -> BenchmarkResult:
    """Run, print, write and log one benchmark invocation (`tracking_uri` None: no MLflow)."""
    if seeds < 1:
        raise ValueError("--seeds must be >= 1")
    inputs = load_inputs(prices, train_end=train_end, val_end=val_end)
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
            bars_per_year=bars_per_year,
            progress_callback=advance,
        )
    aggregated = result.aggregated()
    for cost in result.cost_bps:
        console.print(
            render_table2(aggregated, "test", cost), markup=False, highlight=False, soft_wrap=True
        )
        console.print()
    for line in learning_verdict(result):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    refusals = result.refusals()
    if refusals["example"]:
        console.print(
            f"point-in-time guard: {refusals['per_decision']:.0f} evidence items refused per"
            f" decision, e.g. {refusals['example']}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    timing = result.timing
    overhead = timing["agent_overhead_us"].get("all_learning")
    console.print(f"full table wall time: {timing['total_seconds']:.1f} s", highlight=False)
    if overhead:
        console.print(
            "agent overhead per episode: "
            + ", ".join(
                f"{k} {overhead[k]:.0f} us"
                for k in ("tools", "memory", "bandit", "reflection", "planner", "total")
            ),
            highlight=False,
            soft_wrap=True,
        )
    if plots_dir is not None:
        for path in write_plots(result, plots_dir):
            console.print(f"plot: {path}", highlight=False)
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result.to_document(), indent=1) + "\n")
        console.print(f"json: {json_out}", highlight=False)
    if tracking_uri is not None:
        from infra.tracking_ael import log_benchmark

        run_id = log_benchmark(
            result,
            inputs.panel,
            tracking_uri=tracking_uri,
            source=inputs.source,
            plots_dir=plots_dir,
        )
        console.print(f"mlflow: parent run {run_id} at {tracking_uri}", highlight=False)
    return result
