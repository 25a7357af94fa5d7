"""The cycle's parent run logs what happened, distillation inside the episodes stage included."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import sqlalchemy as sa

from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.resources import NullTracker
from reflexmem.operations.runner import DirectRunner
from tests.support import AS_OF, make_resources, seed_ledger


class SummaryTracker(NullTracker):
    """A tracker that keeps the summaries cycles close with (and records nothing else)."""

    def __init__(self) -> None:
        self.closed: list[tuple[str, dict[str, float]]] = []

    def end_cycle(self, cycle_id: str, status: str, summary: Mapping[str, float]) -> None:
        self.closed.append((status, dict(summary)))


def test_pattern_and_rule_counts_match_the_rows_distillation_wrote(
    engine: sa.Engine, tmp_path: Path
) -> None:
    tracker = SummaryTracker()
    res = replace(make_resources(engine), tracker=tracker)
    seed_ledger(res, tmp_path, n=1200)
    report = run_cycle(DirectRunner(res), CycleParams(as_of=AS_OF))
    [(status, summary)] = tracker.closed
    with engine.connect() as conn:
        tiers: dict[str, int] = dict(
            conn.execute(sa.text("SELECT tier, COUNT(*) FROM memory_entries GROUP BY tier")).all()
        )
    assert status == "FINISHED"
    assert report.memory.distillation == ()  # every window was distilled inside the stage
    assert summary["pattern_versions"] == tiers["semantic"] > 0
    assert summary["rules_promoted"] == tiers.get("procedural", 0)
    assert summary["windows_distilled"] == sum(d.windows for d in report.memory.distilled) > 0
    assert summary["episodes"] == tiers["episodic"]
    assert summary["decisions_checked"] == 1200
