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


eval_app = typer.Typer(no_args_is_help=True, help="Evaluation runs: run, replay, promote.")
app.add_typer(eval_app, name="eval")


@eval_app.command("run")
def eval_run_cmd(
    profile: Annotated[str, typer.Option(help="Benchmark profile.")] = "spy_daily",
    version: Annotated[int | None, typer.Option(help="Profile version.")] = None,
) -> None:
    """Evaluate every matured, unevaluated case as one batch (one MLflow run)."""
    from infra.services import ready_engine
    from infra.tracking_eval import EvaluationTracker, tracked_evaluate
    from reflexmem.evaluation import get_profile
    from reflexmem.maturation import dfull_prices

    settings = Settings()
    tracker = EvaluationTracker(
        settings.resolved_tracking_uri, ledger_url=settings.resolved_database_url
    )
    result = tracked_evaluate(
        ready_engine(settings), tracker, dfull_prices(), get_profile(profile, version)
    )
    console.print(
        f"{result.n_runs} run(s), batch {result.info.batch_id}, MLflow run {result.mlflow_run_id}"
    )


@eval_app.command("replay")
def eval_replay_cmd(
    profile: Annotated[str, typer.Option(help="Benchmark profile.")] = "spy_daily",
    version: Annotated[int | None, typer.Option(help="Profile version to replay with.")] = None,
    role: Annotated[list[str] | None, typer.Option(help="Only these roles.")] = None,
) -> None:
    """Re-evaluate decisions that have a primary run: new runs, none promoted."""
    from infra.services import ready_engine
    from infra.tracking_eval import EvaluationTracker, tracked_evaluate
    from reflexmem.evaluation import get_profile
    from reflexmem.maturation import dfull_prices

    settings = Settings()
    tracker = EvaluationTracker(
        settings.resolved_tracking_uri, ledger_url=settings.resolved_database_url
    )
    result = tracked_evaluate(
        ready_engine(settings),
        tracker,
        dfull_prices(),
        get_profile(profile, version),
        replay_runs=True,
        roles=role,
    )
    console.print(
        f"replay: {result.n_runs} new run(s), batch {result.info.batch_id}, "
        f"MLflow run {result.mlflow_run_id}; promote with `reflexmem eval promote`"
    )


@eval_app.command("promote")
def eval_promote_cmd(
    profile: Annotated[str, typer.Option(help="Benchmark profile.")] = "spy_daily",
    version: Annotated[int | None, typer.Option(help="Only runs of this version.")] = None,
    batch: Annotated[str | None, typer.Option(help="Only runs of this batch.")] = None,
    run: Annotated[list[str] | None, typer.Option(help="Explicit run IDs.")] = None,
) -> None:
    """Make the newest matching run of each decision its one primary run."""
    from infra.services import ready_engine
    from infra.tracking_eval import EvaluationTracker, tracked_promote
    from reflexmem.evaluation import PromotionError

    settings = Settings()
    tracker = EvaluationTracker(
        settings.resolved_tracking_uri, ledger_url=settings.resolved_database_url
    )
    try:
        result = tracked_promote(
            ready_engine(settings),
            tracker,
            profile,
            version=version,
            source_batch=batch,
            run_ids=run,
        )
    except PromotionError as exc:
        err.print(f"[red]promotion refused:[/red] {exc}")
        raise typer.Exit(2) from exc
    console.print(f"{result.promoted} run(s) promoted, MLflow run {result.mlflow_run_id}")


@app.command("mature")
def mature_cmd(
    flow: Annotated[bool, typer.Option("--flow/--direct", help="Run as a Prefect flow.")] = False,
) -> None:
    """Settle positions, decide maturity, evaluate and promote the first runs."""
    settings = Settings()
    if flow:
        from flows.maturation import maturation_check

        console.print_json(data=maturation_check(), default=str)
        return
    from datetime import UTC, datetime

    from infra.services import ready_engine
    from infra.tracking_eval import EvaluationTracker, tracked_evaluate, tracked_promote
    from reflexmem.evaluation import get_profile
    from reflexmem.maturation import dfull_prices, mature_cases, settle_open_positions
    from reflexmem.registry import load_registry

    engine = ready_engine(settings)
    source, registry, profile = dfull_prices(), load_registry(), get_profile()
    with engine.begin() as conn:
        settled = settle_open_positions(conn, source, registry)
        report = mature_cases(
            conn,
            registry,
            as_of=datetime.now(UTC),
            min_points=settings.min_evaluation_points,
            profile=profile.name,
        )
    tracker = EvaluationTracker(
        settings.resolved_tracking_uri, ledger_url=settings.resolved_database_url
    )
    evaluated = tracked_evaluate(engine, tracker, source, profile)
    promoted = tracked_promote(
        engine, tracker, profile.name, source_batch=evaluated.info.batch_id, only_unpromoted=True
    )
    console.print_json(
        data={
            "settled": settled.settled,
            "matured": report.matured,
            "pending": report.pending,
            "evaluated": evaluated.n_runs,
            "promoted": promoted.promoted,
        }
    )


@app.command("reflect")
def reflect_cmd(
    role: Annotated[list[str] | None, typer.Option(help="Only these roles.")] = None,
    flow: Annotated[bool, typer.Option("--flow/--direct", help="Run as a Prefect flow.")] = False,
) -> None:
    """Reflect on matured cases with the configured reflector (REFLEX_LLM_*)."""
    settings = Settings()
    if flow:
        from flows.reflection import reflection_batch

        console.print_json(data=reflection_batch(roles=role), default=str)
        return
    from infra.reflection_settings import ReflectionSettings
    from infra.services import ready_engine
    from reflexmem.reflection.batch import guarded_executor, reflect_all
    from reflexmem.registry import load_registry

    llm = ReflectionSettings()
    executor, _ = guarded_executor()
    reports = reflect_all(
        ready_engine(settings),
        load_registry(),
        llm.build_reflector(executor),
        roles=role,
        reflector_name=llm.reflector,
        limit=llm.batch_limit,
        budget=llm.budget(),
        executor=executor,
    )
    console.print_json(data=[r.as_row() for r in reports])


@app.command("serve")
def serve_cmd() -> None:
    """Serve the scheduled deployments against the Prefect server at PREFECT_API_URL."""
    from infra.deployments import serve

    serve()


@bench_app.command("reflection")
def bench_reflection_cmd(
    cases: Annotated[int, typer.Option(help="Role cases in the batch.")] = 100_000,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Evaluation + reflection directly vs through the Prefect flows, same batch."""
    from infra.bench_reflection import run_bench

    result = run_bench(cases)
    if as_json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        console.print_json(data=result)


def main() -> None:
    """Console-script entry point."""
    app()
