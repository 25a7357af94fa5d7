"""Schedule health for `doctor`: last and next runs, late and failed runs, worker heartbeats.

Read from the Prefect API named by `REFLEX_PREFECT_API_URL`.

A scheduled run is *late* when its expected start is more than `LATE_AFTER` in the past
and it has not started; a run is counted *failed* if it ended Failed or Crashed within
`FAILED_WINDOW`. A work pool a deployment uses is healthy only with at least one worker
whose last heartbeat is within `HEARTBEAT_STALE` (Prefect workers beat every 30 s).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

LATE_AFTER = timedelta(seconds=60)
FAILED_WINDOW = timedelta(hours=24)
HEARTBEAT_STALE = timedelta(seconds=90)


async def _collect(api_url: str, now: datetime) -> dict[str, Any]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        DeploymentFilter,
        DeploymentFilterId,
        FlowRunFilter,
        FlowRunFilterExpectedStartTime,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.sorting import FlowRunSort
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: api_url}):
        async with get_client() as client:
            deployments = await client.read_deployments()
            out: list[dict[str, Any]] = []
            pools: set[str] = set()
            for dep in deployments:
                by_dep = DeploymentFilter(id=DeploymentFilterId(any_=[dep.id]))
                late = await client.read_flow_runs(
                    deployment_filter=by_dep,
                    flow_run_filter=FlowRunFilter(
                        state=FlowRunFilterState(
                            type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])
                        ),
                        expected_start_time=FlowRunFilterExpectedStartTime(
                            before_=now - LATE_AFTER  # type: ignore[arg-type]
                        ),
                    ),
                )
                nxt = await client.read_flow_runs(
                    deployment_filter=by_dep,
                    flow_run_filter=FlowRunFilter(
                        state=FlowRunFilterState(
                            type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])
                        ),
                        expected_start_time=FlowRunFilterExpectedStartTime(after_=now),  # type: ignore[arg-type]
                    ),
                    sort=FlowRunSort.EXPECTED_START_TIME_ASC,
                    limit=1,
                )
                terminal = [
                    StateType.COMPLETED,
                    StateType.FAILED,
                    StateType.CRASHED,
                    StateType.CANCELLED,
                ]
                last = await client.read_flow_runs(
                    deployment_filter=by_dep,
                    flow_run_filter=FlowRunFilter(
                        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=terminal))
                    ),
                    sort=FlowRunSort.END_TIME_DESC,
                    limit=20,
                )
                failed = [
                    r
                    for r in last
                    if r.state_type in (StateType.FAILED, StateType.CRASHED)
                    and r.end_time is not None
                    and r.end_time >= now - FAILED_WINDOW
                ]
                if dep.work_pool_name:
                    pools.add(dep.work_pool_name)
                out.append(
                    {
                        "name": dep.name,
                        "work_pool": dep.work_pool_name,
                        "last_run": _run(last[0]) if last else None,
                        "next_run": _run(nxt[0]) if nxt else None,
                        "late_runs": len(late),
                        "failed_runs_24h": len(failed),
                    }
                )
            workers: dict[str, list[dict[str, Any]]] = {}
            for pool in sorted(pools):
                rows = await client.read_workers_for_work_pool(pool)
                workers[pool] = [
                    {
                        "name": w.name,
                        "last_heartbeat": _iso(w.last_heartbeat_time),
                        "alive": w.last_heartbeat_time is not None
                        and w.last_heartbeat_time >= now - HEARTBEAT_STALE,
                    }
                    for w in rows
                ]
    return {"deployments": out, "workers": workers}


def _iso(when: datetime | None) -> str | None:
    return when.isoformat() if when else None


def _run(run: Any) -> dict[str, Any]:
    return {
        "id": str(run.id),
        "state": run.state_type.value if run.state_type else None,
        "expected_start": _iso(run.expected_start_time),
        "end": _iso(run.end_time),
    }


def schedule_health(api_url: str, now: datetime) -> dict[str, Any]:
    """The schedule section of the doctor's report, with an overall `ok` and `detail`."""
    try:
        found = asyncio.run(_collect(api_url, now))
    except Exception as exc:  # the server is down or answers garbage: unhealthy
        from reflexmem.redact import redact

        return {
            "ok": False,
            "detail": f"Prefect API unreachable: {redact(str(exc))}",
            "deployments": [],
            "workers": {},
        }
    deps = found["deployments"]
    late = [d["name"] for d in deps if d["late_runs"]]
    failed = [d["name"] for d in deps if d["failed_runs_24h"]]
    dead = [p for p, ws in found["workers"].items() if not any(w["alive"] for w in ws)]
    problems = (
        ([f"late: {', '.join(late)}"] if late else [])
        + ([f"failed in 24 h: {', '.join(failed)}"] if failed else [])
        + ([f"no live worker in pool {', '.join(dead)}"] if dead else [])
    )
    detail = "; ".join(problems) or f"{len(deps)} deployments on time"
    return {"ok": not problems, "detail": detail, **found}
