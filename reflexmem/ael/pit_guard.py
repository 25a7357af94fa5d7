"""Point-in-time guard for evidence fed to a decision.

Backtests leak the future most often through side data (fundamentals, analyst
views, option chains) downloaded today and replayed against old bars. The guard
is fail-closed: evidence is admitted only when it carries an aware `as_of` no
later than the decision time; everything else is refused with a reason, and every
refusal is kept so it can be shown next to the decision it would have tainted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

# "one snapshot taken around March 2026" (D-full README); used when a file's own
# content carries no date, and as a floor because dated facts inside a snapshot
# (e.g. the last fiscal quarter) only bound its as-of from below.
DFULL_SNAPSHOT_DOCUMENTED_AS_OF = datetime(2026, 3, 1, tzinfo=UTC)
SNAPSHOT_KINDS = ("fundamentals", "analyst", "options", "earnings")


@dataclass(frozen=True, eq=False)
class Evidence:
    """A piece of information with the instant from which it was knowable."""

    source: str
    as_of: datetime | None
    payload: Mapping[str, object] = field(default_factory=dict)
    as_of_basis: str = "declared"


@dataclass(frozen=True)
class Refusal:
    """Why a piece of evidence was kept away from a decision."""

    source: str
    decision_time: datetime
    as_of: datetime | None
    reason: str

    def describe(self) -> str:
        """One line for agent notes and reports."""
        when = self.as_of.isoformat() if self.as_of is not None else "none"
        return (
            f"REFUSED {self.source}: {self.reason} "
            f"(as_of {when}, decision {self.decision_time.isoformat()})"
        )


class EvidenceGuard:
    """Admits evidence known at the decision time, refuses and records the rest."""

    def __init__(self) -> None:
        self._refusals: list[Refusal] = []

    @property
    def refusals(self) -> tuple[Refusal, ...]:
        """Every refusal made so far, oldest first."""
        return tuple(self._refusals)

    def check(self, evidence: Evidence, decision_time: datetime) -> Evidence | Refusal:
        """Return the evidence if admissible at `decision_time`, else a recorded refusal.

        An as_of equal to the decision time is admitted (it was known at that
        instant). Naive as_of values are refused rather than guessed at, because
        a wrong time-zone guess is exactly the kind of silent leak this prevents.
        """
        if decision_time.tzinfo is None:
            raise ValueError("decision_time must be timezone-aware")
        reason: str | None = None
        if evidence.as_of is None:
            reason = "no as_of: cannot prove it was known at the decision time"
        elif evidence.as_of.tzinfo is None:
            reason = "as_of has no timezone"
        elif evidence.as_of > decision_time:
            reason = f"as_of is after the decision time ({evidence.as_of_basis})"
        if reason is None:
            return evidence
        refusal = Refusal(evidence.source, decision_time, evidence.as_of, reason)
        self._refusals.append(refusal)
        return refusal

    def admit(
        self, items: Iterable[Evidence], decision_time: datetime
    ) -> tuple[tuple[Evidence, ...], tuple[Refusal, ...]]:
        """Split `items` into (admitted, refused) for one decision."""
        admitted: list[Evidence] = []
        refused: list[Refusal] = []
        for item in items:
            outcome = self.check(item, decision_time)
            if isinstance(outcome, Refusal):
                refused.append(outcome)
            else:
                admitted.append(outcome)
        return tuple(admitted), tuple(refused)


def snapshot_as_of(kind: str, payload: Mapping[str, object]) -> tuple[datetime, str]:
    """Date a D-full snapshot and say what the date was derived from.

    Only dates of facts that had happened when the snapshot was taken count
    (analyst grade dates, statement period ends); option expirations are in the
    future of the snapshot and are ignored. Those facts bound the as-of from
    below, so the result is the later of the newest one and the documented
    snapshot date.
    """
    dates = _observed_dates(kind, payload)
    if not dates:
        return DFULL_SNAPSHOT_DOCUMENTED_AS_OF, "documented snapshot date (README: ~March 2026)"
    newest = max(dates)
    if newest >= DFULL_SNAPSHOT_DOCUMENTED_AS_OF:
        return newest, f"newest dated fact in the {kind} file"
    return (
        DFULL_SNAPSHOT_DOCUMENTED_AS_OF,
        f"documented snapshot date (newest fact in file {newest.date()})",
    )


def load_dfull_snapshots(root: Path) -> tuple[Evidence, ...]:
    """Load every D-full snapshot as evidence stamped with its real as-of."""
    items: list[Evidence] = []
    for kind in SNAPSHOT_KINDS:
        for path in sorted((root / "snapshots" / kind).glob("*.json")):
            payload = json.loads(path.read_text())
            if not isinstance(payload, dict):
                raise ValueError(f"{path}: expected a JSON object")
            as_of, basis = snapshot_as_of(kind, payload)
            items.append(Evidence(f"snapshots/{kind}/{path.stem}", as_of, payload, basis))
    return tuple(items)


def _observed_dates(kind: str, payload: Mapping[str, object]) -> list[datetime]:
    keys: list[str] = []
    if kind == "analyst":
        grades = payload.get("upgrades_downgrades")
        if isinstance(grades, list):
            keys = [str(g["GradeDate"]) for g in grades if isinstance(g, dict) and "GradeDate" in g]
    elif kind in ("earnings", "fundamentals"):
        for value in payload.values():
            if isinstance(value, dict):
                keys.extend(str(k) for k in value)
    return [d for d in (_parse_utc(k) for k in keys) if d is not None]


def _parse_utc(text: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    # Snapshot dates are printed without an offset; UTC is the documented reading.
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
