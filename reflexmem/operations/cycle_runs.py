"""The parent tracking run of one cycle: every batch of the cycle is nested under it.

A cycle (the whole `run_cycle`, or one scheduled part of it) gets a `cycle_id` from the
sequence that runs it; `begin_cycle` opens the cycle's run, the stages that track
(evaluate, promote, reflect) receive the same `cycle_id` and the tracker nests their runs
under it, and `end_cycle` closes it with the cycle's counts. The ID is made by the
sequence, not by the stage, so a retried `begin_cycle` finds the run it already opened,
and the direct runner and a Prefect flow (whose tasks may run in other processes)
reach the same parent by the same key.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from reflexmem.operations.resources import Resources


@dataclass(frozen=True)
class CycleStart:
    """A cycle's ID and its parent tracking run (None without a tracker)."""

    cycle_id: str
    name: str
    mlflow_run_id: str | None


def new_cycle_id() -> str:
    """A fresh cycle ID; cycles are events, so IDs never repeat."""
    return f"cyc-{uuid.uuid4().hex[:20]}"


def begin_cycle(res: Resources, cycle_id: str, name: str = "cycle") -> CycleStart:
    """Open the parent run of cycle `cycle_id` (idempotent: a retry finds it)."""
    return CycleStart(cycle_id, name, res.tracker.begin_cycle(cycle_id, name))


def end_cycle(
    res: Resources,
    cycle_id: str,
    status: str = "FINISHED",
    summary: Mapping[str, float] | None = None,
) -> None:
    """Close the cycle's run: FINISHED with its counts, or FAILED."""
    if status not in ("FINISHED", "FAILED"):
        raise ValueError(f"cycle status must be FINISHED or FAILED, not {status!r}")
    res.tracker.end_cycle(cycle_id, status, dict(summary or {}))
