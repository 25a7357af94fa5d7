"""The learning cycle, written once: every entry point runs this sequence of stages.

`run_cycle` names the stages in order and what each one is given; *how* a stage runs
is the runner's business. The scheduled flows run parts of the cycle (`run_intake`,
`run_maturation`, `run_reflection`, `run_memory`, and the three parts of `run_skills`:
`run_generation`, `run_shadow`, `run_audit`), and the cycle is those parts in order, so
each part is written once too; `run_learning` (maturation, reflection, memory) is what a
benchmark or a test runs on a store that already holds admitted decisions. A
`DirectRunner` (`runner.py`) calls the operation in this process (the CLI, the demo, the
benchmarks and the tests); the Prefect runner (`tasks/runner.py`) calls the task that
wraps the same operation, so the direct path and the flow cannot drift apart: there is
no second copy of the sequence to drift.

Every stage is idempotent by its own selection (only unjudged executions are admitted,
only open positions settled, only unevaluated cases evaluated, only decisions without a
primary run promoted, only offerable cases reflected, only unrecorded cases recorded,
only due windows distilled, only lessons not generalised yet turned into candidates,
only decisions after the last check checked, only versions with new evidence moved),
so a cycle that crashed part way is simply run again.

Each cycle, and each scheduled part run on its own, is one parent tracking run
(`cycle_runs`): the sequence makes the `cycle_id`, opens the run, hands the ID to every
stage that tracks, and closes the run with its counts, or FAILED if a stage raised.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, is_dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from reflexmem.admission.admit import AdmissionResult
from reflexmem.maturation import MaturityReport, SettleReport
from reflexmem.operations.cycle_runs import CycleStart, begin_cycle, end_cycle, new_cycle_id
from reflexmem.operations.evaluation import EvaluationReport, PromotionReport, evaluate, promote
from reflexmem.operations.intake import DropReport, admit, ingest_drop
from reflexmem.operations.maturation import CyclePlan, mature, plan, settle
from reflexmem.operations.memory import (
    DistilReport,
    EpisodeReport,
    distil,
    namespaces_due,
    record_episodes,
)
from reflexmem.operations.reflection import reflect
from reflexmem.operations.runner import StageRunner
from reflexmem.operations.skill_lifecycle import LifecycleReport, advance_skills, audit_skills
from reflexmem.operations.skills import (
    CheckReport,
    GenerationReport,
    check_decisions,
    generate_candidates,
)
from reflexmem.reflection.batch import RoleReport

R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True)
class CycleParams:
    """What one cycle run is asked to do; everything else comes from the resources."""

    as_of: datetime | None = None
    profile: str | None = None
    version: int | None = None
    roles: tuple[str, ...] | None = None
    drop: Path | None = None


@dataclass(frozen=True)
class CycleReport:
    """Every stage's report, in the order the stages ran."""

    drop: DropReport | None
    admission: AdmissionResult
    maturation: MaturationReport
    reflection: tuple[RoleReport, ...]
    memory: MemoryReport
    skills: SkillsReport
    cycle: CycleStart | None = None

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (timestamps as ISO strings)."""
        data: dict[str, Any] = plain(self)
        return data


@dataclass(frozen=True)
class MaturationReport:
    """The maturation part of a cycle: settle, mature, evaluate, promote."""

    plan: CyclePlan
    settle: SettleReport
    maturity: MaturityReport
    evaluation: EvaluationReport
    promotion: PromotionReport
    cycle: CycleStart | None = None


@dataclass(frozen=True)
class MemoryReport:
    """The memory part of a cycle: episodes recorded per role, windows distilled."""

    episodes: tuple[EpisodeReport, ...]
    distillation: tuple[DistilReport, ...]

    @property
    def distilled(self) -> tuple[DistilReport, ...]:
        """Every distillation of the part: inside the episodes stage, then the sweep."""
        inside = tuple(e.distilled for e in self.episodes if e.distilled is not None)
        return inside + self.distillation


@dataclass(frozen=True)
class LearningReport:
    """Maturation, reflection and memory at one clock: the cycle between intake and skills."""

    maturation: MaturationReport
    reflection: tuple[RoleReport, ...]
    memory: MemoryReport


@dataclass(frozen=True)
class ShadowReport:
    """The shadow-evaluation part: new decisions checked, then versions moved on evidence."""

    checks: CheckReport
    lifecycle: LifecycleReport


@dataclass(frozen=True)
class SkillsReport:
    """The skills part of a cycle: candidates generated, shadow evaluation, audits."""

    generation: GenerationReport
    shadow: ShadowReport
    audit: LifecycleReport


def run_intake(
    runner: StageRunner, drop: Path | None = None
) -> tuple[DropReport | None, AdmissionResult]:
    """Ingest a drop folder (when given), then admit: what the `admission` flow runs."""
    dropped = runner.run(ingest_drop, folder=drop) if drop is not None else None
    return dropped, runner.run(admit)


def in_cycle(
    runner: StageRunner,
    name: str,
    cycle_id: str | None,
    body: Callable[[str], T],
    counts: Callable[[T], dict[str, float]],
) -> tuple[CycleStart | None, T]:
    """Run `body(cycle_id)` inside a cycle's tracking run, or nested in the given cycle.

    With a `cycle_id` the caller's cycle already has its run; otherwise a new cycle
    named `name` is opened, and closed with `counts(result)`, or FAILED if `body` raises
    (a failure to close never hides the stage's own error).
    """
    if cycle_id is not None:
        return None, body(cycle_id)
    start = runner.run(begin_cycle, cycle_id=new_cycle_id(), name=name)
    try:
        result = body(start.cycle_id)
    except BaseException:
        with contextlib.suppress(Exception):
            runner.run(end_cycle, cycle_id=start.cycle_id, status="FAILED")
        raise
    runner.run(end_cycle, cycle_id=start.cycle_id, status="FINISHED", summary=counts(result))
    return start, result


def _maturation_counts(m: MaturationReport) -> dict[str, float]:
    return {
        "settled": float(m.settle.settled),
        "matured": float(m.maturity.matured),
        "evaluated": float(m.evaluation.runs),
        "promoted": float(m.promotion.promoted),
    }


def _reflection_counts(reports: Sequence[RoleReport]) -> dict[str, float]:
    return {
        "reflected": float(sum(r.reflected for r in reports)),
        "lessons": float(sum(r.lessons for r in reports)),
        "reflection_failed": float(sum(r.failed for r in reports)),
        "deferred": float(sum(r.deferred for r in reports)),
    }


def cycle_counts(c: CycleReport) -> dict[str, float]:
    """What a cycle did, as its tracking run and the `daily_cycle` artifact count it."""
    return {
        "admitted": float(c.admission.admitted),
        "quarantined": float(c.admission.quarantined),
        **_learning_counts(LearningReport(c.maturation, c.reflection, c.memory)),
        "skill_candidates": float(len(c.skills.generation.registered)),
        "decisions_checked": float(c.skills.shadow.checks.decisions),
        "skill_moves": float(len(c.skills.shadow.lifecycle.moves) + len(c.skills.audit.moves)),
    }


def run_maturation(
    runner: StageRunner, params: CycleParams | None = None, cycle_id: str | None = None
) -> MaturationReport:
    """Fix the clock, settle, mature, evaluate, promote: what `maturation_check` runs."""
    p = params or CycleParams()

    def body(cid: str) -> MaturationReport:
        cycle = runner.run(plan, as_of=p.as_of, roles=p.roles)
        settled = runner.run(settle, as_of=cycle.as_of)
        maturity = runner.run(mature, as_of=cycle.as_of, profile=p.profile)
        evaluated = runner.run(evaluate, profile=p.profile, version=p.version, cycle_id=cid)
        promoted = runner.run(
            promote, profile=p.profile, version=p.version, only_unpromoted=True, cycle_id=cid
        )
        return MaturationReport(cycle, settled, maturity, evaluated, promoted)

    start, report = in_cycle(runner, "maturation", cycle_id, body, _maturation_counts)
    return report if start is None else replace(report, cycle=start)


def run_reflection(
    runner: StageRunner,
    roles: Sequence[str],
    profile: str | None = None,
    cycle_id: str | None = None,
) -> tuple[RoleReport, ...]:
    """One reflection batch per role (side by side on a runner that can): `reflection_batch`."""

    def body(cid: str) -> tuple[RoleReport, ...]:
        return tuple(runner.map(reflect, "role_id", roles, profile=profile, cycle_id=cid))

    return in_cycle(runner, "reflection", cycle_id, body, _reflection_counts)[1]


def run_memory(
    runner: StageRunner,
    roles: Sequence[str],
    profile: str | None = None,
    cycle_id: str | None = None,
) -> MemoryReport:
    """Record reflected cases as episodes, then distil every due window: `distillation`."""
    recorded = runner.map(record_episodes, "role_id", roles, profile=profile, cycle_id=cycle_id)
    due = runner.run(namespaces_due)
    distilled = runner.map(distil, "namespace", due, cycle_id=cycle_id)
    return MemoryReport(tuple(recorded), tuple(distilled))


def _learning_counts(report: LearningReport) -> dict[str, float]:
    return {
        **_maturation_counts(report.maturation),
        **_reflection_counts(report.reflection),
        "episodes": float(sum(e.recorded for e in report.memory.episodes)),
        "windows_distilled": float(sum(d.windows for d in report.memory.distilled)),
        "pattern_versions": float(sum(d.patterns for d in report.memory.distilled)),
        "rules_promoted": float(sum(len(d.promoted) for d in report.memory.distilled)),
        "rules_confirmed": float(sum(len(d.confirmed) for d in report.memory.distilled)),
        "rules_rejected": float(sum(len(d.rejected) for d in report.memory.distilled)),
        "rules_followed": float(sum(len(d.followed) for d in report.memory.distilled)),
    }


def run_learning(
    runner: StageRunner, params: CycleParams | None = None, cycle_id: str | None = None
) -> LearningReport:
    """Maturation, then reflection and memory for the roles the plan chose, at its clock.

    What a store that already holds admitted decisions needs before its skills are
    judged; the cycle runs it between intake and skills.
    """
    p = params or CycleParams()

    def body(cid: str) -> LearningReport:
        maturation = run_maturation(runner, p, cycle_id=cid)
        reflected = run_reflection(runner, maturation.plan.roles, p.profile, cycle_id=cid)
        memory = run_memory(runner, maturation.plan.roles, p.profile, cycle_id=cid)
        return LearningReport(maturation, reflected, memory)

    return in_cycle(runner, "learning", cycle_id, body, _learning_counts)[1]


def run_generation(runner: StageRunner, as_of: datetime | None = None) -> GenerationReport:
    """Cluster the reflected episodes into skill candidates: `candidate_generation`."""
    return runner.run(generate_candidates, as_of=as_of)


def run_shadow(runner: StageRunner, as_of: datetime | None = None) -> ShadowReport:
    """Check new decisions with the usable skills, then move versions: `shadow_evaluation`."""
    checks = runner.run(check_decisions, as_of=as_of)
    return ShadowReport(checks, runner.run(advance_skills, as_of=as_of))


def run_audit(runner: StageRunner, as_of: datetime | None = None) -> LifecycleReport:
    """Sample audits and drift of active skills, quarantine, revalidation: `audit`."""
    return runner.run(audit_skills, as_of=as_of)


def run_skills(runner: StageRunner, as_of: datetime | None = None) -> SkillsReport:
    """Candidate generation, shadow evaluation, audit, in that order, at one clock.

    The checks of the window's decisions run with the versions as they were during it,
    so the audit (which may quarantine) comes last. A version the audit revalidates is
    taken on by the next shadow evaluation.
    """
    generated = run_generation(runner, as_of)
    shadow = run_shadow(runner, as_of)
    return SkillsReport(generated, shadow, run_audit(runner, as_of))


def run_cycle(runner: StageRunner, params: CycleParams | None = None) -> CycleReport:
    """Run every stage of the cycle once, in order, through `runner`: `daily_cycle`."""
    p = params or CycleParams()

    def body(cid: str) -> CycleReport:
        dropped, admission = run_intake(runner, p.drop)
        learned = run_learning(runner, p, cycle_id=cid)
        return CycleReport(
            drop=dropped,
            admission=admission,
            maturation=learned.maturation,
            reflection=learned.reflection,
            memory=learned.memory,
            skills=run_skills(runner, learned.maturation.plan.as_of),
        )

    start, report = in_cycle(runner, "cycle", None, body, cycle_counts)
    return replace(report, cycle=start)


def plain(value: Any) -> Any:
    """Reports as JSON-able data: dataclasses to dicts, timestamps and paths to strings."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: plain(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    return value
