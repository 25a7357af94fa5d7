"""The AEL benchmark as a staged job: its parts are operations, its sequence is written once.

The table is independent per seed (nothing is tuned across seeds, and the learning
agents restart in every fold), so it splits into parts: the deterministic rules once,
then every seeded method per seed. `run_ael` maps `run_part` over those parts through a
`StageRunner` and merges them with the statistics computed once on the merged result:
the `ael-benchmark` flow runs it with the Prefect runner (parts side by side, on threads
or Dask workers), a test with the direct runner, and both give the rows of one direct
`run_benchmark` call. The benchmark reads no ledger; its stage says so
(`ledger_writer=False`), and it is registered here, outside the production stage list.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import reflexmem.ael.learning  # noqa: F401  (registers the learning methods)
from reflexmem.ael.results import BenchmarkResult
from reflexmem.ael.run import combine_parts, default_methods, load_inputs, run_benchmark
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import StageRunner
from reflexmem.operations.stages import Stage, register

RULES = -1
"""The part that runs the deterministic rules (every other part is a seed)."""


@dataclass(frozen=True)
class AelParams:
    """What one benchmark run is asked to do (peers need the isolated environment: CLI)."""

    prices_path: str | None = None
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    methods: tuple[str, ...] | None = None
    train_end: date | None = None
    val_end: date | None = None
    folds: int = 1


def run_part(
    res: Resources,
    part: int,
    prices_path: str | None = None,
    methods: Sequence[str] | None = None,
    train_end: date | None = None,
    val_end: date | None = None,
    folds: int = 1,
) -> BenchmarkResult:
    """One part without statistics: the deterministic rules (`RULES`), or one seed's methods.

    Results stay in memory: a re-run is cheap and exactly reproducible from the seed.
    """
    inputs = load_inputs(
        None if prices_path is None else Path(prices_path),
        train_end=train_end,
        val_end=val_end,
        folds=folds,
    )
    return run_benchmark(
        inputs,
        seeds=[] if part == RULES else [part],
        methods=methods,
        include_deterministic=part == RULES,
        statistics=False,
    )


def run_ael(runner: StageRunner, params: AelParams | None = None) -> dict[str, Any]:
    """The rules and every seed as parts, merged with statistics: the JSON document."""
    p = params or AelParams()
    started = time.perf_counter()
    names = list(p.methods) if p.methods is not None else list(default_methods(False))
    parts = runner.map(
        run_part,
        "part",
        [RULES, *p.seeds],
        prices_path=p.prices_path,
        methods=names,
        train_end=p.train_end,
        val_end=p.val_end,
        folds=p.folds,
    )
    return combine_parts(parts, started=started).to_document()


STAGE = register(Stage(run_part, "AEL benchmark: one part of the table", 0, ledger_writer=False))
