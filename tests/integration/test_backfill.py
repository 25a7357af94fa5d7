"""`reflexmem backfill`: the cycle at staged clocks, idempotent and resumable, both backends."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from adapters import migrate
from adapters.db import make_engine
from apps.cli import app
from reflexmem.ledger.checksums import table_checksums
from reflexmem.operations import maturation
from reflexmem.operations.backfill import BackfillParams, backfill_clocks, run_backfill
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from tests.support import AS_OF, make_resources, seed_ledger

R = TypeVar("R")
EVERY = timedelta(days=14)


def _params(res: Resources) -> BackfillParams:
    with res.engine.connect() as conn:
        first = conn.execute(sa.text("SELECT MIN(decided_at) FROM trading_decisions")).scalar_one()
    start = datetime.fromisoformat(str(first)).replace(tzinfo=AS_OF.tzinfo) + EVERY
    return BackfillParams(start=start, end=AS_OF, every=EVERY)


class StopAt(DirectRunner):
    """A direct runner that dies when the cycle's plan is asked for one clock."""

    def __init__(self, res: Resources, clock: datetime) -> None:
        super().__init__(res)
        self.clock = clock

    def run(self, op: Callable[..., R], /, **params: Any) -> R:
        if op is maturation.plan and params.get("as_of") == self.clock:
            raise RuntimeError("killed mid-backfill")
        return super().run(op, **params)


def _sums(res: Resources) -> dict[str, tuple[int, str]]:
    with res.engine.connect() as conn:
        return table_checksums(conn)


def test_a_second_run_of_the_same_backfill_runs_nothing_and_changes_nothing(
    engine: sa.Engine, tmp_path: Path
) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path)
    params = _params(res)
    clocks = backfill_clocks(params.start, params.end, params.every)
    first = run_backfill(DirectRunner(res), params)
    assert len(clocks) >= 4
    assert first.clocks == tuple(clocks)
    assert len(first.cycles) == len(clocks)
    assert first.skipped == ()
    assert [c.maturation.plan.as_of for c in first.cycles] == clocks
    assert sum(r.reflected for c in first.cycles for r in c.reflection) > 0
    before = _sums(res)
    seen: list[tuple[datetime, bool]] = []
    again = run_backfill(
        DirectRunner(res), params, on_clock=lambda at, r, _i, _n: seen.append((at, r is None))
    )
    assert again.cycles == ()
    assert again.skipped == tuple(clocks)
    assert seen == [(at, True) for at in clocks]
    assert _sums(res) == before


def test_a_stopped_backfill_resumes_and_leaves_what_an_uninterrupted_one_leaves(
    tmp_path: Path,
) -> None:
    def ledger(name: str) -> Resources:
        eng = make_engine(f"sqlite:///{tmp_path / f'{name}.sqlite'}")
        migrate.upgrade(eng)
        res = make_resources(eng)
        seed_ledger(res, tmp_path)  # the same stream files for both ledgers
        return res

    whole, stopped = ledger("whole"), ledger("stopped")
    params = _params(whole)
    clocks = backfill_clocks(params.start, params.end, params.every)
    run_backfill(DirectRunner(whole), params)
    with pytest.raises(RuntimeError, match="killed"):
        run_backfill(StopAt(stopped, clocks[2]), params)
    resumed = run_backfill(DirectRunner(stopped), params)
    assert resumed.skipped == tuple(clocks[:2])
    assert [c.maturation.plan.as_of for c in resumed.cycles] == clocks[2:]
    left, right = _sums(whole), _sums(stopped)
    assert {t for t in left if left[t] != right[t]} == set()
    whole.engine.dispose()
    stopped.engine.dispose()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", "2024-02-01", "--to", "2024-01-01", "--every", "7d"], "before it starts"),
        (["--from", "2024-01-01", "--to", "2024-02-01", "--every", "7x"], "--every"),
        (["--from", "yesterday", "--to", "2024-02-01", "--every", "7d"], "--from must be"),
    ],
)
def test_the_command_refuses_a_bad_range_before_touching_the_ledger(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["backfill", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert not (tmp_path / "ledger.sqlite").exists()


def test_the_command_prints_its_counts_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path))
    eng = make_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    migrate.upgrade(eng)
    eng.dispose()
    args = ["backfill", "--from", "2025-01-01", "--to", "2025-01-20", "--every", "7d", "--json"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    out = json.loads(first.stdout.strip().splitlines()[-1])
    assert (out["clocks"], out["ran"], out["resumed_past"]) == (4, 4, 0)
    assert (out["first"], out["last"]) == ("2025-01-01T00:00:00+00:00", "2025-01-20T00:00:00+00:00")
    again = json.loads(CliRunner().invoke(app, args).stdout.strip().splitlines()[-1])
    assert (again["ran"], again["resumed_past"]) == (0, 4)
