"""`reflexmem bench api`: the agent API under concurrent recall clients and writers.

It builds a scratch store on the chosen backend (the recall benchmark's synthetic cases
on the registered roles), starts `reflexmem api` as its own process on a free loopback
port in active mode, and for `seconds` runs `clients` recall clients and `writers`
writer clients, each a coroutine on its own keep-alive connection sending its next
request as soon as the last was answered. A writer records one new decision per request.
The clients share the server's machine, so they are lean (`apps/bench/http_client.py`):
their CPU seconds are printed beside the server's.

Reported: answers by status code and endpoint, connections dropped (a transport error,
including a timeout), requests per second, p50 / p99 per endpoint, writes acknowledged
(200) against decisions stored (read back from the ledger: every acknowledged write must
be there), and the server's peak RSS (process and children, polled). The floor beside it:
the same recall and record operations called in this process one at a time (no HTTP, no
concurrency), what the service adds everything on top of.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil
import sqlalchemy as sa

from adapters.db import make_engine
from apps.bench.http_client import Answer, KeepAliveClient, ProtocolError
from apps.bench.recall_api import payloads, served_store
from apps.service import agent_tools
from apps.service.agent_tools import RecallRequest
from reflexmem.registry import load_registry
from reflexmem.settings import MemoryMode, Settings

PREFIX = "bench-api-"
STARTUP_S = 120.0
REQUEST_TIMEOUT_S = 60.0
FLOOR_OPS = 200


def decision(writer: int, i: int) -> dict[str, Any]:
    """A new, valid decision (unique ID) as an agent would record it."""
    return {
        "decision_id": f"{PREFIX}{writer}-{i}",
        "agent_id": f"agent-{writer}",
        "role_id": "momentum",
        "account": "acct-bench",
        "market": "US",
        "symbol": "SPY",
        "direction": "long" if i % 2 else "short",
        "decided_at": "2025-01-02T15:30:00Z",
        "rationale": "bench: breakout above the range",
        "evidence": [{"kind": "price_history", "as_of": "2025-01-02", "value": 470.1}],
    }


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cpu(procs: list[psutil.Process]) -> float:
    """User plus system CPU seconds of `procs` so far."""
    return sum(sum(p.cpu_times()[:2]) for p in procs)


class PeakRss:
    """Polls a process and its children: peak resident memory (MB), CPU seconds used."""

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        self.proc, self.every_s, self.peak = psutil.Process(pid), every_s, 0
        self.cpu_s, self._cpu_start = 0.0, _cpu(self._procs())
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _procs(self) -> list[psutil.Process]:
        return [self.proc, *self.proc.children(recursive=True)]

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = self._procs()
                self.peak = max(self.peak, sum(p.memory_info().rss for p in procs))
                self.cpu_s = _cpu(procs) - self._cpu_start
            except psutil.Error:
                pass
            self._stop.wait(self.every_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mb(self) -> float:
        """The peak so far, in MB."""
        return round(self.peak / 2**20, 1)


@contextmanager
def served(
    settings: Settings, token: str, workdir: Path, workers: int = 1
) -> Iterator[tuple[str, int]]:
    """`reflexmem api` (`workers` processes) on loopback; (base URL, PID) once it answers."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REFLEX_", "ROLE_MEMORY"))}
    env |= {
        "REFLEX_HOME": str(settings.home),
        "REFLEX_DATABASE_URL": settings.resolved_database_url,
        "REFLEX_MLFLOW_TRACKING_URI": settings.resolved_tracking_uri,
        "REFLEX_ARTIFACT_ROOT": str(settings.resolved_artifact_root),
        "REFLEX_API_TOKEN": token,
        "ROLE_MEMORY_MODE": "active",
    }
    cmd = [sys.executable, "-c", "from apps.cli import main; main()", "api", "--port", str(port)]
    cmd += ["--workers", str(workers)]
    with (workdir / "api.log").open("wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        while True:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"reflexmem api did not start; see {workdir / 'api.log'}")
            try:
                headers = {"Authorization": f"Bearer {token}"}
                if httpx.get(f"{url}/v1/health", headers=headers, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


class Tally:
    """What the clients saw: statuses and latencies per endpoint, drops, writes acked."""

    def __init__(self) -> None:
        self.status: Counter[str] = Counter()
        self.latency: dict[str, list[float]] = {"recall": [], "record": []}
        self.dropped = 0
        self.acknowledged = 0
        self.retry_after_missing = 0

    def seen(self, endpoint: str, response: Answer, ms: float) -> None:
        """One answer."""
        self.status[f"{response.status_code}"] += 1
        self.latency[endpoint].append(ms)
        if response.status_code == 503 and "retry-after" not in response.headers:
            self.retry_after_missing += 1


async def _loop(
    client: KeepAliveClient, tally: Tally, deadline: float, endpoint: str, bodies: Any
) -> None:
    path = "/v1/recall" if endpoint == "recall" else "/v1/decisions"
    for body in bodies:
        if time.monotonic() >= deadline:
            return
        start = time.perf_counter()
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                response = await client.post(path, body)
        except (ProtocolError, TimeoutError):
            tally.dropped += 1
            continue
        tally.seen(endpoint, response, (time.perf_counter() - start) * 1000.0)
        if endpoint == "record" and response.status_code == 200:
            tally.acknowledged += 1


def _cycle(items: Sequence[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    while True:
        yield from items


def _writes(writer: int) -> Iterator[dict[str, Any]]:
    i = 0
    while True:
        yield decision(writer, i)
        i += 1


async def load(
    url: str, token: str, plan: Sequence[dict[str, Any]], clients: int, writers: int, seconds: float
) -> Tally:
    """Run the clients and writers against `url` for `seconds`."""
    tally = Tally()
    deadline = time.monotonic() + seconds
    headers = {"Authorization": f"Bearer {token}"}
    opened = [KeepAliveClient(url, headers) for _ in range(clients + writers)]
    try:
        jobs = [
            _loop(opened[c], tally, deadline, "recall", _cycle(plan[c::clients] or plan))
            for c in range(clients)
        ] + [
            _loop(opened[clients + w], tally, deadline, "record", _writes(w))
            for w in range(writers)
        ]
        await asyncio.gather(*jobs)
    finally:
        for client in opened:
            await client.aclose()
    return tally


def _pcts(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_ms": None, "p99_ms": None}
    arr = np.asarray(values)
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 2),
        "p99_ms": round(float(np.percentile(arr, 99)), 2),
    }


def floor(settings: Settings, plan: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The same operations in this process, one at a time: recall and record latencies."""
    from adapters.resources import build_resources

    res = build_resources(settings)
    try:
        recall_ms: list[float] = []
        for body in plan[:FLOOR_OPS]:
            start = time.perf_counter()
            agent_tools.recall(res, MemoryMode.ACTIVE, RecallRequest.model_validate(body))
            recall_ms.append((time.perf_counter() - start) * 1000.0)
        record_ms: list[float] = []
        for i in range(FLOOR_OPS):
            start = time.perf_counter()
            agent_tools.record(res, "decisions", [decision(10_000, i)])
            record_ms.append((time.perf_counter() - start) * 1000.0)
    finally:
        res.engine.dispose()
    return {
        "recall": _pcts(recall_ms),
        "record": _pcts(record_ms),
        "recall_per_s_one_at_a_time": round(1000.0 / float(np.mean(recall_ms)), 1),
        "record_per_s_one_at_a_time": round(1000.0 / float(np.mean(record_ms)), 1),
    }


def run_bench(
    settings: Settings,
    *,
    backend: str,
    clients: int,
    writers: int,
    seconds: float,
    cases: int = 20_000,
    seed: int = 0,
    server_workers: int = 1,
) -> dict[str, Any]:
    """Build, serve, load, read back, measure the floor; one JSON object."""
    if clients < 0 or writers < 0 or clients + writers == 0 or seconds <= 0:
        raise ValueError("need at least one client or writer and a positive duration")
    with served_store(settings, backend, cases, seed) as (tmp, bench, token):
        db_url = bench.resolved_database_url
        roles = load_registry().ids
        plan = payloads(roles, 2000, seed)
        with served(bench, token, tmp, server_workers) as (url, pid), PeakRss(pid) as rss:
            gc.collect()
            gc.freeze()  # the store built above is not the clients' garbage to walk
            started, client_cpu = time.perf_counter(), time.process_time()
            try:
                tally = asyncio.run(load(url, token, plan, clients, writers, seconds))
            finally:
                gc.unfreeze()
            elapsed = time.perf_counter() - started
            client_cpu = time.process_time() - client_cpu
        engine = make_engine(db_url)
        try:
            with engine.connect() as conn:
                stored = conn.execute(
                    sa.text("SELECT COUNT(*) FROM trading_decisions WHERE decision_id LIKE :p"),
                    {"p": f"{PREFIX}%"},
                ).scalar_one()
        finally:
            engine.dispose()
        base = floor(bench, plan)
    answers = sum(tally.status.values())
    writes = len(tally.latency["record"])
    return {
        "benchmark": "api",
        "backend": backend,
        "clients": clients,
        "writers": writers,
        "seconds": round(elapsed, 1),
        "cases": cases,
        "server_workers": server_workers,
        "requests_per_s": round(answers / elapsed, 1),
        "recall_per_s": round(len(tally.latency["recall"]) / elapsed, 1),
        "status_counts": dict(sorted(tally.status.items())),
        "dropped_connections": tally.dropped,
        "answers_503_without_retry_after": tally.retry_after_missing,
        "acknowledged_writes": tally.acknowledged,
        "stored_writes": int(stored),
        "write_share_acknowledged": round(tally.acknowledged / writes, 4) if writes else None,
        "recall_p50_ms": _pcts(tally.latency["recall"])["p50_ms"],
        "recall_p99_ms": _pcts(tally.latency["recall"])["p99_ms"],
        "record_p50_ms": _pcts(tally.latency["record"])["p50_ms"],
        "record_p99_ms": _pcts(tally.latency["record"])["p99_ms"],
        "peak_rss_mb": rss.mb,
        "server_cpu_s": round(rss.cpu_s, 1),
        "client_cpu_s": round(client_cpu, 1),
        "floor": {"what": "the same tools in process, one call at a time", **base},
        "transport": "HTTP/1.1 keep-alive on loopback; server: `reflexmem api --workers "
        f"{server_workers}` in its own process(es)",
    }
