"""Drift of a trading structure on realized outcomes, quarantine and rollback; both backends.

A stream whose fills, from `DRIFT_AT` on, are 5 % worse than the close on every trade
(`apps.demo.trading.worse_fills_from`, the demo's planted drift); without it, the same
stream unchanged (the control). After a cycle, the trading search activates the roles
isolated; a second structure (an edge lending the busiest role's check) is activated
with its drift baseline (the wins of what it let proceed on the final test). The next
cycle checks decisions under it; the audit then compares, per role, the share of
proceeded decisions that won since, and with the planted drift quarantines the bundle
and restores the previous one, pin checksums equal before and after, the MLflow alias
moved back; the cycle after that checks its decisions under the restored bundle. The
control stream drifts nowhere and nothing moves.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from adapters.lineage import pick_decision
from adapters.tracking.structures import StructureTracker
from apps.demo.trading import worse_fills_from
from reflexmem.ledger.structure_models import DecisionStructure
from reflexmem.operations import intake
from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.runner import DirectRunner
from reflexmem.operations.structure_audit import audit_structures
from reflexmem.operations.structures import SearchParams, run_structure_search
from reflexmem.prices.panel import load_dfull
from reflexmem.structures import persist, rollout
from reflexmem.structures.evaluate import replay
from reflexmem.structures.mutations import Step
from reflexmem.structures.operations import mutate
from reflexmem.structures.trading import module_id
from reflexmem.structures.trading_drift import win_baseline
from reflexmem.structures.trading_ledger import trading_setup
from reflexmem.synth import generate, write_stream
from tests.integration.test_trading_structures import _active_check, _busiest
from tests.support import AS_OF, make_resources

FIRST = AS_OF - timedelta(days=50)
DRIFT_AT = AS_OF - timedelta(days=25)


def _checked_under(engine: sa.Engine, after: datetime) -> set[str]:
    """The bundles decisions checked after `after` ran under."""
    ds = DecisionStructure.__table__
    stmt = sa.select(ds.c.bundle_id).where(ds.c.checked_at > after).distinct()
    with engine.connect() as conn:
        return {str(b) for b in conn.scalars(stmt)}


@pytest.mark.parametrize("planted", [True, False], ids=["drift", "steady"])
def test_trading_bundle_drifting_on_outcomes_is_rolled_back_and_the_next_cycle_uses_the_previous(
    engine: sa.Engine, tmp_path: Path, mlflow_uri: str, planted: bool
) -> None:
    tracker = StructureTracker(mlflow_uri, (tmp_path / "artifacts").as_uri())
    res = replace(make_resources(engine), structure_tracker=tracker)
    stream = generate(load_dfull(), 3000, seed=5)
    if planted:
        stream = worse_fills_from(stream, DRIFT_AT, 0.05)
    intake.ingest(res, write_stream(stream, tmp_path / "stream"))
    intake.admit(res)
    run_cycle(DirectRunner(res), CycleParams(as_of=FIRST))
    run_cycle(DirectRunner(res), CycleParams(as_of=DRIFT_AT))
    role, symbol = _busiest(engine)
    _active_check(engine, res, role, symbol)
    run_structure_search(DirectRunner(res), SearchParams(environment="trading"))
    previous = rollout.active(engine, "trading")
    assert previous is not None
    other = next(m.id for m in previous[1].modules if m.id != module_id(role))
    step = Step("add_edge", {
        "source": module_id(role), "target": other, "fields": ["checks"],
        "contract": "lend-checks-v1", "contract_fields": {"checks": "string"},
    })  # fmt: skip
    child = mutate(engine, previous[1].structure_id, step).child
    with engine.connect() as conn:
        env, sets, _ = trading_setup(conn, res.registry)
    baseline = win_baseline(replay(child, env, sets.test))
    tracker.register(engine, child.structure_id, families=sets.families())
    bundle = rollout.activate(engine, "trading", child.structure_id, counts=baseline)
    assert all(n > 0 for _, n in baseline.values())

    mid = AS_OF - timedelta(days=8)
    run_cycle(DirectRunner(res), CycleParams(as_of=mid))
    assert _checked_under(engine, DRIFT_AT) == {bundle.bundle_id}
    report = audit_structures(res, scope="trading").scopes[0]
    families = (report.drift or {})["families"]
    assert families, "settled decisions under the bundle are judged per role"

    if not planted:
        assert not report.drifted
        assert report.restored is None
        still = rollout.active(engine, "trading")
        assert still is not None
        assert still[0].bundle_id == bundle.bundle_id
        return

    assert report.drifted, families
    drifted = [f for f in families if f["drifted"]]
    assert drifted
    assert all(f["recent_rate"] < f["baseline_rate"] for f in drifted)
    assert all(f["recent_n"] >= 20 for f in drifted)
    assert report.quarantined == bundle.bundle_id
    assert report.restored == previous[0].bundle_id
    assert report.pins_before == report.pins_after
    assert report.mlflow is not None
    with engine.connect() as conn:
        row = persist.bundle_row(conn, bundle.bundle_id)
        kinds = {e["kind"] for e in persist.events(conn) if e["bundle_id"] == bundle.bundle_id}
    assert row is not None
    assert row["state"] == "quarantined"
    assert {"drift", "quarantined", "rolled_back"} <= kinds

    # The next cycle checks its decisions under the restored bundle, and only it.
    run_cycle(DirectRunner(res), CycleParams(as_of=AS_OF))
    assert _checked_under(engine, mid) == {previous[0].bundle_id}

    # The report, the notebook and the demo follow a decision whose chain ends there.
    with engine.connect() as conn:
        picked = pick_decision(conn)
        ran = conn.scalar(
            sa.select(DecisionStructure.__table__.c.bundle_id).where(
                DecisionStructure.__table__.c.decision_id == picked
            )
        )
    assert ran is not None
