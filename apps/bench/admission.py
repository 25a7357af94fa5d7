"""`reflexmem bench admission`: the full admission path against two floors.

Every side starts from the same Parquet files, in fresh scratch databases, in the same
process. `floor_s` (`apps.bench.floor`) loads them by the fastest plain bulk path into
unindexed tables of the same columns: what moving the bytes costs. `schema_load_s`
loads them with no validation into the fully migrated schema (keys, indexes, foreign
keys, checks, triggers): what the schema's upkeep adds. The measured side ingests
(schema validation, staging, reference and conflict checks), runs the Great
Expectations admission suite and writes the verdicts. Great Expectations' one-off
import is paid before any clock starts. Peak RSS and CPU seconds are per phase
(`apps.bench.rss`); `process_peak_rss_mb` is the whole process, generation included.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl
import sqlalchemy as sa
from rich.progress import Progress

from adapters.resources import build_resources
from apps.bench.floor import measure_floor
from apps.bench.rss import PeakRss
from apps.bench.support import peak_rss_mb, scratch_engine, scratch_settings, scratch_url
from reflexmem.ingest.schemas import LOAD_ORDER, SCHEMAS
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.operations import intake
from reflexmem.prices.panel import load_dfull
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream


def bare_load(engine: sa.Engine, directory: Path) -> None:
    """Read the files and bulk-load them as they are: the floor the full path is held to."""
    with engine.begin() as conn:
        for kind in LOAD_ORDER:
            frame = pl.read_parquet(directory / f"{kind}.parquet")
            if kind == "previews":
                frame = frame.with_columns(
                    pl.col("consumed_at").is_not_null().cast(pl.Int64).alias("consume_count")
                )
            bulk_insert(conn, SCHEMAS[kind].table, frame)


def run_bench(settings: Settings, *, rows: int, backend: str, progress: bool) -> dict[str, Any]:
    """Measure both paths on `rows` generated decisions; returns the JSON-able result."""
    from expectations.runner import checked_columns

    checked_columns("admission")
    workdir = Path(tempfile.mkdtemp(prefix="reflex-bench-"))
    try:
        with Progress(disable=not progress, transient=True) as bar:
            task = bar.add_task("generating", total=4)
            stream = generate(load_dfull(), rows, seed=1)
            paths = write_stream(stream, workdir / "in")
            del stream
            bar.update(task, advance=1, description="floor and schema loads")
            with scratch_engine(settings, backend, workdir) as engine:
                floor = measure_floor(engine, workdir / "in")
            with scratch_engine(settings, backend, workdir) as engine, PeakRss() as schema:
                start = time.perf_counter()
                bare_load(engine, workdir / "in")
                bare_s = time.perf_counter() - start
            bar.update(task, advance=1, description="ingest")
            with scratch_url(settings, backend, workdir) as url:
                res = build_resources(scratch_settings(url, workdir, "admission"))
                with PeakRss() as ingest_rss:
                    start = time.perf_counter()
                    intake.ingest(res, paths)
                    ingest_s = time.perf_counter() - start
                bar.update(task, advance=1, description="admission")
                with PeakRss() as admit_rss:
                    result = intake.admit(res)
                total_s = time.perf_counter() - start
                res.engine.dispose()
            bar.update(task, advance=1)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "rows": rows,
        "backend": backend,
        "ingest_admit_s": round(total_s, 3),
        "ingest_s": round(ingest_s, 3),
        "admit_s": round(total_s - ingest_s, 3),
        "floor_s": floor["floor_s"],
        "schema_load_s": round(bare_s, 3),
        "ratio_floor": round(total_s / floor["floor_s"], 3),
        "ratio_schema": round(total_s / bare_s, 3),
        "bare_load_s": round(bare_s, 3),
        "ratio": round(total_s / bare_s, 3),
        "peak_rss_mb": max(ingest_rss.peak_mb, admit_rss.peak_mb),
        "ingest_peak_rss_mb": ingest_rss.peak_mb,
        "admit_peak_rss_mb": admit_rss.peak_mb,
        "schema_load_peak_rss_mb": schema.peak_mb,
        "process_peak_rss_mb": peak_rss_mb(),
        "cpu_s": round(ingest_rss.cpu_s + admit_rss.cpu_s, 3),
        "ingest_cpu_s": ingest_rss.cpu_s,
        "admit_cpu_s": admit_rss.cpu_s,
        "schema_load_cpu_s": schema.cpu_s,
        **{k: v for k, v in floor.items() if k != "floor_s"},
        "admitted": result.admitted,
        "pending": result.pending,
        "quarantined": result.quarantined,
        "rows_per_table": len(LOAD_ORDER),
    }
