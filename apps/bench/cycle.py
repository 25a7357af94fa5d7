"""`reflexmem bench cycle`: the whole learning cycle on N decisions, direct and as a flow.

One drop folder (the D-full bars and a decision stream of N decisions on them) feeds
two fresh scratch ledgers. Each path runs in its own spawned process, so each pays its
own imports and its peak RSS is its own:

* **direct**: `run_cycle(TimingRunner(resources), CycleParams(drop=folder))`: seconds
  per stage and in all, CPU seconds, peak RSS;
* **flow**: the `daily_cycle` flow on the same folder (the Prefect API is started and
  warmed up before the clock starts); `flow_direct_ratio = flow_s / direct_s`.

With `--workers K` (repeatable) the flow path runs again per K with its fan-out
(reflection per role, recording and distillation per namespace) on a local Dask cluster
of K worker processes (`run_dask`), reported as decisions per second per K and
`speedup_2_vs_1`.

Both paths import Great Expectations and open their MLflow store before their clock
starts. The honest floor beside the figure, `floor_s`, is the least any cycle must do
with the input: bulk-load the same files into *unindexed* tables of the same columns
(COPY on PostgreSQL, one `executemany` on SQLite), with no validation and no work.
"""

from __future__ import annotations

import multiprocessing as mp
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl
import sqlalchemy as sa

from apps.bench.support import TimingRunner, scratch_settings, scratch_url, warm_tracker
from reflexmem.ledger.bulk import bulk_insert
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.prices.panel import load_dfull
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream


def prepare_drop(folder: Path, decisions: int, seed: int = 1) -> Path:
    """The bars and a stream of `decisions` decisions as Parquet files in `folder`."""
    write_dfull_bars(folder)
    write_stream(generate(load_dfull(), decisions, seed=seed), folder)
    return folder


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _warm(settings: Settings) -> Any:
    """Resources with Great Expectations imported and the MLflow store created."""
    from adapters.resources import resources_for
    from expectations.runner import checked_columns

    checked_columns("admission")
    res = resources_for(settings)
    warm_tracker(res)
    return res


def _direct(settings: Settings, drop: Path) -> dict[str, Any]:
    from reflexmem.operations.cycle import CycleParams, run_cycle

    res = _warm(settings)
    runner = TimingRunner(res)
    cpu, start = _cpu_s(), time.perf_counter()
    report = run_cycle(runner, CycleParams(drop=drop))
    wall = time.perf_counter() - start
    return {
        "seconds": wall,
        "cpu_s": _cpu_s() - cpu,
        "stages": runner.seconds,
        "stage_peak_rss_mb": runner.peak_rss_after,
        "stage_cpu": runner.cpu_seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "admitted": report.admission.admitted,
        "evaluated": report.maturation.evaluation.runs,
        "reflected": sum(r.reflected for r in report.reflection),
        "episodes": sum(e.recorded for e in report.memory.episodes),
    }


def _flow(settings: Settings, drop: Path) -> dict[str, Any]:
    import os
    from contextlib import nullcontext

    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    _warm(settings)
    harness: Any = nullcontext()
    if not os.environ.get("PREFECT_API_URL"):
        from prefect.testing.utilities import prefect_test_harness

        harness = prefect_test_harness(server_startup_timeout=180)
    with harness:
        from prefect import flow

        from flows.cycle import daily_cycle

        @flow(name="bench-warmup")
        def warmup() -> int:
            return 1

        warmup()
        from adapters.resources import resources_for
        from flows.settings import flow_settings

        # The flow's tasks build their resources from the flow's own settings: warm those.
        url, uri = settings.resolved_database_url, settings.resolved_tracking_uri
        home = str(settings.home)
        warm_tracker(resources_for(flow_settings(url, uri, home)))
        cpu, start = _cpu_s(), time.perf_counter()
        daily_cycle(url, uri, home=home, drop_dir=str(drop))
        wall = time.perf_counter() - start
    return {
        "seconds": wall,
        "cpu_s": _cpu_s() - cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _warm_worker(settings: Settings) -> int:
    """On a Dask worker: build (and cache) the resources the flow's tasks will ask for."""
    import os

    from adapters.resources import resources_for

    warm_tracker(resources_for(settings))
    return os.getpid()


def _flow_dask(settings: Settings, drop: Path, workers: int) -> dict[str, Any]:
    """The flow path with fan-out on a local Dask cluster of `workers` processes.

    The cluster is started, and every worker has imported the code and built its
    resources, before the clock starts (a deployment's Dask workers are long-lived).
    """
    import os

    from distributed import Client, LocalCluster

    with LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        os.environ["REFLEX_DASK_ADDRESS"] = cluster.scheduler_address
        from flows.settings import flow_settings

        url, uri = settings.resolved_database_url, settings.resolved_tracking_uri
        task_settings = flow_settings(url, uri, str(settings.home))
        with Client(cluster) as client:  # type: ignore[no-untyped-call]
            pids = client.run(_warm_worker, task_settings)
        result = _flow(settings, drop)
        result["dask_worker_pids"] = sorted(pids.values())
        return result


def _child(kind: str, settings: Settings, drop: Path, out: Any) -> None:
    try:
        if kind.startswith("dask-"):
            value = _flow_dask(settings, drop, int(kind.removeprefix("dask-")))
        else:
            value = (_direct if kind == "direct" else _flow)(settings, drop)
        out.send(("ok", value))
    except BaseException as exc:  # the parent reports it
        out.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        out.close()


def _in_child(kind: str, settings: Settings, drop: Path) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(kind, settings, drop, child))
    proc.start()
    child.close()
    status, value = parent.recv()
    proc.join()
    if status != "ok":
        raise RuntimeError(f"{kind} path failed: {value}")
    result: dict[str, Any] = value
    return result


def floor_load(settings: Settings, backend: str, workdir: Path, drop: Path) -> float:
    """Seconds to bulk-load the drop files into unindexed tables of the same columns."""
    from adapters.db import make_engine

    with scratch_url(settings, backend, workdir) as url:
        engine = make_engine(url)
        frames = {p.stem: pl.read_parquet(p) for p in sorted(drop.glob("*.parquet"))}
        with engine.begin() as conn:
            for name, frame in frames.items():
                table = f"floor_{name.replace('-', '_')}"
                cols = ", ".join(f'"{c}" TEXT' for c in frame.columns)
                conn.execute(sa.text(f"CREATE TABLE {table} ({cols})"))
        start = time.perf_counter()
        with engine.begin() as conn:
            for name, frame in frames.items():
                bulk_insert(conn, f"floor_{name.replace('-', '_')}", frame)
        seconds = time.perf_counter() - start
        engine.dispose()
    return seconds


def run_dask(
    settings: Settings, *, decisions: int, backend: str, workers: list[int], repeats: int = 1
) -> dict[str, Any]:
    """The flow path with Dask fan-out for each worker count, same input, same run.

    Each (count, repeat) runs on a fresh scratch ledger in its own process; the counts
    alternate their order across repeats and the fastest run of each is reported.
    """
    workdir = Path(tempfile.mkdtemp(prefix="reflex-bench-dask-"))
    runs: dict[int, list[dict[str, Any]]] = {k: [] for k in workers}
    try:
        drop = prepare_drop(workdir / "drop", decisions)
        for i in range(repeats):
            for k in workers if i % 2 == 0 else list(reversed(workers)):
                with scratch_url(settings, backend, workdir) as url:
                    settings_k = scratch_settings(url, workdir, f"dask{k}-{i}")
                    runs[k].append(_in_child(f"dask-{k}", settings_k, drop))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    best = {k: min(r, key=lambda x: float(x["seconds"])) for k, r in runs.items()}
    per: dict[str, dict[str, Any]] = {
        str(k): {
            "flow_s": round(float(b["seconds"]), 3),
            "decisions_per_s": round(decisions / float(b["seconds"]), 1),
            "flow_cpu_s": round(float(b["cpu_s"]), 3),
            "dask_workers": len(b["dask_worker_pids"]),
            "runs_s": [round(float(r["seconds"]), 3) for r in runs[k]],
        }
        for k, b in best.items()
    }
    out: dict[str, Any] = {"decisions": decisions, "backend": backend, "workers": per}
    if "1" in per and "2" in per:
        out["speedup_2_vs_1"] = round(per["1"]["flow_s"] / per["2"]["flow_s"], 3)
    return out


def run_bench(
    settings: Settings, *, decisions: int, backend: str, repeats: int = 1
) -> dict[str, Any]:
    """Measure the cycle both ways on the same input; returns the JSON-able result.

    With `repeats > 1` the two paths alternate which goes first, each on fresh scratch
    ledgers, and the fastest run of each path is reported (a shared machine's load
    only ever adds time), with every run's seconds listed.
    """
    workdir = Path(tempfile.mkdtemp(prefix="reflex-bench-cycle-"))
    runs: dict[str, list[dict[str, Any]]] = {"direct": [], "flow": []}
    try:
        drop = prepare_drop(workdir / "drop", decisions)
        floor_s = min(floor_load(settings, backend, workdir, drop) for _ in range(repeats))
        for i in range(repeats):
            order = ("direct", "flow") if i % 2 == 0 else ("flow", "direct")
            for kind in order:
                with scratch_url(settings, backend, workdir) as url:
                    settings_k = scratch_settings(url, workdir, f"{kind}-{i}")
                    runs[kind].append(_in_child(kind, settings_k, drop))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    direct = min(runs["direct"], key=lambda r: float(r["seconds"]))
    flow = min(runs["flow"], key=lambda r: float(r["seconds"]))
    direct_s = float(direct["seconds"])
    return {
        "decisions": decisions,
        "backend": backend,
        "decisions_per_s": round(decisions / direct_s, 1),
        "direct_s": round(direct_s, 3),
        "cpu_s": round(float(direct["cpu_s"]), 3),
        "cpu_ms_per_decision": round(1000 * float(direct["cpu_s"]) / decisions, 4),
        "stage_s": {k: round(v, 3) for k, v in direct["stages"].items()},
        "stage_cpu_s": {k: round(v, 3) for k, v in direct["stage_cpu"].items()},
        "flow_s": round(float(flow["seconds"]), 3),
        "flow_direct_ratio": round(float(flow["seconds"]) / direct_s, 4),
        "peak_rss_mb": round(float(direct["peak_rss_mb"]), 1),
        "stage_peak_rss_mb": {k: round(v, 1) for k, v in direct["stage_peak_rss_mb"].items()},
        "flow_peak_rss_mb": round(float(flow["peak_rss_mb"]), 1),
        "floor_s": round(floor_s, 3),
        "ratio_floor": round(direct_s / floor_s, 2),
        "admitted": direct["admitted"],
        "evaluated": direct["evaluated"],
        "reflected": direct["reflected"],
        "episodes": direct["episodes"],
        "repeats": repeats,
        "direct_runs_s": [round(float(r["seconds"]), 3) for r in runs["direct"]],
        "flow_runs_s": [round(float(r["seconds"]), 3) for r in runs["flow"]],
    }
