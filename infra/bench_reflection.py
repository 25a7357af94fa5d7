"""`reflexmem bench reflection`: the same batch directly and through the Prefect flows.

One synthetic ledger is prepared (decision stream over the real D-full prices, ingest,
admission) and copied twice, so both paths start from identical rows. `direct_s` calls
the core functions the tasks call (settle, mature, evaluate + MLflow, promote + MLflow,
rule reflection per role); `flow_s` runs `maturation_check` and `reflection_batch` on
the copy. Preparation, MLflow store migration and the Prefect server start are outside
both timings; `overhead_ratio = flow_s / direct_s` is what orchestration costs.
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from infra import migrate
from infra.db import make_engine
from infra.services import run_admission, run_ingest
from infra.tracking_eval import EvaluationTracker, tracked_evaluate, tracked_promote
from reflexmem.ael.panel import load_dfull
from reflexmem.evaluation import get_profile
from reflexmem.maturation import mature_cases, settle_open_positions
from reflexmem.reflection import RuleReflector
from reflexmem.reflection.batch import guarded_executor, reflect_all
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream

CASES_PER_DECISION = 0.55
"""Share of synthetic decisions that admission turns into role cases (the rest quarantine)."""


def _prepare(workdir: Path, cases: int) -> tuple[Path, int, int]:
    decisions = max(math.ceil(cases / CASES_PER_DECISION), 50)
    path = workdir / "prepared.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    migrate.upgrade(engine)
    files = write_stream(generate(load_dfull(), decisions, seed=11), workdir / "stream")
    run_ingest(engine, files)
    settings = Settings(home=workdir, database_url=f"sqlite:///{path}")
    run_admission(engine, settings)
    with engine.begin() as conn:
        n_cases = int(conn.execute(sa.text("SELECT COUNT(*) FROM role_cases")).scalar_one())
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    engine.dispose()
    return path, decisions, n_cases


def _mlflow_store(path: Path) -> str:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    uri = f"sqlite:///{path}"
    EvaluationTracker(uri).experiment_id()
    return uri


def _counts(url: str) -> dict[str, int]:
    engine = make_engine(url)
    with engine.connect() as conn:
        runs = conn.execute(sa.text("SELECT COUNT(*) FROM evaluation_runs")).scalar_one()
        reflected = conn.execute(
            sa.text("SELECT COUNT(*) FROM role_cases WHERE state = 'reflected'")
        ).scalar_one()
    engine.dispose()
    return {"evaluation_runs": int(runs), "reflected": int(reflected)}


def direct(url: str, tracking_uri: str, as_of: datetime) -> dict[str, float]:
    """The maturation and reflection work as plain core calls; returns step timings."""
    from tasks.maturation import prices, registry

    engine = make_engine(url)
    source, reg, profile = prices(), registry(), get_profile()
    tracker = EvaluationTracker(tracking_uri, ledger_url=url)
    steps: dict[str, float] = {}
    t = time.perf_counter()
    with engine.begin() as conn:
        settle_open_positions(conn, source, reg)
        mature_cases(conn, reg, as_of=as_of, min_points=3, profile=profile.name)
    steps["mature_s"] = time.perf_counter() - t
    t = time.perf_counter()
    evaluated = tracked_evaluate(engine, tracker, source, profile)
    tracked_promote(
        engine, tracker, profile.name, source_batch=evaluated.info.batch_id, only_unpromoted=True
    )
    steps["evaluate_s"] = time.perf_counter() - t
    t = time.perf_counter()
    executor, _ = guarded_executor()
    reflect_all(engine, reg, RuleReflector(), executor=executor, profile=profile.name)
    steps["reflect_s"] = time.perf_counter() - t
    engine.dispose()
    return steps


@contextmanager
def _prefect() -> Iterator[None]:
    if os.environ.get("PREFECT_API_URL"):
        with nullcontext():
            yield
        return
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


def run_bench(cases: int) -> dict[str, Any]:
    """Prepare, then time the direct path and the flow path on identical copies."""
    workdir = Path(tempfile.mkdtemp(prefix="reflex-bench-reflection-"))
    try:
        t = time.perf_counter()
        prepared, decisions, n_cases = _prepare(workdir, cases)
        prepare_s = time.perf_counter() - t
        paths = {}
        for name in ("direct", "flow"):
            paths[name] = workdir / f"{name}.sqlite"
            shutil.copy(prepared, paths[name])
        uris = {n: _mlflow_store(workdir / f"mlflow-{n}.sqlite") for n in ("direct", "flow")}
        urls = {n: f"sqlite:///{p}" for n, p in paths.items()}
        as_of = datetime.now(UTC)

        from tasks.maturation import prices, registry

        prices(), registry()
        t = time.perf_counter()
        steps = direct(urls["direct"], uris["direct"], as_of)
        direct_s = time.perf_counter() - t

        with _prefect():
            from flows.maturation import maturation_check
            from flows.reflection import reflection_batch
            from prefect import flow

            @flow(name="bench-warmup")
            def warmup() -> int:
                return 1

            warmup()
            t = time.perf_counter()
            maturation_check(urls["flow"], uris["flow"], as_of=as_of)
            reflection_batch(urls["flow"])
            flow_s = time.perf_counter() - t
        counts_direct = _counts(urls["direct"])
        counts_flow = _counts(urls["flow"])
        if counts_direct != counts_flow:
            raise RuntimeError(f"paths disagree: direct {counts_direct} vs flow {counts_flow}")
        return {
            "cases": n_cases,
            "decisions": decisions,
            "evaluation_runs": counts_flow["evaluation_runs"],
            "reflected": counts_flow["reflected"],
            "backend": "sqlite",
            "prepare_s": round(prepare_s, 3),
            "direct_s": round(direct_s, 3),
            "flow_s": round(flow_s, 3),
            "overhead_ratio": round(flow_s / direct_s, 4),
            "cases_per_s": round(n_cases / flow_s, 1),
            "direct_cases_per_s": round(n_cases / direct_s, 1),
            **{f"direct_{k}": round(v, 3) for k, v in steps.items()},
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
