"""History in, skills out: the cycle replayed at staged clocks over ingested history.

A user who imports past trades has one clock's worth of cycle to run per period, not
one: skills are judged on decisions made after they were created, so a single
`cycle --as-of T1` over years of history leaves every skill at its first step. A
backfill runs the cycle's own sequence (`run_cycle`) at `T0, T0 + every, ..., T1` (and
at `T1` itself), oldest first, exactly as a live deployment would have run it on those
days. Every stage is idempotent by its own selection, so a clock run twice writes
nothing new; each finished clock is also recorded (`backfill_clocks`, keyed by the
range and the step), so re-running the same backfill after a stop resumes at the
first clock not on record instead of repeating the finished ones.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from reflexmem.ledger.ops_models import BackfillClock
from reflexmem.ledger.sqlio import to_utc
from reflexmem.operations.cycle import CycleParams, CycleReport, cycle_counts, run_cycle
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import StageRunner

_DURATION = re.compile(r"^\s*(\d+)\s*([dhw])\s*$")
_UNITS = {"d": timedelta(days=1), "h": timedelta(hours=1), "w": timedelta(weeks=1)}


def parse_every(text: str) -> timedelta:
    """`7d`, `30d`, `12h`, `2w` as a duration; anything else is refused with the forms."""
    found = _DURATION.match(text)
    if found is None or int(found.group(1)) == 0:
        raise ValueError(f"--every {text!r}: use a positive count of d, h or w (7d, 12h, 2w)")
    return int(found.group(1)) * _UNITS[found.group(2)]


def backfill_clocks(start: datetime, end: datetime, every: timedelta) -> list[datetime]:
    """`start, start + every, ...` up to `end`, and `end` itself; refused if out of order."""
    first, last = to_utc(start), to_utc(end)
    if last < first:
        raise ValueError(f"backfill ends ({last:%Y-%m-%d}) before it starts ({first:%Y-%m-%d})")
    if every <= timedelta(0):
        raise ValueError("the backfill step must be positive")
    out = [first]
    while out[-1] + every <= last:
        out.append(out[-1] + every)
    if out[-1] < last:
        out.append(last)
    return out


@dataclass(frozen=True)
class BackfillParams:
    """The range, the step, and what each cycle is asked to do."""

    start: datetime
    end: datetime
    every: timedelta
    roles: tuple[str, ...] | None = None
    profile: str | None = None
    version: int | None = None

    @property
    def key(self) -> str:
        """The backfill's identity: the same range, step and scope resume the same one."""
        text = "|".join(
            [
                to_utc(self.start).isoformat(),
                to_utc(self.end).isoformat(),
                str(self.every.total_seconds()),
                ",".join(self.roles or ()),
                self.profile or "",
                str(self.version or ""),
            ]
        )
        return "bf-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def finished_clocks(res: Resources, key: str) -> list[datetime]:
    """The clocks of backfill `key` already finished, oldest first."""
    with res.engine.connect() as conn:
        rows = conn.execute(
            sa.select(BackfillClock.as_of)
            .where(BackfillClock.backfill_key == key)
            .order_by(BackfillClock.as_of)
        ).scalars()
        return [to_utc(r) for r in rows]


def finish_clock(res: Resources, key: str, as_of: datetime) -> datetime:
    """Record that the cycle at `as_of` finished (idempotent); returns the clock."""
    clock = to_utc(as_of)
    with res.engine.begin() as conn:
        done = conn.execute(
            sa.select(sa.func.count())
            .select_from(BackfillClock)
            .where(BackfillClock.backfill_key == key, BackfillClock.as_of == clock)
        ).scalar_one()
        if not done:
            conn.execute(
                sa.insert(BackfillClock).values(
                    backfill_key=key, as_of=clock, finished_at=datetime.now(UTC)
                )
            )
    return clock


@dataclass(frozen=True)
class BackfillReport:
    """What a backfill did: the clocks it ran, those it found done, each cycle's report."""

    key: str
    clocks: tuple[datetime, ...]
    skipped: tuple[datetime, ...]
    cycles: tuple[CycleReport, ...]


Progress = Callable[[datetime, CycleReport | None, int, int], None]
"""(clock, its cycle's report or None when skipped as done, clocks handled, clocks in all)."""


def run_backfill(
    runner: StageRunner, params: BackfillParams, on_clock: Progress | None = None
) -> BackfillReport:
    """The cycle at every clock of the range, oldest first, resuming after finished ones."""
    clocks = backfill_clocks(params.start, params.end, params.every)
    done = set(runner.run(finished_clocks, key=params.key))
    ran: list[CycleReport] = []
    skipped: list[datetime] = []
    for i, at in enumerate(clocks, start=1):
        if at in done:
            skipped.append(at)
            if on_clock is not None:
                on_clock(at, None, i, len(clocks))
            continue
        cycle = CycleParams(
            as_of=at, profile=params.profile, version=params.version, roles=params.roles
        )
        report = run_cycle(runner, cycle)
        runner.run(finish_clock, key=params.key, as_of=at)
        ran.append(report)
        if on_clock is not None:
            on_clock(at, report, i, len(clocks))
    return BackfillReport(params.key, tuple(clocks), tuple(skipped), tuple(ran))


def summary(report: BackfillReport) -> dict[str, object]:
    """A backfill for the CLI's JSON: its clocks and the cycles' counts added up."""
    totals: dict[str, float] = {}
    for cycle in report.cycles:
        for name, n in cycle_counts(cycle).items():
            totals[name] = totals.get(name, 0.0) + n
    return {
        "backfill": report.key,
        "clocks": len(report.clocks),
        "ran": len(report.cycles),
        "resumed_past": len(report.skipped),
        "first": report.clocks[0].isoformat() if report.clocks else None,
        "last": report.clocks[-1].isoformat() if report.clocks else None,
        **{name: int(n) for name, n in totals.items()},
    }
