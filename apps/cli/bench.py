"""Benchmarks: each one prints one JSON object with its figure and its honest floor."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Annotated

import typer

from apps.cli.common import (
    bench_app,
    check_backend,
    console,
    emit,
    err,
)
from reflexmem.settings import Settings


@bench_app.command("admission")
def bench_admission(
    rows: Annotated[int, typer.Option(help="Decisions to generate.")] = 100_000,
    backend: Annotated[str, typer.Option(help="sqlite or postgres.")] = "sqlite",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Ingest + Great Expectations + admission against the unindexed floor and the schema load."""
    from apps.bench.admission import run_bench

    check_backend(backend)
    emit(run_bench(Settings(), rows=rows, backend=backend, progress=not as_json), as_json)


@bench_app.command("recall")
def bench_recall_cmd(
    cases: Annotated[int, typer.Option(help="Role cases in the generated store.")] = 100_000,
    backend: Annotated[str, typer.Option(help="sqlite or postgres.")] = "sqlite",
    queries: Annotated[int, typer.Option(help="Timed recalls.")] = 300,
    seed: Annotated[int, typer.Option(help="Corpus and query seed (direct only).")] = 0,
    peer_roles: Annotated[
        int, typer.Option(help="Roles indexed by the BM25 peer (direct only).")
    ] = 1,
    via: Annotated[
        str, typer.Option(help="direct (in process, against a scan) or api (over HTTP).")
    ] = "direct",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Constrained recall over N role cases against a B-tree floor and a BM25 peer, or HTTP."""
    check_backend(backend)
    if via not in ("direct", "api"):
        err.print("--via must be direct or api")
        raise typer.Exit(2)
    if via == "api":
        from apps.bench.recall_api import run_bench as run_api

        emit(
            run_api(
                Settings(), cases=cases, backend=backend, queries=queries, progress=not as_json
            ),
            as_json,
        )
        return
    from apps.bench.recall import run_bench

    result = run_bench(
        Settings(),
        cases=cases,
        backend=backend,
        queries=queries,
        seed=seed,
        peer_roles=peer_roles,
        progress=not as_json,
    )
    emit(result, as_json)


@bench_app.command("api")
def bench_api_cmd(
    clients: Annotated[int, typer.Option(help="Concurrent recall clients.")] = 20,
    writers: Annotated[int, typer.Option(help="Concurrent writers (one decision each).")] = 5,
    seconds: Annotated[float, typer.Option(help="Length of the load.")] = 30.0,
    backend: Annotated[str, typer.Option(help="sqlite or postgres.")] = "sqlite",
    cases: Annotated[int, typer.Option(help="Role cases in the served store.")] = 20_000,
    server_workers: Annotated[
        int, typer.Option(help="`reflexmem api --workers` (PostgreSQL only above 1).")
    ] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The agent API under concurrent recall clients and writers, on loopback."""
    from apps.bench.api_load import run_bench

    check_backend(backend)
    try:
        with err.status(f"building {cases} cases, then {seconds:g} s of load", spinner="dots"):
            result = run_bench(
                Settings(),
                backend=backend,
                clients=clients,
                writers=writers,
                seconds=seconds,
                cases=cases,
                server_workers=server_workers,
            )
    except (ValueError, RuntimeError) as exc:
        err.print(f"[red]bench api:[/red] {exc}")
        raise typer.Exit(2) from exc
    emit(result, as_json)


@bench_app.command("memory")
def bench_memory_cmd(
    episodes: Annotated[int, typer.Option(help="Episodes to time.")] = 2000,
    seed: Annotated[int, typer.Option(help="Random seed.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Microseconds per episode: retrieval + ranking + bandit, 500 entries per tier."""
    from reflexmem.memory.bench import bench_memory

    emit(bench_memory(episodes=episodes, seed=seed), as_json)


@bench_app.command("episodes")
def bench_episodes_cmd(
    episodes: Annotated[int, typer.Option(help="Episodes to record.")] = 20_000,
    backend: Annotated[str, typer.Option(help="sqlite or postgres.")] = "sqlite",
    batch: Annotated[
        int | None, typer.Option(help="Episodes per record_episodes call (default: all).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Ledger episode recording (learning cycle) against a bare bulk load and the loop."""
    from apps.bench.episodes import run_bench

    check_backend(backend)
    try:
        result = run_bench(Settings(), episodes=episodes, backend=backend, batch=batch)
    except ValueError as exc:
        err.print(f"[red]bench episodes:[/red] {exc}")
        raise typer.Exit(2) from exc
    emit(result, as_json)


@bench_app.command("ael")
def bench_ael_cmd(
    prices: Annotated[
        Path | None, typer.Option(help="Price panel (CSV/Parquet, wide or long).")
    ] = None,
    panels: Annotated[
        str | None,
        typer.Option(help="dfull, classic, or names (nyse_o,nyse_n,djia,msci,tse,sp500)."),
    ] = None,
    synthetic: Annotated[
        str | None, typer.Option(help="A synthetic daily panel BARSxASSETS, e.g. 8000x20.")
    ] = None,
    folds: Annotated[
        int, typer.Option(help="Walk-forward folds (0: 1 for D-full/--prices, 4 otherwise).")
    ] = 0,
    seeds: Annotated[int, typer.Option(help="Seeds 0..N-1 for the seeded methods.")] = 5,
    methods: Annotated[
        list[str] | None,
        typer.Option(help="Methods, comma-separated or repeated; default all."),
    ] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the rows here.")] = None,
    plots: Annotated[Path | None, typer.Option(help="Write PNG plots into this folder.")] = None,
    train_end: Annotated[
        str | None, typer.Option(help="Last train date YYYY-MM-DD (with --val-end).")
    ] = None,
    val_end: Annotated[str | None, typer.Option(help="Last validation date YYYY-MM-DD.")] = None,
    bars_per_year: Annotated[
        float | None, typer.Option(help="Annualisation (default 1008 D-full, 252 daily).")
    ] = None,
    workers: Annotated[int, typer.Option(help="Processes for the seeded runs.")] = 2,
    no_peers: Annotated[
        bool, typer.Option("--no-peers", help="Skip the online-portfolio peers.")
    ] = False,
    no_mlflow: Annotated[bool, typer.Option("--no-mlflow", help="Skip MLflow lineage.")] = False,
) -> None:
    """AEL Table 2 with statistics: rules, peers, agents and learners over folds and seeds."""
    from datetime import date

    from apps.bench.ael import parse_methods, run_command
    from apps.bench.olps import PeerError

    try:
        chosen = parse_methods(methods)
        result = run_command(
            prices=prices,
            panels=panels,
            synthetic=synthetic,
            folds=folds,
            seeds=seeds,
            methods=chosen,
            json_out=json_out,
            plots_dir=plots,
            train_end=None if train_end is None else date.fromisoformat(train_end),
            val_end=None if val_end is None else date.fromisoformat(val_end),
            bars_per_year=bars_per_year,
            tracking_uri=None if no_mlflow else Settings().resolved_tracking_uri,
            console=console,
            peers=not no_peers,
            workers=workers,
        )
    except (ValueError, PeerError) as exc:
        err.print(f"[red]bench ael:[/red] {exc}")
        raise typer.Exit(2) from exc
    del result


@bench_app.command("reflection")
def bench_reflection_cmd(
    cases: Annotated[int, typer.Option(help="Role cases in the batch.")] = 100_000,
    repeats: Annotated[
        int, typer.Option(help="Timed rounds after a warm-up of both; the order alternates.")
    ] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON only.")] = False,
) -> None:
    """Evaluation + reflection directly vs through the Prefect flows, same batch."""
    from apps.bench.reflection import run_bench

    result = run_bench(cases, repeats=repeats)
    if as_json:
        sys.stdout.write(json.dumps(result) + "\n")
    else:
        console.print_json(data=result)


@bench_app.command("structures")
def bench_structures_cmd(
    seed: Annotated[int, typer.Option(help="Seed of the task sets and the random floor.")] = 0,
    modules: Annotated[int, typer.Option(help="Modules of the synthetic structure.")] = 20,
    trading: Annotated[
        bool,
        typer.Option(
            "--trading", help="The search on four roles' decisions, beside every single edge."
        ),
    ] = False,
    decisions: Annotated[
        list[int] | None,
        typer.Option(help="Decisions in the trading stream (repeat; default 1000 and 10000)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Selection loop on experiment B and a synthetic structure, beside its floors.

    With `--trading`, the production trading search (search, controls, final test,
    edge evidence) on a synthetic stream of the registry's roles with one planted
    cross-role effect, beside the exhaustive single-edge floor, for each `--decisions`.
    """
    if not trading:
        if decisions:
            err.print("--decisions needs --trading")
            raise typer.Exit(2)
        from apps.bench.structures import run_bench

        emit(run_bench(seed=seed, modules=modules), as_json)
        return
    from apps.bench.structures_trading import DECISIONS
    from apps.bench.structures_trading import run_bench as run_trading

    sizes = tuple(decisions or DECISIONS)
    if min(sizes) < 1:
        err.print("--decisions must be positive")
        raise typer.Exit(2)
    try:
        result = run_trading(sizes, seed=seed)
    except ValueError as exc:
        err.print(f"[red]bench structures --trading:[/red] {exc}")
        raise typer.Exit(2) from exc
    emit(result, as_json)


@bench_app.command("cycle")
def bench_cycle_cmd(
    decisions: Annotated[int, typer.Option(help="Decisions in the generated stream.")] = 10_000,
    backend: Annotated[str, typer.Option(help="sqlite or postgres.")] = "sqlite",
    repeats: Annotated[int, typer.Option(help="Runs per path, alternating the order.")] = 1,
    workers: Annotated[
        list[int] | None,
        typer.Option(help="Dask worker counts for the flow's fan-out (repeat: 1 and 2)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The whole cycle on N decisions: direct, as a flow, and the bare bulk-load floor.

    With `--workers`, also the flow with its fan-out on a local Dask cluster of K
    processes for each K, in the same run.
    """
    from apps.bench.cycle import run_bench, run_dask

    check_backend(backend)
    status = nullcontext() if as_json else console.status(f"cycle on {decisions} decisions")
    with status:
        result = run_bench(Settings(), decisions=decisions, backend=backend, repeats=repeats)
        if workers:
            result["dask"] = run_dask(
                Settings(), decisions=decisions, backend=backend, workers=workers, repeats=repeats
            )
    emit(result, as_json)


@bench_app.command("skills")
def bench_skills_cmd(
    episodes: Annotated[int, typer.Option(help="Reflected episodes to build.")] = 10_000,
    backend: Annotated[str, typer.Option(help="sqlite or postgres.")] = "sqlite",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Skill candidate generation + shadow evaluation over N episodes, beside a read floor."""
    from apps.bench.skills import run_bench

    check_backend(backend)
    try:
        result = run_bench(Settings(), episodes=episodes, backend=backend)
    except ValueError as exc:
        err.print(f"[red]bench skills:[/red] {exc}")
        raise typer.Exit(2) from exc
    emit(result, as_json)


@bench_app.command("crash")
def bench_crash_cmd(
    trials: Annotated[int, typer.Option(help="Kill-and-rerun trials.")] = 10,
    backend: Annotated[str, typer.Option(help="sqlite or postgres.")] = "sqlite",
    decisions: Annotated[int, typer.Option(help="Decisions in the generated stream.")] = 5000,
    seed: Annotated[int, typer.Option(help="Seed of the stream and of the kill instants.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """SIGKILL the cycle at random points, rerun it, compare every table with a clean run."""
    from apps.bench.crash import run_bench

    check_backend(backend)
    emit(
        run_bench(Settings(), trials=trials, backend=backend, decisions=decisions, seed=seed),
        as_json,
    )


@bench_app.command("learning")
def bench_learning_cmd(
    decisions: Annotated[int, typer.Option(help="Decisions per stream.")] = 2000,
    seeds: Annotated[int, typer.Option(help="Seeds (a null and a planted stream each).")] = 20,
    seed_base: Annotated[
        int, typer.Option(help="First seed; 0 is the validation set thresholds were chosen on.")
    ] = 1000,
    effects: Annotated[
        str, typer.Option(help="Planted effect sizes, in standard deviations of return.")
    ] = "0.1,0.25,0.5,1",
    role: Annotated[str, typer.Option(help="The role whose decisions are generated.")] = "momentum",
    bars: Annotated[
        Path | None,
        typer.Option(help="Bars file (symbol, ts, close; CSV or Parquet); default D-full daily."),
    ] = None,
    horizon: Annotated[int, typer.Option(help="Bars from decision to settlement.")] = 10,
    span: Annotated[
        int | None,
        typer.Option(help="Stretch the bars to this many by a block bootstrap of their days."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Null and planted decision streams through the production memory: false discoveries, power."""
    from apps.bench.learning import run_bench
    from apps.bench.learning_streams import dfull_daily, file_bars, stretched
    from reflexmem.registry import load_registry

    try:
        sizes = tuple(float(x) for x in effects.split(",") if x.strip())
        panel = dfull_daily() if bars is None else file_bars(bars)
        panel = panel if span is None else stretched(panel, span)
        result = run_bench(
            panel,
            load_registry(),
            role_id=role,
            decisions=decisions,
            seeds=seeds,
            seed_base=seed_base,
            effects=sizes,
            horizon=horizon,
            progress=not as_json,
        )
    except (ValueError, OSError) as exc:
        err.print(f"[red]bench learning:[/red] {exc}")
        raise typer.Exit(2) from exc
    emit(result, as_json)
