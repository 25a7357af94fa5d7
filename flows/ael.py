"""The AEL benchmark as a Prefect flow: its parts mapped side by side, rows combined.

Composition only: the flow hands a `PrefectRunner` to the sequence written once in
`reflexmem.operations.ael` (`run_ael`): the deterministic rules and every seed are
parts, each one task wrapping the `run_part` operation, run on the flow's threads or on
Dask worker processes when `REFLEX_TASK_RUNNER=dask` or `REFLEX_DASK_ADDRESS` says so;
the statistics are computed once on the merged result, so the rows are exactly those of
one direct `run_benchmark` call. Like every flow it takes the pinned ledger, tracking
store and home (`flows.settings`): its tasks get their resources from them.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from prefect import flow

from flows.settings import flow_settings
from reflexmem.operations.ael import AelParams, run_ael
from tasks.runner import prefect_runner


@flow(name="ael-benchmark")
def ael_benchmark(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    prices_path: str | None = None,
    seeds: int | list[int] = 5,
    methods: list[str] | None = None,
    train_end: date | None = None,
    val_end: date | None = None,
    folds: int = 1,
) -> dict[str, Any]:
    """Run the table for seeds 0..N-1 (or the listed seeds); return the JSON document."""
    settings = flow_settings(database_url, tracking_uri, home)
    params = AelParams(
        prices_path=prices_path,
        seeds=tuple(range(seeds)) if isinstance(seeds, int) else tuple(int(s) for s in seeds),
        methods=tuple(methods) if methods is not None else None,
        train_end=train_end,
        val_end=val_end,
        folds=folds,
    )
    with prefect_runner(settings) as runner:
        return run_ael(runner, params)
