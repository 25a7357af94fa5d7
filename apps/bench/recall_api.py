"""`reflexmem bench recall --via api`: recall latency as an agent sees it, over HTTP.

`measure` times recall requests against a running agent API (a base URL and its
bearer token), one keep-alive connection, one request at a time, and returns p50/p99.
`run_bench` builds the same synthetic store as `reflexmem bench recall`
(`apps.bench.recall.case_frames` and `load_cases`, with its eight synthetic roles
mapped onto the registered roles, since the recall operation refuses unknown roles),
serves it with `reflexmem api`'s app on a free loopback port, and in the same run
times the same payloads through the same recall tool in process, in alternating
rounds (`compare`), so the HTTP cost is read as an in-run difference, not against a
figure from another run or machine.
"""

from __future__ import annotations

import itertools
import secrets
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import polars as pl
from pydantic import SecretStr

from adapters.db import make_engine
from apps.bench.recall import ROLES, SYMBOLS, case_frames, load_cases
from apps.bench.support import scratch_settings, scratch_url
from apps.service import agent_tools
from apps.service.agent_tools import RecallRequest
from reflexmem.operations.resources import Resources
from reflexmem.registry import load_registry
from reflexmem.settings import MemoryMode, Settings

POLICY = "full_detailed"
"""A fixed policy: the bandit's sampled one could be `none`, which reads nothing."""


def _stats(lat_ms: Sequence[float]) -> dict[str, float]:
    values = np.asarray(lat_ms)
    return {
        "p50_ms": round(float(np.percentile(values, 50)), 3),
        "p95_ms": round(float(np.percentile(values, 95)), 3),
        "p99_ms": round(float(np.percentile(values, 99)), 3),
        "mean_ms": round(float(values.mean()), 3),
    }


def _time_api(
    client: httpx.Client, payloads: Sequence[dict[str, Any]]
) -> tuple[list[float], int, int]:
    """Milliseconds of each successful request, errors, hits."""
    lat: list[float] = []
    errors = hits = 0
    for body in payloads:
        start = time.perf_counter()
        response = client.post("/v1/recall", json=body)
        elapsed = (time.perf_counter() - start) * 1000.0
        if response.status_code != 200:
            errors += 1
            continue
        lat.append(elapsed)
        hits += len(response.json()["hits"])
    return lat, errors, hits


def _time_direct(res: Resources, requests: Sequence[RecallRequest]) -> tuple[list[float], int]:
    """Milliseconds of each in-process recall (the same tool the endpoint calls), hits."""
    lat: list[float] = []
    hits = 0
    for req in requests:
        start = time.perf_counter()
        out = agent_tools.recall(res, MemoryMode.ACTIVE, req)
        lat.append((time.perf_counter() - start) * 1000.0)
        hits += len(out["hits"])
    return lat, hits


def _client(base_url: str, token: str, timeout_s: float) -> httpx.Client:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.Client(base_url=base_url, headers=headers, timeout=timeout_s)


def measure(
    base_url: str,
    token: str,
    payloads: Sequence[dict[str, Any]],
    *,
    warmup: int = 20,
    timeout_s: float = 30.0,
) -> dict[str, Any]:
    """Time `POST /v1/recall` for every payload, after `warmup` untimed ones.

    One keep-alive connection, one request at a time. Any answer other than 200 is
    counted in `errors` and its latency left out; the stats are over the successful
    requests (an all-failed run raises).
    """
    with _client(base_url, token, timeout_s) as client:
        for body in payloads[:warmup]:
            client.post("/v1/recall", json=body)
        lat, errors, hits = _time_api(client, payloads)
    if not lat:
        raise RuntimeError(f"every one of {len(payloads)} recall requests failed")
    return {
        "requests": len(payloads),
        "errors": errors,
        **_stats(lat),
        "mean_hits": round(hits / len(lat), 2),
    }


def compare(
    res: Resources,
    base_url: str,
    token: str,
    payloads: Sequence[dict[str, Any]],
    *,
    rounds: int = 6,
    warmup: int = 20,
) -> dict[str, Any]:
    """HTTP and in-process recall on the same payloads, in alternating rounds.

    The payloads are cut into `rounds` slices; each slice is timed both ways, the order
    alternating (API first, then direct first), so drift on a shared machine (other
    processes, caches, the growing recall log) falls on both sides alike.
    """
    requests = [RecallRequest.model_validate(p) for p in payloads]
    api_lat: list[float] = []
    direct_lat: list[float] = []
    errors = api_hits = direct_hits = 0
    cpu = {"api": 0.0, "direct": 0.0}
    with _client(base_url, token, 30.0) as client:
        for body in payloads[:warmup]:
            client.post("/v1/recall", json=body)
        _time_direct(res, requests[:warmup])
        bounds = np.linspace(0, len(payloads), rounds + 1).astype(int)
        for i, (lo, hi) in enumerate(itertools.pairwise(bounds.tolist())):
            for side in ("api", "direct") if i % 2 == 0 else ("direct", "api"):
                start_cpu = time.process_time()
                if side == "api":
                    lat, err, hits = _time_api(client, payloads[lo:hi])
                    api_lat += lat
                    errors += err
                    api_hits += hits
                else:
                    lat, hits = _time_direct(res, requests[lo:hi])
                    direct_lat += lat
                    direct_hits += hits
                cpu[side] += time.process_time() - start_cpu
    if not api_lat:
        raise RuntimeError(f"every one of {len(payloads)} recall requests failed")
    return {
        "api": {
            "errors": errors,
            **_stats(api_lat),
            "mean_hits": round(api_hits / len(api_lat), 2),
            "cpu_s_server_and_client": round(cpu["api"], 2),
        },
        "direct": {
            **_stats(direct_lat),
            "mean_hits": round(direct_hits / len(direct_lat), 2),
            "cpu_s": round(cpu["direct"], 2),
        },
    }


def registered_frames(frames: dict[str, pl.DataFrame], roles: Sequence[str]) -> None:
    """Map the corpus's synthetic roles onto registered ones, in place (round robin)."""
    mapping = {r: roles[i % len(roles)] for i, r in enumerate(ROLES)}
    for table in ("trading_decisions", "role_cases"):
        frames[table] = frames[table].with_columns(pl.col("role_id").replace_strict(mapping))


def payloads(roles: Sequence[str], n: int, seed: int, k: int = 5) -> list[dict[str, Any]]:
    """`n` recall bodies: a registered role, a corpus symbol, three corpus words."""
    rng = np.random.default_rng(seed + 17)
    role = rng.integers(0, len(roles), n)
    symbol = rng.integers(0, len(SYMBOLS), n)
    words = rng.integers(0, 300, size=(n, 3))
    return [
        {
            "role": roles[int(role[i])],
            "symbol": SYMBOLS[int(symbol[i])],
            "query": " ".join(f"w{int(w)}" for w in words[i]),
            "k": k,
            "policy": POLICY,
        }
        for i in range(n)
    ]


@contextmanager
def served_store(
    settings: Settings, backend: str, cases: int, seed: int
) -> Iterator[tuple[Path, Settings, str]]:
    """A scratch store of `cases` synthetic cases on the registered roles, for serving.

    Yields its work folder, the settings to serve it with (a fresh bearer token, active
    mode) and the token; the store is dropped afterwards.
    """
    with (
        tempfile.TemporaryDirectory(prefix="reflex-bench-api-") as tmp,
        scratch_url(settings, backend, Path(tmp)) as url,
    ):
        token = secrets.token_urlsafe(24)
        bench = scratch_settings(url, Path(tmp), "api").model_copy(
            update={"api_token": SecretStr(token), "role_memory_mode": MemoryMode.ACTIVE}
        )
        frames = case_frames(cases, seed)
        registered_frames(frames, load_registry().ids)
        engine = make_engine(url)
        try:
            load_cases(engine, frames)
        finally:
            engine.dispose()
        yield Path(tmp), bench, token


def run_bench(
    settings: Settings,
    *,
    cases: int,
    backend: str,
    queries: int = 300,
    seed: int = 0,
    progress: bool = False,
) -> dict[str, Any]:
    """Build the store, serve it on loopback, time recall over HTTP and in process."""
    from adapters.resources import build_resources
    from apps.service.api import LoopbackServer, create_app

    t0 = time.perf_counter()
    with served_store(settings, backend, cases, seed) as (_, bench, token):
        build_s = time.perf_counter() - t0
        res = build_resources(bench)
        roles = res.registry.ids
        if progress:
            print(f"built {cases} cases in {build_s:.1f}s; serving on loopback")
        plan = payloads(roles, queries, seed)
        try:
            with LoopbackServer(create_app(res, bench, mode=MemoryMode.ACTIVE)) as base:
                both = compare(res, base, token, plan)
        finally:
            res.engine.dispose()
        api, direct = both["api"], both["direct"]
        return {
            "cases": cases,
            "backend": backend,
            "via": "api",
            "queries": queries,
            "k": 5,
            "policy": POLICY,
            "constraint": "role + symbol (+ reflected, learnable, manual, not quarantined)",
            "transport": "HTTP/1.1 keep-alive on loopback, one request at a time",
            "server": "uvicorn in a thread of this process (CPU seconds include the client)",
            **api,
            "direct": direct,
            "http_overhead_p50_ms": round(api["p50_ms"] - direct["p50_ms"], 3),
            "p50_ratio_api_to_direct": round(api["p50_ms"] / direct["p50_ms"], 2),
            "build_s": round(build_s, 1),
        }
