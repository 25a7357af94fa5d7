"""The AEL benchmark as a Prefect flow: seeds mapped in parallel, rows combined.

Every (seed) part is independent (nothing is tuned across seeds, and the learning
agents restart in every fold), so `run_seed.map(seeds)` reproduces exactly the rows of
one direct `run_benchmark` call (seeds run on the flow's threads, or on Dask worker
processes when `REFLEX_TASK_RUNNER=dask` or `REFLEX_DASK_ADDRESS` says so); the
deterministic rules run once, in the first seed's task, and the statistics are computed
on the merged result.
"""

from __future__ import annotations

import time
from datetime import date
from typing import Any

from prefect import flow

import reflexmem.ael.learning  # noqa: F401  (registers the learning methods)
from reflexmem.ael.run import combine_parts, default_methods
from reflexmem.settings import Settings
from tasks.ael import run_seed
from tasks.fanout import fanout


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
    with fanout(Settings()) as submit:
        futures = [
            submit(
                run_seed,
                {
                    "seed": seed,
                    "prices_path": prices_path,
                    "methods": names,
                    "include_deterministic": i == 0,
                    "train_end": train_end,
                    "val_end": val_end,
                    "folds": folds,
                },
            )
            for i, seed in enumerate(seed_list)
        ]
        parts = [f.result() for f in futures]
    combined = combine_parts(parts, started=started)
    return combined.to_document()
