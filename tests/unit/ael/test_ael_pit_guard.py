from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from reflexmem.ael.agent import ToolsAgent
from reflexmem.ael.environment import MarketEnvironment
from reflexmem.ael.pit_guard import (
    DFULL_SNAPSHOT_DOCUMENTED_AS_OF,
    Evidence,
    EvidenceGuard,
    Refusal,
    load_dfull_snapshots,
)
from reflexmem.ael.splits import Split
from reflexmem.prices.panel import PricePanel, default_dfull_root

DECISION = datetime(2025, 3, 10, 14, 30, tzinfo=UTC)


@pytest.fixture(scope="module")
def snapshots() -> tuple[Evidence, ...]:
    return load_dfull_snapshots(default_dfull_root())


def test_snapshots_get_an_as_of_in_2026_from_content_or_documentation(
    snapshots: tuple[Evidence, ...],
) -> None:
    assert len(snapshots) == 40  # 4 kinds x 10 tickers
    assert all(
        e.as_of is not None and e.as_of >= DFULL_SNAPSHOT_DOCUMENTED_AS_OF for e in snapshots
    )
    xom = next(e for e in snapshots if e.source == "snapshots/analyst/XOM")
    assert xom.as_of == datetime(2026, 3, 17, 17, 25, 57, tzinfo=UTC)  # newest GradeDate
    assert "newest dated fact" in xom.as_of_basis
    options = next(e for e in snapshots if e.source == "snapshots/options/AAPL")
    assert options.as_of == DFULL_SNAPSHOT_DOCUMENTED_AS_OF


def test_guard_refuses_every_dfull_snapshot_for_a_2025_decision(
    snapshots: tuple[Evidence, ...],
) -> None:
    guard = EvidenceGuard()
    admitted, refused = guard.admit(snapshots, DECISION)
    assert admitted == ()
    assert len(refused) == 40
    assert guard.refusals == refused
    assert all("after the decision time" in r.reason for r in refused)


def test_guard_accepts_evidence_known_before_or_at_the_decision() -> None:
    guard = EvidenceGuard()
    earlier = Evidence("news/x", DECISION - timedelta(hours=1))
    same = Evidence("news/y", DECISION)
    assert guard.check(earlier, DECISION) is earlier
    assert guard.check(same, DECISION) is same
    assert guard.refusals == ()


@pytest.mark.parametrize(
    ("as_of", "reason"),
    [
        (None, "no as_of"),
        (datetime(2025, 3, 1), "no timezone"),
        (DECISION + timedelta(seconds=1), "after the decision time"),
    ],
)
def test_guard_refuses_undated_naive_or_future_evidence_with_a_reason(
    as_of: datetime | None, reason: str
) -> None:
    guard = EvidenceGuard()
    outcome = guard.check(Evidence("e", as_of), DECISION)
    assert isinstance(outcome, Refusal)
    assert reason in outcome.reason
    assert guard.refusals == (outcome,)


def test_naive_decision_time_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        EvidenceGuard().check(Evidence("e", DECISION), datetime(2025, 3, 10))


def test_tools_agent_shows_refusals_in_its_output_and_ignores_the_snapshots(
    dfull: PricePanel, snapshots: tuple[Evidence, ...]
) -> None:
    split = Split("test", 168, 208)
    env = MarketEnvironment(dfull)
    guard = EvidenceGuard()
    leaky = env.run(split, ToolsAgent(np.random.default_rng(0), evidence=snapshots, guard=guard))
    plain = env.run(split, ToolsAgent(np.random.default_rng(0)))
    assert len(leaky.refusals) == 40 * 39 == len(guard.refusals)
    assert all(d.notes[-1].startswith("REFUSED snapshots/") for d in leaky.decisions)
    assert sum("REFUSED" in n for n in leaky.decisions[0].notes) == 40
    np.testing.assert_array_equal(leaky.weights, plain.weights)
