"""Prefect task over the AEL benchmark core: one seed of the table per task run."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from prefect import task
from prefect.cache_policies import NONE

from reflexmem.ael.results import BenchmarkResult
from reflexmem.ael.run import load_inputs, run_benchmark


@task(name="ael-run-seed", cache_policy=NONE, persist_result=False)
def run_seed(
    seed: int,
    prices_path: str | None = None,
    methods: list[str] | None = None,
    include_deterministic: bool = False,
    train_end: date | None = None,
    val_end: date | None = None,
    folds: int = 1,
) -> BenchmarkResult:
    """Every seeded method for `seed` (plus the deterministic rules if asked), no statistics.

    Results stay in memory (no cache, no persistence): a re-run is cheap and exactly
    reproducible from the seed. Statistics are added once the parts are combined.
    """
    inputs = load_inputs(
        None if prices_path is None else Path(prices_path),
        train_end=train_end,
        val_end=val_end,
        folds=folds,
    )
    return run_benchmark(
        inputs,
        seeds=[seed],
        methods=methods,
        include_deterministic=include_deterministic,
        statistics=False,
    )
