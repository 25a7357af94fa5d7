"""Ledgers for the skill-cycle tests, built by the operations like every other ledger.

`reflected` ingests a D-full decision stream and runs the cycle up to memory (intake,
maturation, reflection, episodes): the reflected `trade_decision` episodes the skill
stages learn from. `walk` is the demo's scenario on a ledger: the whole cycle once a
week, the technicals feed lagging from day 55, a stricter variant proposed at the first
clock after.
"""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
from rich.console import Console

from apps.demo import skills as demo_skills
from reflexmem.operations import intake
from reflexmem.operations.cycle import CycleParams, run_learning
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices.panel import load_dfull
from reflexmem.synth import generate, write_stream
from tests.support import AS_OF


def stream_files(tmp: Path, n: int, seed: int, *, lag: bool = False) -> tuple[list[Path], datetime]:
    """A decision stream written to files, and its first decision time."""
    stream = generate(load_dfull(), n, seed=seed)
    first = stream["decisions"]["decided_at"].min()
    assert isinstance(first, datetime)
    if lag:
        start = first + timedelta(days=demo_skills.LAG_DAYS)
        stream["decisions"] = demo_skills.lag_technicals(stream["decisions"], start)
    return write_stream(stream, tmp / f"stream-{seed}-{n}"), first


def reflected(res: Resources, tmp: Path, n: int = 4000, seed: int = 3) -> datetime:
    """Ingest, admit, mature, reflect and record episodes at `AS_OF`; the first decision."""
    files, first = stream_files(tmp, n, seed)
    intake.ingest(res, files)
    runner = DirectRunner(res)
    intake.admit(res)
    run_learning(runner, CycleParams(as_of=AS_OF))
    return first


def clock_between(first: datetime, share: float) -> datetime:
    """A clock `share` of the way from the first decision to `AS_OF`."""
    return first + (AS_OF - first) * share


def walk(res: Resources, tmp: Path, n: int = 20_000, seed: int = 7) -> datetime:
    """The demo's weekly walk (a backfill, with the stricter proposal); the first decision."""
    files, first = stream_files(tmp, n, seed, lag=True)
    intake.ingest(res, files)
    newest = res.prices.newest()
    assert newest is not None
    quiet = Console(file=io.StringIO())
    demo_skills.walk(res, quiet, demo_skills.clocks(first, newest), first)
    return first


def frame(res: Resources, sql: str) -> pl.DataFrame:
    """A query's rows as a polars frame (for assertions)."""
    with res.engine.connect() as conn:
        result = conn.exec_driver_sql(sql)
        return pl.DataFrame(result.fetchall(), schema=list(result.keys()), orient="row")
