"""`reflexmem bench skills`: candidate generation and shadow evaluation over N episodes.

Setup (not timed): a D-full decision stream large enough for about N reflected
`trade_decision` episodes is ingested into a scratch ledger and taken through the
learning cycle up to memory (intake, maturation, reflection, episodes), with tracking
off. Timed, through the operations, on two clocks: at 60 % of the stream's decision
times, `generate_candidates`, `check_decisions` and `advance_skills` (evaluation on the
held-apart split, replay of past decisions: candidate -> validating -> limited); at the
end, `check_decisions` (the limited versions check the later decisions in their
rollout) and `advance_skills` (shadow beside the active checks and rollout -> active
or rejected). Skill tracking is off, so the figure is the ledger and evaluation work.

Floor, in the same run: the same episodes read with their decisions and lessons and
grouped by role and lesson with one plain SQL query: what any generation must at least
do. `evaluations_per_candidate` counts the evidence items (evaluation, replay, shadow,
rollout) computed per registered candidate.
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from apps.bench.support import peak_rss_mb, scratch_engine
from reflexmem.ledger.sqlio import to_utc
from reflexmem.operations import intake, skill_lifecycle, skills
from reflexmem.operations.cycle import run_intake, run_learning
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.prices.panel import load_dfull
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream

EPISODE_YIELD = 0.45
"""Reflected episodes per generated decision (admission, maturity, measurement)."""
FLOOR_SQL = """
SELECT d.role_id, rc.lesson, COUNT(*)
FROM episodes e JOIN role_cases rc ON rc.case_id = e.case_id
JOIN trading_decisions d ON d.decision_id = e.decision_id
WHERE e.task_family = 'trade_decision' AND e.case_id IS NOT NULL
GROUP BY d.role_id, rc.lesson
"""


def run_bench(settings: Settings, *, episodes: int, backend: str = "sqlite") -> dict[str, Any]:
    """Build the ledger, time generation + shadow evaluation, time the floor; the summary."""
    from adapters.resources import build_resources

    if episodes < 100:
        raise ValueError("episodes must be >= 100")
    decisions = math.ceil(episodes / EPISODE_YIELD)
    with tempfile.TemporaryDirectory(prefix="reflex-bench-skills-") as tmp:
        workdir = Path(tmp)
        with scratch_engine(settings, backend, workdir) as engine:
            url = engine.url.render_as_string(hide_password=False)
            scratch = Settings(
                home=workdir / "home",
                database_url=url,
                mlflow_tracking_uri=f"sqlite:///{workdir / 'mlflow.sqlite'}",
                artifact_root=workdir / "artifacts",
            )
            from reflexmem.operations.resources import NullTracker
            from reflexmem.reflex.tracking import NullSkillTracking

            res = replace(
                build_resources(scratch), tracker=NullTracker(), skill_tracker=NullSkillTracking()
            )
            t0 = time.perf_counter()
            intake.ingest(res, [write_dfull_bars(workdir / "bars")], "bars")
            files = write_stream(generate(load_dfull(), decisions, seed=11), workdir / "stream")
            intake.ingest(res, files)
            runner = DirectRunner(res)
            run_intake(runner)
            plan = run_learning(runner).maturation.plan
            setup_s = time.perf_counter() - t0
            with engine.connect() as conn:
                n = int(
                    conn.execute(
                        sa.text("SELECT COUNT(*) FROM episodes WHERE case_id IS NOT NULL")
                    ).scalar_one()
                )
                times = conn.execute(
                    sa.text("SELECT MIN(decided_at), MAX(decided_at) FROM trading_decisions")
                ).one()
            first, last = (to_utc(_ts(t)) for t in times)
            middle = first + (last - first) * 0.6
            end = plan.as_of or last
            stages: dict[str, float] = {}

            def timed(name: str, op: Any, when: datetime) -> Any:
                start = time.perf_counter()
                out = op(res, as_of=when)
                stages[name] = round(time.perf_counter() - start, 3)
                return out

            t0 = time.perf_counter()
            generated = timed("generate_candidates", skills.generate_candidates, middle)
            timed("check_decisions_early", skills.check_decisions, middle)
            early = timed("advance_skills_early", skill_lifecycle.advance_skills, middle)
            checked = timed("check_decisions_late", skills.check_decisions, end)
            late = timed("advance_skills_late", skill_lifecycle.advance_skills, end)
            wall = time.perf_counter() - t0
            t0 = time.perf_counter()
            with engine.connect() as conn:
                groups = conn.execute(sa.text(FLOOR_SQL)).all()
            floor_s = time.perf_counter() - t0
            res.engine.dispose()
    moves = [*early.moves, *late.moves]
    evaluations = sum(len(m.evidence) for m in moves)
    candidates = len(generated.registered)
    return {
        "episodes": n,
        "episodes_asked": episodes,
        "decisions": decisions,
        "backend": backend,
        "setup_seconds": round(setup_s, 2),
        "wall_seconds": round(wall, 3),
        "stage_seconds": stages,
        "candidates": candidates,
        "evaluations": evaluations,
        "evaluations_per_candidate": round(evaluations / candidates, 2) if candidates else 0.0,
        "moves": {m.to: sum(1 for x in moves if x.to == m.to) for m in moves},
        "decisions_checked_late": checked.decisions,
        "check_episodes_late": checked.episodes,
        "episodes_per_second": round(n / wall, 1) if wall else None,
        "floor_read_and_group_seconds": round(floor_s, 3),
        "floor_groups": len(groups),
        "peak_rss_mb": peak_rss_mb(),
    }


def _ts(value: object) -> datetime:
    if isinstance(value, datetime):
        return value
    return datetime.fromisoformat(str(value))
