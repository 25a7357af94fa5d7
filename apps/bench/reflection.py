"""`reflexmem bench reflection`: maturation + reflection directly and as the Prefect flows.

One synthetic ledger is prepared through the operations (D-full bars and a decision
stream ingested, admitted) and copied, so every run starts from identical rows: the
direct path runs `run_maturation` and `run_reflection` with a `DirectRunner`, the flow
path runs the `maturation_check` and `reflection_batch` flows. Preparation and the
Prefect server start are outside every timing.

The order is not allowed to bias the ratio: both paths first run once untimed (the
warm-up pays lazy imports, Great Expectations, the MLflow store and cold caches for
both), then `repeats` timed rounds alternate which path goes first, each run on a fresh
copy. The fastest run of each path is reported (a shared machine's load only ever adds
time), `overhead_ratio = flow_min_s / direct_min_s`, with the ratio of the rounds where
the direct path went first and of those where the flow went first beside it, so a
remaining order effect is visible rather than hidden in the mean.
"""

from __future__ import annotations

import math
import os
import resource
import shutil
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from adapters.resources import build_resources
from apps.bench.support import TimingRunner, warm_tracker
from reflexmem.operations import intake
from reflexmem.operations.cycle import CycleParams, run_maturation, run_reflection
from reflexmem.settings import Settings

CASES_PER_DECISION = 0.45
"""Share of synthetic decisions that become evaluated role cases (the rest quarantine)."""

SERVER_STARTUP_TIMEOUT_S = 300
"""Seconds the Prefect test server may take to come up; a loaded 2-core machine once
needed more than the library's default, and a start-up is outside every timing."""


def _settings(workdir: Path, name: str) -> Settings:
    return Settings(
        home=workdir / name,
        database_url=f"sqlite:///{workdir / f'{name}.sqlite'}",
        mlflow_tracking_uri=f"sqlite:///{workdir / f'mlflow-{name}.sqlite'}",
        artifact_root=workdir / f"artifacts-{name}",
    )


def _prepare(workdir: Path, cases: int) -> tuple[Settings, int]:
    from apps.bench.cycle import prepare_drop

    decisions = max(math.ceil(cases / CASES_PER_DECISION), 50)
    settings = _settings(workdir, "prepared")
    engine = make_engine(settings.resolved_database_url)
    migrate.upgrade(engine)
    engine.dispose()
    res = build_resources(settings)
    drop = prepare_drop(workdir / "drop", decisions, seed=11)
    intake.ingest_drop(res, drop)
    intake.admit(res)
    with res.engine.begin() as conn:
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    res.engine.dispose()
    return settings, decisions


def _copy(workdir: Path, name: str) -> Settings:
    settings = _settings(workdir, name)
    shutil.copy(workdir / "prepared.sqlite", workdir / f"{name}.sqlite")
    return settings


def _counts(settings: Settings) -> dict[str, int]:
    engine = make_engine(settings.resolved_database_url)
    with engine.connect() as conn:
        runs = conn.execute(sa.text("SELECT COUNT(*) FROM evaluation_runs")).scalar_one()
        reflected = conn.execute(
            sa.text("SELECT COUNT(*) FROM role_cases WHERE state = 'reflected'")
        ).scalar_one()
    engine.dispose()
    return {"evaluation_runs": int(runs), "reflected": int(reflected)}


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _direct(settings: Settings) -> dict[str, Any]:
    res = build_resources(settings)
    warm_tracker(res)
    runner = TimingRunner(res)
    cpu, start = _cpu_s(), time.perf_counter()
    report = run_maturation(runner, CycleParams())
    run_reflection(runner, report.plan.roles)
    seconds = time.perf_counter() - start
    cpu_s = _cpu_s() - cpu
    res.engine.dispose()
    return {"seconds": seconds, "cpu_s": cpu_s, "stages": runner.seconds}


def _flow(settings: Settings) -> dict[str, Any]:
    from adapters.resources import resources_for
    from flows.cycle import maturation_check, reflection_batch
    from flows.settings import flow_settings

    url, uri, home = settings.resolved_database_url, settings.resolved_tracking_uri, settings.home
    warm_tracker(resources_for(flow_settings(url, uri, str(home))))
    cpu, start = _cpu_s(), time.perf_counter()
    maturation_check(url, uri, str(home))
    reflection_batch(url, uri, str(home))
    return {"seconds": time.perf_counter() - start, "cpu_s": _cpu_s() - cpu}


def _ratio(runs: dict[str, list[dict[str, Any]]], first: str) -> float | None:
    """flow_s / direct_s over the rounds in which `first` ran first (min of each)."""
    d = [r["seconds"] for r in runs["direct"] if r["first"] == first]
    f = [r["seconds"] for r in runs["flow"] if r["first"] == first]
    return round(min(f) / min(d), 4) if d and f else None


def run_bench(cases: int, repeats: int = 2) -> dict[str, Any]:
    """Prepare, warm both paths up, then time them alternately on identical copies."""
    workdir = Path(tempfile.mkdtemp(prefix="reflex-bench-reflection-"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    runs: dict[str, list[dict[str, Any]]] = {"direct": [], "flow": []}
    paths = {"direct": _direct, "flow": _flow}
    try:
        start = time.perf_counter()
        _prepared, decisions = _prepare(workdir, cases)
        prepare_s = time.perf_counter() - start
        from expectations.runner import checked_columns

        checked_columns("admission")
        harness: Any = nullcontext()
        if not os.environ.get("PREFECT_API_URL"):
            from prefect.testing.utilities import prefect_test_harness

            harness = prefect_test_harness(server_startup_timeout=SERVER_STARTUP_TIMEOUT_S)
        with harness:
            for kind in ("direct", "flow"):  # warm-up, untimed
                paths[kind](_copy(workdir, f"warm-{kind}"))
            last: dict[str, Settings] = {}
            for i in range(max(repeats, 1)):
                order = ("direct", "flow") if i % 2 == 0 else ("flow", "direct")
                for kind in order:
                    last[kind] = _copy(workdir, f"{kind}-{i}")
                    runs[kind].append({**paths[kind](last[kind]), "first": order[0]})
        counts_direct, counts_flow = _counts(last["direct"]), _counts(last["flow"])
        if counts_direct != counts_flow:
            raise RuntimeError(f"paths disagree: direct {counts_direct} vs flow {counts_flow}")
        direct = min(runs["direct"], key=lambda r: float(r["seconds"]))
        flow = min(runs["flow"], key=lambda r: float(r["seconds"]))
        return {
            "cases": counts_flow["evaluation_runs"],
            "decisions": decisions,
            "reflected": counts_flow["reflected"],
            "backend": "sqlite",
            "prepare_s": round(prepare_s, 3),
            "repeats": max(repeats, 1),
            "direct_s": round(direct["seconds"], 3),
            "flow_s": round(flow["seconds"], 3),
            "direct_cpu_s": round(direct["cpu_s"], 3),
            "flow_cpu_s": round(flow["cpu_s"], 3),
            "overhead_ratio": round(flow["seconds"] / direct["seconds"], 4),
            "ratio_direct_first": _ratio(runs, "direct"),
            "ratio_flow_first": _ratio(runs, "flow"),
            "direct_runs_s": [round(r["seconds"], 3) for r in runs["direct"]],
            "flow_runs_s": [round(r["seconds"], 3) for r in runs["flow"]],
            "first_in_round": [r["first"] for r in runs["direct"]],
            "direct_stage_s": {k: round(v, 3) for k, v in direct["stages"].items()},
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
