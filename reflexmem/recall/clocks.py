"""Valid and recorded time of the rows a lineage or an audit shows, and the filters on them.

Recall is bi-temporal (`constraints`): `as_of` is valid time, the cycle clock at which
facts were known; `known_at` is recorded time, the wall clock at which rows were
written. `reflexmem lineage` and `reflexmem audit` answer the same two questions about
the chain of one decision and the cases behind the doctor's counts, so they use the
same formulas rather than new ones:

* a case and its lesson are valid once decided and matured (`constraints.valid_time`:
  `matured_at`, else the recorded reflection); the case is recorded at its admission,
  the lesson at its reflection;
* a pattern or rule version is valid once every episode of its namespace up to the one
  that made it was valid (`memory_hits.entry_valid_times`, the episode clock recall
  maps T to), recorded at its `created_at`;
* a skill version is valid from the cycle clock it was registered at (`created_at`),
  recorded at `recorded_at` (migration 0020);
* a structure version is valid from the cycle clock it was written at (`valid_at`,
  migration 0020), recorded at its `created_at`;
* a quarantine is an act of the system with no market time of its own: valid when
  recorded.

A missing valid time (a case not matured yet) is never valid "by T": `--as-of` leaves
such a row out; without either option every row shows, as before.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import sqlalchemy as sa

from reflexmem.ledger.memory_models import MemoryEntryRow
from reflexmem.ledger.models import Quarantine
from reflexmem.ledger.reflex_models import SkillVersion
from reflexmem.ledger.structure_models import StructureVersion
from reflexmem.recall.constraints import _aware, _utc, cr, rc, valid_time
from reflexmem.recall.memory_hits import entry_valid_times

me = cast(sa.Table, MemoryEntryRow.__table__)
sv = cast(sa.Table, SkillVersion.__table__)
stv = cast(sa.Table, StructureVersion.__table__)
qt = cast(sa.Table, Quarantine.__table__)

Times = tuple[datetime | None, datetime | None]
"""(valid_at, recorded_at) of one row."""


def _opt(value: Any) -> datetime | None:
    return None if value is None else _aware(value)


def as_times(valid: Any, recorded: Any) -> Times:
    """(valid_at, recorded_at) from two fetched stamps, UTC-aware (naive SQLite ones too)."""
    return _opt(valid), _opt(recorded)


@dataclass(frozen=True, slots=True)
class Clocks:
    """The two clocks a lineage or audit is asked at; both None: no filter."""

    as_of: datetime | None = None
    known_at: datetime | None = None

    def __post_init__(self) -> None:
        for name in ("as_of", "known_at"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, _utc(value))

    def admits(self, times: Times) -> bool:
        """Valid by `as_of` and recorded by `known_at` (a missing time admits nothing)."""
        valid, recorded = times
        if self.as_of is not None and (valid is None or valid > self.as_of):
            return False
        return not (self.known_at is not None and (recorded is None or recorded > self.known_at))


def skill_valid_time() -> sa.ColumnElement[Any]:
    """A skill version's valid time: the cycle clock it was registered at."""
    return sv.c.created_at


def skill_recorded_time() -> sa.ColumnElement[Any]:
    """A skill version's recorded time (rows without the 0020 stamp: their `created_at`)."""
    return sa.func.coalesce(sv.c.recorded_at, sv.c.created_at)


def structure_valid_time() -> sa.ColumnElement[Any]:
    """A structure version's valid time (rows without the 0020 stamp: their record)."""
    return sa.func.coalesce(stv.c.valid_at, stv.c.created_at)


def structure_recorded_time() -> sa.ColumnElement[Any]:
    """A structure version's recorded time: the wall clock of its write."""
    return stv.c.created_at


@dataclass(frozen=True, slots=True)
class CaseTimes:
    """A case's clocks: decided, valid (matured), admitted, reflected."""

    decided_at: datetime
    valid_at: datetime | None
    admitted_at: datetime | None
    reflected_at: datetime | None

    @property
    def case(self) -> Times:
        """The case step: valid once matured, recorded at its admission."""
        return self.valid_at, self.admitted_at

    @property
    def lesson(self) -> Times:
        """The lesson step: valid once matured, recorded at its reflection."""
        return self.valid_at, self.reflected_at

    def admits(self, clocks: Clocks, times: Times) -> bool:
        """`clocks.admits(times)`, and decided by `as_of` (recall's rule too)."""
        decided_ok = clocks.as_of is None or self.decided_at <= clocks.as_of
        return decided_ok and clocks.admits(times)


def case_times(conn: sa.Connection, case_ids: Collection[str]) -> dict[str, CaseTimes]:
    """The clocks of some cases, by case ID."""
    if not case_ids:
        return {}
    rows = conn.execute(
        sa.select(rc.c.case_id, rc.c.decided_at, valid_time(), rc.c.admitted_at, cr.c.reflected_at)
        .select_from(rc.outerjoin(cr, cr.c.case_id == rc.c.case_id))
        .where(rc.c.case_id.in_(sorted(set(case_ids))))
    )
    return {str(c): CaseTimes(_aware(d), _opt(v), _opt(a), _opt(r)) for c, d, v, a, r in rows}


def entry_times(conn: sa.Connection, entry_ids: Collection[str]) -> dict[str, Times]:
    """(valid_at, recorded_at) of some memory entries (pattern and rule versions)."""
    if not entry_ids:
        return {}
    rows = list(
        conn.execute(
            sa.select(me.c.entry_id, me.c.namespace, me.c.created_episode, me.c.created_at).where(
                me.c.entry_id.in_(sorted(set(entry_ids)))
            )
        )
    )
    by_ns: dict[str, set[int]] = {}
    for _, ns, episode, _ in rows:
        by_ns.setdefault(str(ns), set()).add(int(episode))
    valid = {ns: entry_valid_times(conn, ns, eps) for ns, eps in by_ns.items()}
    return {str(e): (valid[str(ns)].get(int(ep), _aware(at)), _aware(at)) for e, ns, ep, at in rows}


def case_scope(clocks: Clocks) -> list[sa.ColumnElement[bool]]:
    """Predicates over `role_cases` keeping the cases valid and recorded by the clocks."""
    preds: list[sa.ColumnElement[bool]] = []
    if clocks.as_of is not None:
        valid = (
            sa.select(rc.c.case_id)
            .select_from(rc.outerjoin(cr, cr.c.case_id == rc.c.case_id))
            .where(rc.c.decided_at <= clocks.as_of, valid_time() <= clocks.as_of)
            .correlate(None)
        )
        preds.append(rc.c.case_id.in_(valid))
    if clocks.known_at is not None:
        preds.append(rc.c.admitted_at <= clocks.known_at)
    return preds


def quarantine_scope(clocks: Clocks) -> list[sa.ColumnElement[bool]]:
    """Predicates over `quarantine`: valid when recorded, so both clocks test `created_at`."""
    return [qt.c.created_at <= t for t in (clocks.as_of, clocks.known_at) if t is not None]


def with_times(conn: sa.Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Audit rows with their `valid_at` and `recorded_at` (cases: see `case_times`)."""
    times = case_times(conn, [str(r["case_id"]) for r in rows if r.get("case_id")])
    out = []
    for r in rows:
        found: Mapping[str, Any] = {}
        if r.get("case_id") in times:
            t = times[r["case_id"]]
            found = {"valid_at": t.valid_at, "recorded_at": t.admitted_at}
        elif r.get("kind") == "quarantined":
            at = _opt(r.get("created_at"))
            found = {"valid_at": at, "recorded_at": at}
        out.append({**r, **found})
    return out
