"""`make demo`: the main job on the embedded defaults, one stage after another.

Generates a decision stream from the real D-full prices, ingests it, attempts double
consumptions of previews, runs admission and prints what happened to every row.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from rich.console import Console

from infra.render import admission_table
from infra.services import ready_engine, run_admission, run_ingest
from reflexmem.ael.panel import load_dfull
from reflexmem.ledger.previews import (
    PreviewAlreadyConsumed,
    consume_preview,
    record_refused_consumption,
)
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream


def run_demo(settings: Settings, *, rows: int, console: Console) -> None:
    """Run every stage built so far on a fresh embedded store under `settings.home`."""
    if settings.backend == "sqlite":
        for name in ("ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm"):
            (settings.home / name).unlink(missing_ok=True)
    engine = ready_engine(settings)
    console.rule("1. decision stream from the real D-full prices")
    panel = load_dfull()
    stream = generate(panel, rows, seed=7)
    workdir = Path(tempfile.mkdtemp(prefix="reflex-demo-"))
    try:
        paths = write_stream(stream, workdir, fmt="parquet")
        paths[-1] = write_stream({"outcomes": stream["outcomes"]}, workdir, fmt="csv")[0]
        console.print(
            f"{rows} decisions on {len(panel.tickers)} tickers, {panel.n_bars} hourly bars; "
            f"files: {', '.join(p.name for p in paths)}"
        )
        console.rule("2. ingest (one transaction; a re-ingest changes nothing)")
        report = run_ingest(engine, paths)
        console.print(dict(report.added.items()))
        again = run_ingest(engine, paths)
        console.print(
            f"re-ingest: {again.total_added} rows added, {len(again.skipped_files)} files unchanged"
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    console.rule("3. double-consumption attempts are refused and kept")
    consumed = stream["previews"].filter(stream["previews"]["consumed_at"].is_not_null()).head(3)
    for i, (preview_id, decision_id) in enumerate(
        consumed.select("preview_id", "decision_id").iter_rows()
    ):
        try:
            with engine.begin() as conn:
                consume_preview(conn, preview_id, decision_id)
        except PreviewAlreadyConsumed as exc:
            console.print(f"[yellow]refused[/yellow]: {exc}")
            with engine.begin() as conn:
                record_refused_consumption(
                    conn, f"demo-attempt-{i}", preview_id, decision_id, str(exc)
                )

    console.rule("4. admission (Great Expectations suite `admission`, fail-closed)")
    result = run_admission(engine, settings)
    console.print(admission_table(result))
    assert result.rows_in == result.admitted + result.pending + result.quarantined
    from infra.demo_reflection import demo_reflection

    console.rule("5. maturation, evaluation runs (MLflow) and reflection")
    demo_reflection(settings, engine, console)

    from infra.demo_recall import demo_recall

    console.rule("6. recall (active mode) and its absence in shadow mode")
    demo_recall(settings, engine, console)
    console.rule("7. AEL benchmark on D-full, one seed (the full table: reflexmem bench ael)")
    from infra.bench_ael import run_command

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
    console.print(f"store: {settings.resolved_database_url}")
    console.print("check it with: [bold]uv run reflexmem doctor[/bold]")
    engine.dispose()
