"""`reflexmem`: the command line over the core, the expectations and the flows.

Commands build one `Settings` and pass it down; heavy dependencies (Great Expectations,
Prefect, MLflow) are imported inside the commands that need them, so `--help` is fast.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from reflexmem.settings import Settings

if TYPE_CHECKING:
    from reflexmem.admission.admit import AdmissionResult

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
db_app = typer.Typer(no_args_is_help=True, help="Ledger schema.")
preview_app = typer.Typer(no_args_is_help=True, help="Manual previews.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print JSON.")
app.add_typer(db_app, name="db")
app.add_typer(preview_app, name="preview")
app.add_typer(bench_app, name="bench")
console = Console()
err = Console(stderr=True)


def _check_backend(backend: str) -> None:
    if backend not in ("sqlite", "postgres"):
        err.print("--backend must be sqlite or postgres")
        raise typer.Exit(2)


def _emit(result: dict[str, Any], as_json: bool) -> None:
    """One JSON object on stdout (for scripts), or pretty JSON for people."""
    if as_json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        console.print_json(json.dumps(result))


def _counts_table(title: str, counts: dict[str, int]) -> Table:
    table = Table(title=title)
    table.add_column("reason")
    table.add_column("rows", justify="right")
    for key, value in counts.items():
        table.add_row(key, str(value))
    return table


@db_app.command("upgrade")
def db_upgrade() -> None:
    """Create or migrate the ledger schema to the newest revision."""
    from infra import migrate
    from infra.services import ready_engine

    settings = Settings()
    engine = ready_engine(settings)
    console.print(f"ledger at revision {migrate.current_revision(engine)} ({settings.backend})")


@app.command()
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Parquet, CSV or JSONL ledger files.")],
    kind: Annotated[
        str | None, typer.Option(help="Kind of every file, if names don't tell.")
    ] = None,
    admit: Annotated[bool, typer.Option("--admit/--no-admit", help="Run admission after.")] = False,
) -> None:
    """Validate and load ledger files in one transaction; bad input writes nothing."""
    from infra.services import ready_engine, run_admission, run_ingest
    from reflexmem.ingest.read import IngestError

    settings = Settings()
    engine = ready_engine(settings)
    try:
        with console.status(f"validating and loading {len(paths)} file(s)"):
            report = run_ingest(engine, paths, kind)
    except IngestError as exc:
        err.print(f"[red]ingest failed, nothing written:[/red] {exc}", soft_wrap=True)
        raise typer.Exit(2) from exc
    for path in report.skipped_files:
        console.print(f"unchanged (ingested before): {path}")
    for k, n in report.added.items():
        console.print(f"{k}: {n} new rows, {report.unchanged_rows.get(k, 0)} already stored")
    if admit:
        _print_admission(run_admission(engine, settings))


def _print_admission(result: AdmissionResult) -> None:
    from infra.render import admission_table

    console.print(admission_table(result))


@app.command("admit")
def admit_cmd() -> None:
    """Admit every not-yet-admitted execution (fail-closed, guarded by Great Expectations)."""
    from infra.services import ready_engine, run_admission

    settings = Settings()
    _print_admission(run_admission(ready_engine(settings), settings))


@preview_app.command("consume")
def preview_consume(preview_id: str, decision_id: str) -> None:
    """Consume a manual preview for a decision; a second consumption is refused."""
    from infra.services import ready_engine
    from reflexmem.ledger.previews import PreviewError, consume_preview

    engine = ready_engine(Settings())
    try:
        with engine.begin() as conn:
            consume_preview(conn, preview_id, decision_id)
    except PreviewError as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(1) from exc
    console.print(f"preview {preview_id} consumed by {decision_id}")


@app.command()
def doctor() -> None:
    """Check the store: reachable, migrated, registry valid; show mode and case counts."""
    from infra.doctor import run_doctor

    report = run_doctor(Settings())
    for check in report.checks:
        mark = "[green]ok[/green]" if check.ok else "[red]FAIL[/red]"
        console.print(f"{mark}  {check.name}: {check.detail}")
    for title, counts in report.tables.items():
        if counts:
            console.print(_counts_table(title, counts))
    if not report.healthy:
        raise typer.Exit(1)


@app.command()
def demo(
    rows: Annotated[int, typer.Option(help="Decisions in the generated stream.")] = 5000,
) -> None:
    """Run the main job on the embedded defaults, end to end."""
    from infra.demo import run_demo

    run_demo(Settings(), rows=rows, console=console)


@bench_app.command("admission")
def bench_admission(
    rows: Annotated[int, typer.Option(help="Decisions to generate.")] = 100_000,
    backend: Annotated[str, typer.Option(help="sqlite or postgres.")] = "sqlite",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Ingest + Great Expectations + admission against a bare bulk load, same run."""
    from infra.bench_admission import run_bench

    _check_backend(backend)
    _emit(run_bench(Settings(), rows=rows, backend=backend, progress=not as_json), as_json)


@app.command("recall")
def recall_cmd(
    query: Annotated[str, typer.Argument(help="What to recall (plain text; never SQL).")],
    role: Annotated[str, typer.Option(help="Exact role id (required).")],
    symbol: Annotated[str | None, typer.Option(help="Only cases on this symbol.")] = None,
    scenario: Annotated[str | None, typer.Option(help="Only cases in this scenario.")] = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="ISO time; nothing recorded later (UTC if naive).")
    ] = None,
    k: Annotated[int, typer.Option("--k", help="How many items to return.")] = 5,
    embedder: Annotated[str, typer.Option(help="none, hashing or minilm (extra).")] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Recall reflected role cases (active mode only; shadow has no recall)."""
    from datetime import UTC, datetime

    from infra.services import ready_engine
    from reflexmem.recall import (
        HashingEmbedder,
        RecallConstraints,
        RecallQueryError,
        RecallUnavailable,
        recall,
        require_active,
    )
    from reflexmem.settings import runtime_mode

    try:
        require_active(runtime_mode())
    except RecallUnavailable as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(3) from exc
    try:
        when = None if as_of is None else datetime.fromisoformat(as_of)
    except ValueError as exc:
        err.print(f"--as-of must be an ISO timestamp: {exc}")
        raise typer.Exit(2) from exc
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    emb = None
    if embedder == "hashing":
        emb = HashingEmbedder()
    elif embedder == "minilm":
        from reflexmem.recall.embeddings import MiniLMEmbedder

        emb = MiniLMEmbedder()
    elif embedder != "none":
        err.print("--embedder must be none, hashing or minilm")
        raise typer.Exit(2)
    engine = ready_engine(Settings())
    try:
        constraints = RecallConstraints(role=role, symbol=symbol, scenario=scenario, as_of=when)
        with engine.connect() as conn:
            result = recall(conn, constraints, query, k=k, embedder=emb)
    except (RecallQueryError, ValueError) as exc:
        err.print(f"[red]bad query:[/red] {exc}")
        raise typer.Exit(2) from exc
    finally:
        engine.dispose()
    payload = {
        "role": role,
        "symbol": symbol,
        "scenario": scenario,
        "as_of": None if when is None else when.isoformat(),
        "terms": list(result.terms),
        "candidates": result.candidates,
        "hits": [h.to_dict() for h in result.hits],
    }
    if as_json:
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    table = Table(title=f"recall for {role!r}: {query!r}")
    for col in ("#", "kind", "tier", "id", "score", "text"):
        table.add_column(col)
    for i, h in enumerate(result.hits, 1):
        table.add_row(str(i), h.kind, h.tier.value, h.id, f"{h.score:.3f}", h.text)
    console.print(table)


@bench_app.command("recall")
def bench_recall_cmd(
    cases: Annotated[int, typer.Option(help="Role cases in the generated store.")] = 100_000,
    backend: Annotated[str, typer.Option(help="sqlite or postgres.")] = "sqlite",
    queries: Annotated[int, typer.Option(help="Timed recalls.")] = 300,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Constrained recall latency over N role cases, against an unindexed scan."""
    from infra.bench_recall import run_bench

    _check_backend(backend)
    result = run_bench(
        Settings(), cases=cases, backend=backend, queries=queries, progress=not as_json
    )
    _emit(result, as_json)


@bench_app.command("memory")
def bench_memory_cmd(
    episodes: Annotated[int, typer.Option(help="Episodes to time.")] = 2000,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Microseconds per episode: retrieval + ranking + bandit, 500 entries per tier."""
    from reflexmem.memory.bench import bench_memory

    _emit(bench_memory(episodes=episodes, seed=seed), as_json)


@bench_app.command("ael")
def bench_ael_cmd(
    prices: Annotated[
        Path | None, typer.Option(help="Price panel (CSV/Parquet, wide or long); default D-full.")
    ] = None,
    seeds: Annotated[int, typer.Option(help="Seeds 0..N-1 for the seeded methods.")] = 5,
    methods: Annotated[
        list[str] | None,
        typer.Option(help="Methods, comma-separated or repeated; default all registered."),
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the rows here.")] = None,
    plots: Annotated[Path | None, typer.Option(help="Write PNG plots into this folder.")] = None,
    train_end: Annotated[
        str | None, typer.Option(help="Last train date YYYY-MM-DD (with --val-end).")
    ] = None,
    val_end: Annotated[str | None, typer.Option(help="Last validation date YYYY-MM-DD.")] = None,
    bars_per_year: Annotated[float, typer.Option(help="Annualisation (bars per year).")] = 1008,
    no_mlflow: Annotated[bool, typer.Option("--no-mlflow", help="Skip MLflow lineage.")] = False,
) -> None:
    """AEL Table 2: baselines and learning agents over seeds, splits and cost levels."""
    from datetime import date

    from infra.bench_ael import parse_methods, run_command

    try:
        chosen = parse_methods(methods)
        result = run_command(
            prices=prices,
            seeds=seeds,
            methods=chosen,
            json_out=json_out,
            plots_dir=plots,
            train_end=None if train_end is None else date.fromisoformat(train_end),
            val_end=None if val_end is None else date.fromisoformat(val_end),
            bars_per_year=bars_per_year,
            tracking_uri=None if no_mlflow else Settings().resolved_tracking_uri,
            console=console,
        )
    except ValueError as exc:
        err.print(f"[red]bench ael:[/red] {exc}")
        raise typer.Exit(2) from exc
    del result


def main() -> None:
    """Console-script entry point."""
    app()
