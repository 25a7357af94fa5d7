"""A second run of the whole cycle over the same input writes nothing at all.

Every stage selects only its own unfinished work, and a stage that finds none writes no
row, not even a batch row: the ledger after two runs has the same checksums, table by
table (row counts included), as after one. `reflexmem bench crash` checks the harder
case, a run killed part way and rerun.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from reflexmem.ledger.checksums import table_checksums
from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.prices.panel import load_dfull
from reflexmem.synth import generate, write_stream
from tests.support import AS_OF, make_resources


def test_a_second_cycle_changes_no_table(engine: sa.Engine, tmp_path: Path) -> None:
    from reflexmem.prices import LedgerPrices

    drop = tmp_path / "drop"
    write_dfull_bars(drop)
    write_stream(generate(load_dfull(), 400, seed=2), drop)
    res = make_resources(engine, prices=LedgerPrices(engine))
    params = CycleParams(as_of=AS_OF, drop=drop)
    first = run_cycle(DirectRunner(res), params)
    assert first.admission.rows_in == 400
    assert sum(r.reflected for r in first.reflection) > 0
    with engine.connect() as conn:
        once = table_checksums(conn)
    again = run_cycle(DirectRunner(res), params)
    with engine.connect() as conn:
        twice = table_checksums(conn)
    assert again.admission.rows_in == 0
    assert [r.offered for r in again.reflection] == [0] * len(again.reflection)
    assert {t: v for t, v in twice.items() if once[t] != v} == {}
    assert once["episodes"][0] > 0
    assert once["memory_windows"][0] > 0
