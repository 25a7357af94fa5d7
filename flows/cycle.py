"""The learning cycle's flows: the whole cycle, and each scheduled part of it.

Composition and schedules only. Each flow builds its `Settings` from its parameters
(the ledger and tracking URIs a deployment pinned when it was created) and hands a
`PrefectRunner` to the same sequence function the direct path runs
(`reflexmem.operations.cycle`), so every stage is one task wrapping one operation and
no flow holds a copy of the sequence. Each flow publishes a markdown artifact: its counts
and a link to the MLflow page of every run its stages opened (`flows/markdown`).

| flow | sequence | schedule |
|---|---|---|
| `daily_cycle` | intake -> maturation -> reflection -> memory -> skills | `15 0 * * *` |
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

from flows.artifacts import markdown_artifact
from flows.hooks import FAILURE_HOOKS
from flows.markdown import markdown
from flows.settings import flow_settings
from reflexmem.operations import memory as memory_ops
from reflexmem.operations.cycle import (
    CycleParams,
    cycle_counts,
    run_cycle,
    run_intake,
    run_maturation,
    run_memory,
    run_reflection,
)
from reflexmem.operations.cycle import plain as plain_data
from reflexmem.operations.maturation import plan
from reflexmem.settings import Settings
from tasks.runner import PrefectRunner, prefect_runner

DAILY_CRON = "15 0 * * *"
ADMISSION_CRON = "*/10 * * * *"
MATURATION_CRON = "0 * * * *"
REFLECTION_CRON = "30 * * * *"
DISTILLATION_CRON = "45 * * * *"
FLOW_RETRIES = 1
"""A scheduled flow run that fails is run once more (every stage is idempotent by its own
selection, so a rerun does what the failed one left); the hooks record it if that fails
too. Tasks retry on their own first (`reflexmem.operations.stages`)."""
FLOW_RETRY_DELAY_S = 30
SCHEDULED: dict[str, Any] = {
    "retries": FLOW_RETRIES,
    "retry_delay_seconds": FLOW_RETRY_DELAY_S,
    **FAILURE_HOOKS,
}


def _publish(
    settings: Settings, key: str, description: str, counts: Mapping[str, Any], report: Any
) -> None:
    text = markdown(description, counts, report, settings.mlflow_ui_url)
    markdown_artifact(key=key, markdown=text, description=description)


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict):
        out: dict[str, Any] = {}
        for k, v in data.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): data}


@flow(name="daily_cycle", **SCHEDULED)
def daily_cycle(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    as_of: datetime | None = None,
    profile: str | None = None,
    version: int | None = None,
    roles: list[str] | None = None,
    drop_dir: str | None = None,
) -> dict[str, Any]:
    """The whole learning cycle, once: intake, maturation, reflection, memory, skills."""
    settings = flow_settings(database_url, tracking_uri, home)
    params = CycleParams(
        as_of=as_of,
        profile=profile,
        version=version,
        roles=tuple(roles) if roles else None,
        drop=Path(drop_dir) if drop_dir else None,
    )
    with prefect_runner(settings) as runner:
        cycle = run_cycle(runner, params)
    report = cycle.as_dict()
    summary = cycle_counts(cycle)
    title = f"cycle as of {report['maturation']['plan']['as_of']}"
    _publish(settings, "daily-cycle", title, summary, report)
    return report


@flow(name="admission", **SCHEDULED)
def admission(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    drop_dir: str | None = None,
) -> dict[str, Any]:
    """Ingest every new file of the drop folder (Great Expectations guarded), then admit."""
    settings = flow_settings(database_url, tracking_uri, home)
    folder = Path(drop_dir) if drop_dir else settings.resolved_drop_dir
    dropped, admitted = run_intake(PrefectRunner(settings), folder)
    report = {"drop": plain_data(dropped), "admission": plain_data(admitted)}
    _publish(settings, "admission", f"drop folder {folder}", _flatten(report), report)
    return report


@flow(name="maturation_check", **SCHEDULED)
def maturation_check(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    as_of: datetime | None = None,
    profile: str | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    """Fix the clock, settle positions, mature cases, evaluate them, promote first runs."""
    settings = flow_settings(database_url, tracking_uri, home)
    params = CycleParams(as_of=as_of, profile=profile, version=version)
    report: dict[str, Any] = plain_data(run_maturation(PrefectRunner(settings), params))
    title = f"maturation as of {report['plan']['as_of']}"
    _publish(settings, "maturation-check", title, _flatten(report), report)
    return report


@flow(name="reflection_batch", **SCHEDULED)
def reflection_batch(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    roles: list[str] | None = None,
    profile: str | None = None,
) -> list[dict[str, Any]]:
    """One reflection batch per role, side by side; a role never runs twice at once."""
    settings = flow_settings(database_url, tracking_uri, home)
    with prefect_runner(settings) as runner:
        chosen = runner.run(plan, roles=roles).roles
        rows = [r.as_row() for r in run_reflection(runner, chosen, profile)]
    counts = {
        f"{r['role']}.{k}": v
        for r in rows
        for k, v in r.items()
        if k not in ("role", "batch", "mlflow_run")
    }
    _publish(settings, "reflection-batch", f"reflection of {len(rows)} role(s)", counts, rows)
    return rows


@flow(name="distillation", **SCHEDULED)
def distillation(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    roles: list[str] | None = None,
    profile: str | None = None,
) -> dict[str, Any]:
    """Record reflected cases as episodes per role, then distil every due namespace."""
    settings = flow_settings(database_url, tracking_uri, home)
    with prefect_runner(settings) as runner:
        chosen = runner.run(plan, roles=roles).roles
        report: dict[str, Any] = plain_data(run_memory(runner, chosen, profile))
    counts = {
        f"{d['namespace']}.{k}": v
        for d in report["distillation"]
        for k, v in d.items()
        if k in ("windows", "patterns", "refused")
    }
    recorded = sum(e["recorded"] for e in report["episodes"])
    _publish(settings, "memory-distillation", f"{recorded} episode(s) recorded", counts, report)
    return report


@flow(name="record-episodes")
def record_episodes(
    agent_id: str,
    namespace: str,
    episodes: list[dict[str, Any]],
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    distill: bool = True,
) -> dict[str, Any]:
    """Record an agent's own settled episodes and credit its bandit."""
    settings = flow_settings(database_url, tracking_uri, home)
    report = PrefectRunner(settings).run(
        memory_ops.record_agent_episodes,
        agent_id=agent_id,
        namespace=namespace,
        episodes=episodes,
        distill=distill,
    )
    summary: dict[str, Any] = plain_data(report)
    counts = {f"bandit updates {p}": n for p, n in sorted(report.bandit_updates.items())}
    title = f"{report.episodes} episode(s) for {agent_id} in {namespace}"
    _publish(settings, "memory-episodes", title, counts, summary)
    return summary
