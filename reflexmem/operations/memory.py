"""Stages of memory (docs/design.md §8): record reflected cases as episodes, distil due windows.

`record_episodes` is where the trading stream enters the three-tier memory: each
reflected case of a role becomes one episode of `role:<id>` (ledger row, episodic entry,
bandit credit for the policy that served the decision's recall, the evolution gate at
window ends), in chunks so memory stays bounded however many cases are waiting.
`distil` merges the lessons of every due window into semantic patterns and procedural
rules (`reflexmem.memory.merge`). Both are idempotent by their own selection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.statistics import refresh_statistics
from reflexmem.memory.cycle import EpisodeInput
from reflexmem.memory.distill import DistillReport
from reflexmem.memory.ledger_agents import MemoryLedger
from reflexmem.memory.ledger_episodes import RecordReport
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.memory.merge import MergeConfig
from reflexmem.memory.role_stream import (
    episode_frame,
    lesson_gist,
    select_unrecorded,
)
from reflexmem.memory.schedule import LearningSchedule
from reflexmem.operations.resources import Resources
from reflexmem.reflection.locks import role_lock

CHUNK = 50_000
"""Cases recorded per transaction: bounded memory, and a crash loses at most one chunk."""

EPISODE_TABLES = ("episodes", "memory_entries", "memory_sources")
"""What recording episodes writes in bulk (its statistics are refreshed after it)."""

ROLE_SCHEDULE = LearningSchedule(distill=MergeConfig(gist=lesson_gist))
"""Role namespaces: the spec's schedule, with repeated lessons merged into one lineage."""


def _ledger(res: Resources, namespace: str) -> MemoryLedger:
    schedule = ROLE_SCHEDULE if namespace.startswith("role:") else LearningSchedule()
    return MemoryLedger(res.engine, seed=res.memory_seed, schedule=schedule)


@dataclass(frozen=True)
class DistilReport:
    """What distilling one namespace's due windows wrote."""

    namespace: str
    windows: int = 0
    patterns: int = 0
    promoted: tuple[str, ...] = ()
    confirmed: tuple[str, ...] = ()
    rejected: tuple[str, ...] = ()
    followed: tuple[str, ...] = ()
    """New versions of active rules that stayed active (counts updated)."""
    refused: int = 0
    written: tuple[str, ...] = ()
    """The pattern versions written (entry IDs)."""
    mlflow_run_id: str | None = None
    """The tracking run that records this batch of windows (None: nothing distilled)."""

    @classmethod
    def of(cls, namespace: str, reports: Sequence[DistillReport]) -> DistilReport:
        """Sum the per-window reports."""
        done = [r for r in reports if not r.already_done]
        return cls(
            namespace=namespace,
            windows=len(done),
            patterns=sum(len(r.written) for r in done),
            promoted=tuple(i for r in done for i in r.promoted),
            confirmed=tuple(i for r in done for i in r.confirmed),
            rejected=tuple(i for r in done for i in r.rejected),
            followed=tuple(i for r in done for i in r.followed),
            refused=sum(len(r.refused) for r in done),
            written=tuple(i for r in done for i in r.written),
        )


@dataclass(frozen=True)
class EpisodeReport:
    """What recording one role's reflected cases did."""

    role_id: str
    namespace: str
    recorded: int = 0
    first_episode: int | None = None
    stored: int = 0
    refused: int = 0
    credited: dict[str, int] = field(default_factory=dict)
    windows_closed: int = 0
    evolved: tuple[str, ...] = ()
    distilled: DistilReport | None = None


STAMP_CHUNK = 500
"""Entry IDs per `IN` list when a batch's versions are stamped with their run."""

VERSION_COLUMNS = (
    "entry_id, namespace, tier, state, text, support, confidence, wins, losses, outcome, "
    "quality, window_key, first_episode, created_episode"
)


def _traced(res: Resources, report: DistilReport, cycle_id: str | None) -> DistilReport:
    """Record a distillation batch's pattern and rule versions with the tracker.

    One tracking run per batch of windows (nested in the cycle's run when there is one),
    with the versions it wrote, promoted, confirmed, rejected or followed as a table, so a
    reviewer reaches a pattern or rule from the cycle that made it; each of those
    versions names the run (`memory_entries.mlflow_run_id`), so lineage links to it.
    """
    if report.windows == 0:
        return report
    ids = sorted(
        {*report.written, *report.promoted, *report.confirmed, *report.rejected, *report.followed}
    )
    query = sa.text(
        f"SELECT {VERSION_COLUMNS} FROM memory_entries WHERE entry_id IN :ids ORDER BY entry_id"
    ).bindparams(sa.bindparam("ids", expanding=True))
    with res.engine.connect() as conn:
        result = conn.execute(query, {"ids": ids}) if ids else None
        rows = [] if result is None else [tuple(r) for r in result]
    names = [c.strip() for c in VERSION_COLUMNS.split(",")]
    versions = pl.DataFrame(rows, schema=names, orient="row", infer_schema_length=None)
    counts = {
        "windows": float(report.windows),
        "pattern_versions": float(report.patterns),
        "rules_promoted": float(len(report.promoted)),
        "rules_confirmed": float(len(report.confirmed)),
        "rules_rejected": float(len(report.rejected)),
        "rules_followed": float(len(report.followed)),
        "refused": float(report.refused),
    }
    run_id = res.tracker.log_distillation(report.namespace, versions, counts, cycle_id)
    if run_id is not None and ids:
        stamp = sa.text(
            "UPDATE memory_entries SET mlflow_run_id = :run WHERE entry_id IN :ids"
        ).bindparams(sa.bindparam("ids", expanding=True))
        with res.engine.begin() as conn:
            for start in range(0, len(ids), STAMP_CHUNK):
                conn.execute(stamp, {"run": run_id, "ids": ids[start : start + STAMP_CHUNK]})
    return replace(report, mlflow_run_id=run_id)


def record_episodes(
    res: Resources,
    role_id: str,
    profile: str | None = None,
    chunk: int = CHUNK,
    cycle_id: str | None = None,
) -> EpisodeReport:
    """Record every reflected, unrecorded case of `role_id` as an episode of its namespace.

    Windows the recording closes are distilled on the way; that distillation is recorded
    with the tracker like the sweep's (`cycle_id` nests it in the cycle's run).
    """
    res.registry.get(role_id)
    namespace = role_namespace(role_id)
    ledger = _ledger(res, namespace)
    with role_lock(res.engine, role_id):
        report = _record_locked(res, ledger, role_id, namespace, profile, chunk)
    refresh_statistics(res.engine, EPISODE_TABLES, report.recorded)
    if report.distilled is None:
        return report
    return replace(report, distilled=_traced(res, report.distilled, cycle_id))


def _record_locked(
    res: Resources,
    ledger: MemoryLedger,
    role_id: str,
    namespace: str,
    profile: str | None,
    chunk: int,
) -> EpisodeReport:
    # Under the role's lock: the selection of unrecorded cases and their recording cannot
    # interleave with another recorder (or a reflection batch) of the same role.
    totals: dict[str, Any] = {"recorded": 0, "stored": 0, "refused": 0, "windows": 0}
    credited: dict[str, int] = {}
    evolved: list[str] = []
    distilled: list[DistillReport] = []
    first: int | None = None
    while True:
        with res.engine.connect() as conn:
            cases = select_unrecorded(conn, role_id, profile=profile or res.profile, limit=chunk)
        if cases.height == 0:
            break
        frame = episode_frame(cases, res.registry)
        inputs = [
            EpisodeInput(
                text=row["text"],
                outcome=row["outcome"],
                quality=row["quality"],
                tags=tuple(row["tags"]),
                policy=row["policy"],
                source_ids=(row["case_id"],),
                episode_id=f"ep-{row['case_id']}",
                case_id=row["case_id"],
                decision_id=row["decision_id"],
            )
            for row in frame.iter_rows(named=True)
        ]
        report = ledger.record_episodes(namespace, namespace, inputs, task_family="trade_decision")
        first = report.first_episode if first is None else first
        totals["recorded"] += report.episodes
        totals["stored"] += report.stored
        totals["refused"] += len(report.refused)
        totals["windows"] += len(report.windows_closed)
        for policy, n in report.bandit_updates.items():
            credited[policy] = credited.get(policy, 0) + n
        evolved += report.evolved
        distilled += report.distilled
        if cases.height < chunk:
            break
    return EpisodeReport(
        role_id=role_id,
        namespace=namespace,
        recorded=totals["recorded"],
        first_episode=first,
        stored=totals["stored"],
        refused=totals["refused"],
        credited=credited,
        windows_closed=totals["windows"],
        evolved=tuple(evolved),
        distilled=DistilReport.of(namespace, distilled) if distilled else None,
    )


def namespaces_due(res: Resources) -> tuple[str, ...]:
    """Every namespace with at least one completed, undistilled window."""
    return tuple(MemoryLedger(res.engine, seed=res.memory_seed).namespaces_due())


def distil(res: Resources, namespace: str, cycle_id: str | None = None) -> DistilReport:
    """Distil every due window of one namespace (idempotent by window key).

    Recording distils the windows it closes, so this is the sweep for windows recorded
    without distillation. Role namespaces merge repeated lessons into one pattern
    lineage each; any other namespace (agents recording their own episodes) keeps
    window-local patterns.
    """
    ledger = _ledger(res, namespace)
    reports = ledger.store.distill(
        namespace, ledger.due_windows(namespace), ledger.schedule.distill
    )
    return _traced(res, DistilReport.of(namespace, reports), cycle_id)


def record_agent_episodes(
    res: Resources,
    agent_id: str,
    namespace: str,
    episodes: Sequence[Mapping[str, Any]],
    distill: bool = True,
) -> RecordReport:
    """Record an agent's own settled episodes (text, outcome, quality, tags, policy).

    `distill=False` leaves the windows the batch closes to the `distil` stage.
    """
    inputs = [
        EpisodeInput(
            text=str(e["text"]),
            outcome=float(e["outcome"]),
            quality=float(e["quality"]),
            tags=tuple(e.get("tags", ())),
            policy=e.get("policy"),
            source_ids=tuple(e.get("source_ids", ())),
        )
        for e in episodes
    ]
    return _ledger(res, namespace).record_episodes(agent_id, namespace, inputs, distill=distill)
