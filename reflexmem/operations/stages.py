"""Every stage an entry point may run, in one list: its title and how often it may retry.

The Prefect tasks (`tasks/stages.py`) wrap exactly these operations with these retry
counts, and the demo titles each stage from here, so adding a stage means adding one
`Stage` here (and calling it from a sequence). A retry is safe because every operation
is idempotent by its own selection and writes in its own transaction(s); a stage with
`retries=0` (an agent's own episodes, the benchmark's parts) is one a caller re-runs
knowingly. `ledger_writer` says whether the stage writes the ledger: on SQLite, with its
single writer, a runner runs such stages one after the other rather than side by side.
A benchmark's stages are not in `STAGES`: its operations module `register`s them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reflexmem.operations import (
    backfill,
    cycle_runs,
    evaluation,
    intake,
    maturation,
    memory,
    reflection,
    skill_lifecycle,
    skills,
    structure_audit,
    structures,
)


@dataclass(frozen=True)
class Stage:
    """One operation as entry points see it."""

    op: Callable[..., Any]
    title: str
    retries: int
    ledger_writer: bool = True


STAGES: tuple[Stage, ...] = (
    Stage(cycle_runs.begin_cycle, "open the cycle's parent tracking run", 2),
    Stage(cycle_runs.end_cycle, "close the cycle's parent tracking run", 2),
    Stage(intake.ingest_drop, "ingest the drop folder", 1),
    Stage(intake.admit, "admission (Great Expectations suite `admission`, fail-closed)", 2),
    Stage(maturation.plan, "plan: the cycle's clock is a bar time, never the wall clock", 2),
    Stage(maturation.settle, "settle open positions from fills and market bars", 2),
    Stage(
        maturation.mature, "maturity: due, settled and well measured, or pending with a reason", 2
    ),
    Stage(evaluation.evaluate, "evaluation runs (one MLflow run per batch)", 2),
    Stage(evaluation.replay, "replay of evaluated cases under another profile version", 1),
    Stage(evaluation.promote, "promotion of the first runs to primary", 2),
    Stage(
        reflection.reflect,
        "reflection per role (rules L0/L1, serialized per role, no network)",
        1,
    ),
    Stage(memory.record_episodes, "episodes: every reflected case enters its role's memory", 2),
    Stage(memory.namespaces_due, "namespaces with a window of ten new episodes", 2),
    Stage(memory.distil, "distillation: lessons merge; conditions are tested on outcomes", 2),
    Stage(memory.record_agent_episodes, "an agent's own settled episodes and its bandit", 0),
    Stage(
        skills.generate_candidates,
        "skill candidates: lessons -> L0/L1/L2 checks",
        2,
    ),
    Stage(skills.check_decisions, "pre-decision checks: usable skills judge the new decisions", 2),
    Stage(
        skill_lifecycle.advance_skills, "shadow evaluation: evaluation, replay, shadow, rollout", 1
    ),
    Stage(skill_lifecycle.audit_skills, "audit: sample audits and drift of active skills", 1),
    Stage(backfill.finished_clocks, "backfill: the clocks already finished", 2),
    Stage(backfill.finish_clock, "backfill: the clock is on record", 2),
    Stage(
        structures.prepare_structures,
        "structures: the scope's active structure (all-shared the first time)",
        1,
    ),
    Stage(structures.search_structures, "structures: the selection loop from the active one", 0),
    Stage(structures.control_and_test, "structures: both controls, then the final test", 0),
    Stage(structures.weigh_edges, "structures: each edge of the chosen one on the final test", 0),
    Stage(structures.store_search, "structures: the search, its archive, the winner version", 1),
    Stage(structures.register_winner, "structures: the winner in the MLflow registry", 1),
    Stage(structures.activate_winner, "structures: the winner becomes the active bundle", 1),
    Stage(
        structure_audit.audit_structures,
        "structures: drift of active bundles; quarantine and roll back the drifted ones",
        1,
    ),
)

_BY_OP: dict[Callable[..., Any], Stage] = {s.op: s for s in STAGES}


def register(stage: Stage) -> Stage:
    """Add a stage kept out of the production list (a benchmark's part); returns it.

    A benchmark's operations module registers its own stages when it is imported, so the
    production stages, their tasks and the flows that run them never load benchmark code.
    """
    _BY_OP[stage.op] = stage
    return stage


def stage_of(op: Callable[..., Any]) -> Stage:
    """The stage of `op`; an operation missing from the list is a programming error."""
    try:
        return _BY_OP[op]
    except KeyError:
        raise KeyError(f"{op.__module__}.{op.__name__} is not in the stage list") from None
