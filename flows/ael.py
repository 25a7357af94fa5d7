"""The AEL benchmark as a Prefect flow: seeds mapped in parallel, rows combined.

Every (seed) part is independent (nothing is tuned across seeds, and the learning
agents restart in every fold), so `run_seed.map(seeds)` reproduces exactly the rows of
one direct `run_benchmark` call; the deterministic rules run once, in the first seed's
task, and the statistics are computed on the merged result.
"""

from __future__ import annotations

import time
from datetime import date
from typing import Any

from prefect import flow, unmapped

import reflexmem.ael.learning  # noqa: F401  (registers the learning methods)
from reflexmem.ael.run import combine_parts, default_methods
from tasks.ael import run_seed


@flow(name="ael-benchmark")
def ael_benchmark(
    prices_path: str | None = None,
    seeds: int | list[int] = 5,
    methods: list[str] | None = None,
    train_end: date | None = None,
    val_end: date | None = None,
    folds: int = 1,
) -> dict[str, Any]:
    """Run the table for seeds 0..N-1 (or the listed seeds); return the JSON document."""
    started = time.perf_counter()
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    names = list(methods) if methods is not None else list(default_methods(False))
    futures = run_seed.map(
        seed_list,
        prices_path=unmapped(prices_path),
        methods=unmapped(names),
        include_deterministic=[i == 0 for i in range(len(seed_list))],
        train_end=unmapped(train_end),
        val_end=unmapped(val_end),
        folds=unmapped(folds),
    )
    parts = [f.result() for f in futures]
    combined = combine_parts(parts, started=started)
    return combined.to_document()
