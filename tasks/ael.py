"""Prefect task over the AEL benchmark core: one seed of the table per task run."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from prefect import task
from prefect.cache_policies import NONE

from reflexmem.ael.run import BenchmarkResult, load_inputs, run_benchmark


@task(name="ael-run-seed", cache_policy=NONE, persist_result=False)
def run_seed(
    seed: int,
    prices_path: str | None = None,
    methods: list[str] | None = None,
    include_deterministic: bool = False,
    train_end: date | None = None,
    val_end: date | None = None,
) -> BenchmarkResult:
    """Every seeded method for `seed` (plus the seedless baselines if asked).

    Results stay in memory (no cache, no persistence): they hold episodes and
    learned state, and a re-run is cheap and exactly reproducible from the seed.
    """
    inputs = load_inputs(
        None if prices_path is None else Path(prices_path), train_end=train_end, val_end=val_end
    )
    return run_benchmark(
        inputs, seeds=[seed], methods=methods, include_deterministic=include_deterministic
    )
