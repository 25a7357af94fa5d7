"""The learning cycle's flows: the whole cycle, and each scheduled part of it.

Composition and schedules only. Each flow builds its `Settings` from its parameters
(the ledger and tracking URIs a deployment pinned when it was created) and hands a
`PrefectRunner` to the same sequence function the direct path runs
(`reflexmem.operations.cycle`), so every stage is one task wrapping one operation and
no flow holds a copy of the sequence. Each flow publishes a table artifact of counts.

| flow | sequence | schedule |
|---|---|---|
| `daily_cycle` | intake -> maturation -> reflection -> memory | `15 0 * * *` |
| `admission` | ingest the drop folder -> admit | `*/10 * * * *` |
| `maturation_check` | plan -> settle -> mature -> evaluate -> promote | `0 * * * *` |
| `reflection_batch` | reflect per role (side by side) | `30 * * * *` |
| `distillation` | record episodes per role -> distil per due namespace | `45 * * * *` |
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from prefect import flow

from flows.artifacts import table_artifact
from infra.resources import protect
from reflexmem.operations import memory as memory_ops
from reflexmem.operations.cycle import (
    CycleParams,
    run_cycle,
    run_intake,
    run_maturation,
    run_memory,
    run_reflection,
)
from reflexmem.operations.cycle import plain as plain_data
from reflexmem.operations.maturation import plan
from reflexmem.settings import Settings
from tasks.runner import PrefectRunner

DAILY_CRON = "15 0 * * *"
ADMISSION_CRON = "*/10 * * * *"
MATURATION_CRON = "0 * * * *"
REFLECTION_CRON = "30 * * * *"
DISTILLATION_CRON = "45 * * * *"


def flow_settings(database_url: str | None, tracking_uri: str | None) -> Settings:
    """Settings from the environment, with the flow's pinned ledger and tracking store."""
    overrides: dict[str, Any] = {}
    if database_url:
        overrides["database_url"] = database_url
    if tracking_uri:
        overrides["mlflow_tracking_uri"] = tracking_uri
    settings = Settings(**overrides)
    protect(settings)
    return settings


def _publish(key: str, description: str, counts: Mapping[str, Any]) -> None:
    rows = [{"count": k, "value": str(v)} for k, v in counts.items()]
    table_artifact(key=key, table=rows or [{"count": "-", "value": "0"}], description=description)


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): data}


@flow(name="daily_cycle")
def daily_cycle(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    as_of: datetime | None = None,
    profile: str | None = None,
    version: int | None = None,
    roles: list[str] | None = None,
    drop_dir: str | None = None,
) -> dict[str, Any]:
    """The whole learning cycle, once: intake, maturation, reflection, memory."""
    settings = flow_settings(database_url, tracking_uri)
    params = CycleParams(
        as_of=as_of,
        profile=profile,
        version=version,
        roles=tuple(roles) if roles else None,
        drop=Path(drop_dir) if drop_dir else None,
    )
    report = run_cycle(PrefectRunner(settings), params).as_dict()
    summary = {
        "admitted": report["admission"]["admitted"],
        "settled": report["maturation"]["settle"]["settled"],
        "matured": report["maturation"]["maturity"]["matured"],
        "evaluated": report["maturation"]["evaluation"]["runs"],
        "promoted": report["maturation"]["promotion"]["promoted"],
        "reflected": sum(r["reflected"] for r in report["reflection"]),
        "episodes": sum(e["recorded"] for e in report["memory"]["episodes"]),
        "patterns": sum(d["patterns"] for d in report["memory"]["distillation"]),
    }
    _publish("daily-cycle", f"cycle as of {report['maturation']['plan']['as_of']}", summary)
    return report


@flow(name="admission")
def admission(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    drop_dir: str | None = None,
) -> dict[str, Any]:
    """Ingest every new file of the drop folder (Great Expectations guarded), then admit."""
    settings = flow_settings(database_url, tracking_uri)
    folder = Path(drop_dir) if drop_dir else settings.resolved_drop_dir
    dropped, admitted = run_intake(PrefectRunner(settings), folder)
    report = {"drop": plain_data(dropped), "admission": plain_data(admitted)}
    _publish("admission", f"drop folder {folder}", _flatten(report))
    return report


@flow(name="maturation_check")
def maturation_check(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    as_of: datetime | None = None,
    profile: str | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    """Fix the clock, settle positions, mature cases, evaluate them, promote first runs."""
    settings = flow_settings(database_url, tracking_uri)
    params = CycleParams(as_of=as_of, profile=profile, version=version)
    report: dict[str, Any] = plain_data(run_maturation(PrefectRunner(settings), params))
    _publish("maturation-check", f"maturation as of {report['plan']['as_of']}", _flatten(report))
    return report


@flow(name="reflection_batch")
def reflection_batch(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    roles: list[str] | None = None,
    profile: str | None = None,
) -> list[dict[str, Any]]:
    """One reflection batch per role, side by side; a role never runs twice at once."""
    settings = flow_settings(database_url, tracking_uri)
    runner = PrefectRunner(settings)
    chosen = runner.run(plan, roles=roles).roles
    rows = [r.as_row() for r in run_reflection(runner, chosen, profile)]
    table_artifact(
        key="reflection-batch",
        table=rows or [{"role": "-", "offered": 0}],
        description=f"reflection of {len(rows)} role(s)",
    )
    return rows


@flow(name="distillation")
def distillation(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    roles: list[str] | None = None,
    profile: str | None = None,
) -> dict[str, Any]:
    """Record reflected cases as episodes per role, then distil every due namespace."""
    settings = flow_settings(database_url, tracking_uri)
    runner = PrefectRunner(settings)
    chosen = runner.run(plan, roles=roles).roles
    report: dict[str, Any] = plain_data(run_memory(runner, chosen, profile))
    rows = report["distillation"] or [{"namespace": "-", "windows": 0}]
    table_artifact(
        key="memory-distillation",
        table=[{k: str(v) for k, v in r.items()} for r in rows],
        description=f"{sum(e['recorded'] for e in report['episodes'])} episode(s) recorded",
    )
    return report


@flow(name="record-episodes")
def record_episodes(
    agent_id: str,
    namespace: str,
    episodes: list[dict[str, Any]],
    database_url: str | None = None,
    tracking_uri: str | None = None,
    distill: bool = True,
) -> dict[str, Any]:
    """Record an agent's own settled episodes and credit its bandit."""
    settings = flow_settings(database_url, tracking_uri)
    report = PrefectRunner(settings).run(
        memory_ops.record_agent_episodes,
        agent_id=agent_id,
        namespace=namespace,
        episodes=episodes,
        distill=distill,
    )
    summary: dict[str, Any] = plain_data(report)
    table_artifact(
        key="memory-episodes",
        table=[{"policy": p, "updates": n} for p, n in sorted(report.bandit_updates.items())]
        or [{"policy": "-", "updates": 0}],
        description=f"{report.episodes} episode(s) for {agent_id} in {namespace}",
    )
    return summary
