"""The AEL benchmark as a Prefect flow: seeds mapped in parallel, rows combined.

Each seed is independent (its hyperparameters are tuned on its own validation
split), so `run_seed.map(seeds)` reproduces exactly the rows of one direct
`run_benchmark` call; the seedless baselines run once, in the first seed's task.
"""

from __future__ import annotations

import time
from datetime import date
from typing import Any

from prefect import flow, unmapped

import reflexmem.ael.learning  # noqa: F401  (registers the learning methods)
from reflexmem.ael.run import combine_results
from reflexmem.ael.table import registered_methods
from tasks.ael import run_seed


@flow(name="ael-benchmark")
def ael_benchmark(
    prices_path: str | None = None,
    seeds: int | list[int] = 5,
    methods: list[str] | None = None,
    train_end: date | None = None,
    val_end: date | None = None,
) -> dict[str, Any]:
    """Run the table for seeds 0..N-1 (or the listed seeds); return the JSON document."""
    started = time.perf_counter()
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    names = list(methods) if methods is not None else list(registered_methods())
    futures = run_seed.map(
        seed_list,
        prices_path=unmapped(prices_path),
        methods=unmapped(names),
        include_deterministic=[i == 0 for i in range(len(seed_list))],
        train_end=unmapped(train_end),
        val_end=unmapped(val_end),
    )
    parts = [f.result() for f in futures]
    combined = combine_results(parts, names, seed_list, wall_seconds=time.perf_counter() - started)
    return combined.to_document()
