"""What the recorded stack is doing now, read from its running servers.

`status` (`reflexmem stack status`) reports each part of the stack `up` recorded, with
the ledger's migration state and the server's deployments read live, never from what
`up` wrote before a later `db upgrade` or `stack deploy`. `paused_schedules` pauses
every scheduled deployment of a Prefect server for the length of a block and resumes
exactly those it paused: the demo walks its own weekly clocks, and a scheduled run on
the stack's worker must not move a skill in the middle of that walk.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from apps.deploy.processes import is_ours
from apps.deploy.stack import (
    _api,
    _processes,
    _worker_online,
    ledger_current,
    read_state,
    state_path,
)
from reflexmem.settings import Settings


def status(settings: Settings) -> dict[str, Any]:
    """Each recorded part: running or not, and whether its URL answers."""
    state = read_state(settings)
    if state is None:
        return {"up": False, "state": str(state_path(settings))}
    report: dict[str, Any] = {"state": str(state_path(settings)), "ledger": state["ledger"]}
    checks = {"prefect": "/api/health", "mlflow": "/health"}
    for name, entry in _processes(state).items():
        part: dict[str, Any] = {"pid": entry["pid"], "running": is_ours(entry), "log": entry["log"]}
        if name in checks:
            part["url"] = entry["url"]
            part["healthy"] = part["running"] and _answers(entry["url"] + checks[name])
        else:
            part["pool"] = entry["pool"]
            part["online"] = part["running"] and _worker_online(
                state["prefect"]["api_url"], entry["pool"], entry["name"]
            )
        report[name] = part
    report["ledger"] = {**state["ledger"], "migrated": ledger_current(state["ledger"]["url"])}
    report["deployments"] = (
        _deployments(state["prefect"]["api_url"])
        if report.get("prefect", {}).get("healthy")
        else state.get("deployments", {})
    )
    report["up"] = all(
        p.get("healthy", p.get("online"))
        for k, p in report.items()
        if isinstance(p, dict) and "running" in p
    )
    return report


def _deployments(api: str) -> dict[str, str]:
    """Every deployment the stack's Prefect server holds now: name -> ID."""
    from prefect.client.orchestration import get_client

    try:
        with _api(api), get_client(sync_client=True) as client:
            found = client.read_deployments()
    except Exception:
        return {}
    return {d.name: str(d.id) for d in found}


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def paused_schedules(api_url: str | None) -> Iterator[list[str]]:
    """Pause every unpaused deployment on the server at `api_url` inside the block.

    Yields the names paused (none when `api_url` is None or the server does not answer:
    nothing runs on a schedule then). Resumes exactly those on the way out, on errors too.
    """
    if not api_url:
        yield []
        return
    from prefect.client.orchestration import get_client

    try:
        with _api(api_url), get_client(sync_client=True) as client:
            active = [d for d in client.read_deployments() if not d.paused]
            for d in active:
                client.pause_deployment(d.id)
    except httpx.HTTPError:
        yield []
        return
    try:
        yield [d.name for d in active]
    finally:
        with _api(api_url), get_client(sync_client=True) as client:
            for d in active:
                client.resume_deployment(d.id)
