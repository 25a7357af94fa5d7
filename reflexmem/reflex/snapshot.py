"""The skill versions an episode pins: read once when it starts, never re-read during it.

`load_snapshot` returns every registered version with the state it has now. A router
decides an episode against one snapshot; a transition committed while that episode
runs changes the next snapshot, not this one, so a new version applies from the next
episode and the episode's row names exactly the version that decided it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.lifecycle import USABLE_STATES
from reflexmem.reflex.skills import SkillSpec, load_yaml
from reflexmem.reflex.versions import VERSIONS


@dataclass(frozen=True)
class PinnedSkill:
    """A version as an episode sees it: the contract plus the state it had at pinning."""

    spec: SkillSpec
    state: SkillState
    rollout_fraction: float | None

    @property
    def key(self) -> str:
        """`skill_id@version`."""
        return self.spec.key


@dataclass(frozen=True)
class SkillSnapshot:
    """Every registered version with its state, taken once per episode (or batch)."""

    skills: tuple[PinnedSkill, ...]
    taken_at: datetime

    def family(self, task_family: str) -> tuple[PinnedSkill, ...]:
        """Versions of one task family, in any state."""
        return tuple(s for s in self.skills if s.spec.task_family == task_family)

    def usable(self, task_family: str) -> tuple[PinnedSkill, ...]:
        """Versions that may decide (limited ones only inside their rollout)."""
        return tuple(s for s in self.family(task_family) if s.state in USABLE_STATES)


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> dict[str, Any]:
    """A version's YAML parsed once per process (a registered version is never edited)."""
    return dict(load_yaml(text))


def load_snapshot(
    conn: sa.Connection, *, task_family: str | None = None, now: datetime | None = None
) -> SkillSnapshot:
    """Every version (of one family, if given) with its current state: what an episode pins."""
    query = sa.select(
        VERSIONS.c.source_yaml,
        VERSIONS.c.source_file,
        VERSIONS.c.state,
        VERSIONS.c.rollout_fraction,
    ).order_by(VERSIONS.c.skill_id, VERSIONS.c.version)
    if task_family is not None:
        query = query.where(VERSIONS.c.task_family == task_family)
    pinned = []
    for row in conn.execute(query):
        raw = dict(_parsed(row.source_yaml))
        raw["state"] = row.state
        spec = SkillSpec(raw=raw, source=row.source_file, source_yaml=row.source_yaml)
        pinned.append(PinnedSkill(spec, SkillState(row.state), row.rollout_fraction))
    return SkillSnapshot(tuple(pinned), now or datetime.now(UTC))
