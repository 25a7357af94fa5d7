"""Episode helpers of the REFLEX integration tests: an active skill, a task, a run, its row.

Shared by `test_reflex_episodes_db.py` (episodes through the executor) and
`test_reflex_review_db.py` (the review queue, its CLI, and Experiment A).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from reflexmem.executor import ToolExecutor
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.episode import EpisodeResult, run_episode
from reflexmem.reflex.lifecycle import EvidenceKind
from reflexmem.reflex.router import Task
from reflexmem.reflex.skills import SkillSpec
from reflexmem.reflex.snapshot import load_snapshot
from reflexmem.reflex.versions import register_skill, transition
from tests.integration.reflex_data import ok

K = EvidenceKind
TEN_Q = {
    "doc_id": "d1",
    "form_type": "10-Q",
    "title": "Quarterly report",
    "body": "Revenue for the quarter rose.",
    "source": "sec",
}


def activate(conn: sa.Connection, skill: SkillSpec) -> None:
    register_skill(conn, skill)
    transition(conn, skill.skill_id, 1, SkillState.VALIDATING, [ok(K.EVALUATION)], actor="t")
    transition(
        conn, skill.skill_id, 1, SkillState.LIMITED, [ok(K.REPLAY)], actor="t", rollout_fraction=0.1
    )
    transition(conn, skill.skill_id, 1, SkillState.ACTIVE, [ok(K.SHADOW), ok(K.ROLLOUT)], actor="t")


def task(episode_id: str = "ep-1", **kw: Any) -> Task:
    values: dict[str, Any] = {
        "episode_id": episode_id,
        "task_family": "classify_filing",
        "environment_version": "filings-v1",
        "observation": TEN_Q,
        "at": datetime(2026, 1, 5, tzinfo=UTC),
    }
    values.update(kw)
    return Task(**values)


def run(engine: sa.Engine, executor: ToolExecutor, t: Task) -> EpisodeResult:
    with engine.begin() as conn:
        snapshot = load_snapshot(conn)
        return run_episode(conn, t, snapshot, executor)


def episode(engine: sa.Engine, episode_id: str) -> dict[str, Any]:
    with engine.connect() as conn:
        row = (
            conn.execute(sa.text("SELECT * FROM episodes WHERE episode_id = :e"), {"e": episode_id})
            .mappings()
            .one()
        )
    return dict(row)
