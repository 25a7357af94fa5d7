"""Processes that open one new SQLite tracking store at once all get a working store.

The Dask workers of a flow warm their trackers together; before the creation lock one
of them failed in MLflow's migration (`duplicate column name: step`) and the worker
was restarted mid-run (`adapters/tracking/store_init.py`).
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path
from typing import Any

PROCESSES = 4


def _open_and_write(uri: str, name: str, barrier: Any, out: Any) -> None:
    try:
        from adapters.tracking.redact import redacting_client

        barrier.wait(timeout=120)
        client = redacting_client(uri, uri)
        out.put((name, "ok", client.create_experiment(name)))
    except BaseException as exc:  # the parent asserts on it
        out.put((name, "error", f"{type(exc).__name__}: {exc}"))


def test_processes_opening_a_new_store_together_all_succeed(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'mlflow.sqlite'}"
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [
        ctx.Process(target=_open_and_write, args=(uri, f"e{i}", barrier, out))
        for i in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [r for r in results if r[1] != "ok"] == []
    import mlflow

    names = {e.name for e in mlflow.MlflowClient(tracking_uri=uri).search_experiments()}
    assert names >= {f"e{i}" for i in range(PROCESSES)}
