"""Bi-temporal recall: a back-filled store recalls at each clock what a live run did.

The same decision stream goes through the cycle twice on each backend. Live: one cycle
per clock, and after each one the recall an agent at that clock would make (`as_of` =
the clock). Back-filled: the ledger emptied, the stream ingested again and the whole
history replayed by one `run_backfill`, then recall asked `as_of` each clock. Every
answer must be the same items in the same order, cases and memory entries alike. Before
valid time, the back-filled store answered nothing at its own clocks (recall compared
the wall-clock reflection stamp with the cycle's clock).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import sqlalchemy as sa

from reflexmem.ledger.enums import Tier
from reflexmem.operations.backfill import BackfillParams, backfill_clocks, run_backfill
from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.recall import RecallConstraints, recall
from tests.conftest import _truncate
from tests.support import AS_OF, make_resources, seed_ledger

EVERY = timedelta(days=21)
QUERIES = ("", "chased a breakout after the move", "valuation stretched missing evidence")

Answer = tuple[tuple[str, str, str | None], ...]


def _clocks(res: Resources) -> list[datetime]:
    with res.engine.connect() as conn:
        first = conn.execute(sa.text("SELECT MIN(decided_at) FROM trading_decisions")).scalar_one()
    start = datetime.fromisoformat(str(first)).replace(tzinfo=AS_OF.tzinfo) + EVERY
    return backfill_clocks(start, AS_OF, EVERY)


def _answers(res: Resources, at: datetime) -> dict[tuple[str, str], Answer]:
    """Every role's recall for every query as of `at`: (kind, id, valid_at) in order."""
    out: dict[tuple[str, str], Answer] = {}
    with res.engine.connect() as conn:
        for role in res.registry.roles:
            for query in QUERIES:
                result = recall(conn, RecallConstraints(role=role, as_of=at), query, k=8)
                out[(role, query)] = tuple(
                    (h.kind, h.id, None if h.valid_at is None else h.valid_at.isoformat())
                    for h in result.hits
                )
                for hit in result.hits:
                    assert hit.valid_at is not None, hit
                    assert hit.valid_at <= at, hit
                    assert hit.recorded_at is not None, hit
                    assert hit.recorded_at > at, hit
    return out


def test_a_backfilled_store_recalls_at_each_clock_what_the_live_run_recalled(
    engine: sa.Engine, tmp_path: Path
) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path, n=500)
    clocks = _clocks(res)
    assert len(clocks) >= 4
    live: dict[datetime, dict[tuple[str, str], Answer]] = {}
    for at in clocks:
        run_cycle(DirectRunner(res), CycleParams(as_of=at))
        live[at] = _answers(res, at)

    _truncate(engine)
    seed_ledger(res, tmp_path, n=500)  # the same stream files
    report = run_backfill(
        DirectRunner(res), BackfillParams(start=clocks[0], end=AS_OF, every=EVERY)
    )
    assert report.clocks == tuple(clocks)
    filled = {at: _answers(res, at) for at in clocks}

    differ = [(at, key) for at in clocks for key in live[at] if live[at][key] != filled[at][key]]
    assert differ == []
    hits = [h for at in clocks for answer in live[at].values() for h in answer]
    assert sum(1 for kind, _, _ in hits if kind == "case") > 20
    # The learned tiers are recalled too, not only the lessons of single cases.
    with engine.connect() as conn:
        learned = conn.execute(
            sa.text("SELECT COUNT(*) FROM memory_entries WHERE tier <> :t"),
            {"t": Tier.EPISODIC.value},
        ).scalar_one()
    assert learned > 0
    assert sum(1 for kind, _, _ in hits if kind == "memory") > 5
    # Early clocks know less than late ones: the answers are not one answer repeated.
    assert live[clocks[0]] != live[clocks[-1]]
