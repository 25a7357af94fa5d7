"""`reflexmem bench reflection`: maturation + reflection directly and as the Prefect flows.

One synthetic ledger is prepared through the operations (D-full bars and a decision
stream ingested, admitted) and copied, so both paths start from identical rows: the
direct path runs `run_maturation` and `run_reflection` with a `DirectRunner`, the flow
path runs the `maturation_check` and `reflection_batch` flows. Preparation and the
Prefect server start are outside both timings; `overhead_ratio = flow_s / direct_s`.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from infra import migrate
from infra.bench_support import TimingRunner, warm_tracker
from infra.db import make_engine
from infra.resources import build_resources
from reflexmem.operations import intake
from reflexmem.operations.cycle import CycleParams, run_maturation, run_reflection
from reflexmem.settings import Settings

CASES_PER_DECISION = 0.45
"""Share of synthetic decisions that become evaluated role cases (the rest quarantine)."""


def _settings(workdir: Path, name: str) -> Settings:
    return Settings(
        home=workdir / name,
        database_url=f"sqlite:///{workdir / f'{name}.sqlite'}",
        mlflow_tracking_uri=f"sqlite:///{workdir / f'mlflow-{name}.sqlite'}",
        artifact_root=workdir / f"artifacts-{name}",
    )


def _prepare(workdir: Path, cases: int) -> tuple[Settings, int]:
    from infra.bench_cycle import prepare_drop

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


def _copy(prepared: Settings, workdir: Path, name: str) -> Settings:
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


def run_bench(cases: int) -> dict[str, Any]:
    """Prepare, then time the direct path and the flow path on identical copies."""
    workdir = Path(tempfile.mkdtemp(prefix="reflex-bench-reflection-"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    try:
        start = time.perf_counter()
        prepared, decisions = _prepare(workdir, cases)
        prepare_s = time.perf_counter() - start
        direct, flow = _copy(prepared, workdir, "direct"), _copy(prepared, workdir, "flow")
        from expectations.runner import checked_columns

        checked_columns("admission")
        res = build_resources(direct)
        warm_tracker(res)
        runner = TimingRunner(res)
        start = time.perf_counter()
        report = run_maturation(runner, CycleParams())
        run_reflection(runner, report.plan.roles)
        direct_s = time.perf_counter() - start
        res.engine.dispose()

        harness: Any = nullcontext()
        if not os.environ.get("PREFECT_API_URL"):
            from prefect.testing.utilities import prefect_test_harness

            harness = prefect_test_harness(server_startup_timeout=180)
        with harness:
            from flows.cycle import flow_settings, maturation_check, reflection_batch
            from infra.resources import resources_for

            url, uri, home = flow.resolved_database_url, flow.resolved_tracking_uri, str(flow.home)
            warm_tracker(resources_for(flow_settings(url, uri, home)))
            start = time.perf_counter()
            maturation_check(url, uri, home)
            reflection_batch(url, uri, home)
            flow_s = time.perf_counter() - start
        counts_direct, counts_flow = _counts(direct), _counts(flow)
        if counts_direct != counts_flow:
            raise RuntimeError(f"paths disagree: direct {counts_direct} vs flow {counts_flow}")
        return {
            "cases": counts_flow["evaluation_runs"],
            "decisions": decisions,
            "reflected": counts_flow["reflected"],
            "backend": "sqlite",
            "prepare_s": round(prepare_s, 3),
            "direct_s": round(direct_s, 3),
            "flow_s": round(flow_s, 3),
            "overhead_ratio": round(flow_s / direct_s, 4),
            "direct_stage_s": {k: round(v, 3) for k, v in runner.seconds.items()},
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
