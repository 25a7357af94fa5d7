from __future__ import annotations

import functools
import warnings
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa

import reflexmem.ledger.reflection_models  # noqa: F401  (registers tables for TRUNCATE)
from infra.services import run_admission, run_ingest
from infra.tracking_eval import EXPERIMENT, EvaluationTracker, tracked_evaluate, tracked_promote
from reflexmem.ael.panel import load_dfull
from reflexmem.evaluation import (
    COMPONENTS,
    PromotionError,
    evaluate_matured,
    get_profile,
    promote,
    replay,
    role_statistics,
)
from reflexmem.maturation import dfull_prices, mature_cases, settle_open_positions
from reflexmem.maturation.prices import MappingPrices
from reflexmem.registry import RoleRegistry, load_registry
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream

AS_OF = datetime(2025, 3, 28, tzinfo=UTC)


@functools.cache
def prices() -> MappingPrices:
    return dfull_prices()


@functools.cache
def registry() -> RoleRegistry:
    return load_registry()


def seed_ledger(engine: sa.Engine, tmp: Path, n: int = 400, seed: int = 5) -> None:
    """A D-full-derived decision stream, ingested and admitted (role cases exist)."""
    files = write_stream(generate(load_dfull(), n, seed=seed), tmp / f"stream-{seed}")
    run_ingest(engine, files)
    run_admission(engine, Settings(home=tmp), registry())


def mature_and_evaluate(engine: sa.Engine, *, as_of: datetime = AS_OF) -> str:
    """Settle, mature, evaluate and promote the first runs; returns the evaluation batch."""
    profile = get_profile()
    with engine.begin() as conn:
        settle_open_positions(conn, prices(), registry())
        mature_cases(conn, registry(), as_of=as_of, min_points=3, profile=profile.name)
        result = evaluate_matured(conn, prices(), profile)
        promote(conn, profile.name, source_batch=result.info.batch_id, only_unpromoted=True)
    return result.info.batch_id


def scalar(engine: sa.Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(sql)).scalar_one())


def test_maturity_reasons_follow_the_role_policy(engine: sa.Engine, tmp_path: Path) -> None:
    seed_ledger(engine, tmp_path)
    early = datetime(2025, 2, 1, tzinfo=UTC)
    with engine.begin() as conn:
        report = mature_cases(conn, registry(), as_of=early, min_points=3, profile="spy_daily")
    assert report.pending.get("not_due", 0) > 0
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT rc.role_id, d.decided_at, rc.state, rc.pending_reason FROM role_cases rc "
                "JOIN trading_decisions d ON d.decision_id = rc.decision_id"
            )
        ).all()
    days = {r: registry().get(r).policy.maturation.days for r in registry().ids}
    for role_id, decided, state, reason in rows:
        decided_at = decided if isinstance(decided, datetime) else datetime.fromisoformat(decided)
        if decided_at.tzinfo is None:
            decided_at = decided_at.replace(tzinfo=UTC)
        if (decided_at - early).days > -days[role_id]:
            assert (state, reason) == ("pending", "not_due")
    # A later check matures them; re-running it changes nothing (idempotent).
    with engine.begin() as conn:
        later = mature_cases(conn, registry(), as_of=AS_OF, min_points=3, profile="spy_daily")
    assert later.matured > 0
    with engine.begin() as conn:
        again = mature_cases(conn, registry(), as_of=AS_OF, min_points=3, profile="spy_daily")
    assert again.changed == 0


def test_runs_have_every_component_and_promotion_is_one_primary_per_decision(
    engine: sa.Engine, tmp_path: Path
) -> None:
    seed_ledger(engine, tmp_path)
    mature_and_evaluate(engine)
    runs = scalar(engine, "SELECT COUNT(*) FROM evaluation_runs")
    assert runs > 50
    assert scalar(engine, "SELECT COUNT(*) FROM evaluation_components") == runs * len(COMPONENTS)
    assert scalar(engine, "SELECT COUNT(*) FROM evaluation_runs WHERE is_primary") == runs
    # Every component keeps its own flags; nothing is collapsed into one score.
    with engine.connect() as conn:
        names = {
            r[0] for r in conn.execute(sa.text("SELECT DISTINCT name FROM evaluation_components"))
        }
    assert names == set(COMPONENTS)
    assert {"raw_return", "excess_vs_benchmark", "risk_adjusted", "direction_hit"} <= names

    # A replay adds runs, never rewrites one, and promotes nothing.
    profile_v2 = get_profile(version=2)
    with engine.begin() as conn:
        before = conn.execute(
            sa.text("SELECT run_id, name, value FROM evaluation_components ORDER BY 1, 2")
        ).all()
        rep = replay(conn, prices(), profile_v2)
    assert rep.n_runs == runs
    assert scalar(engine, "SELECT COUNT(*) FROM evaluation_runs") == 2 * runs
    assert scalar(engine, "SELECT COUNT(*) FROM evaluation_runs WHERE is_primary") == runs
    with engine.connect() as conn:
        after = conn.execute(
            sa.text(
                "SELECT c.run_id, c.name, c.value FROM evaluation_components c "
                "JOIN evaluation_run_lineage l ON l.run_id = c.run_id "
                "WHERE l.replay_of IS NULL ORDER BY 1, 2"
            )
        ).all()
    assert after == before

    # Promoting the replay batch swaps the primary: still exactly one per decision.
    with engine.begin() as conn:
        res = promote(conn, "spy_daily", source_batch=rep.info.batch_id)
    assert res.promoted == runs
    assert res.promotions["previous_run_id"].null_count() == 0
    with engine.connect() as conn:
        per = conn.execute(
            sa.text(
                "SELECT decision_id, COUNT(*) FROM evaluation_runs WHERE is_primary "
                "GROUP BY decision_id HAVING COUNT(*) <> 1"
            )
        ).all()
        versions = conn.execute(
            sa.text("SELECT DISTINCT profile_version FROM evaluation_runs WHERE is_primary")
        ).all()
    assert per == []
    assert versions == [(2,)]
    # Two runs of one decision cannot both be named primary.
    with engine.connect() as conn:
        two = [
            r[0]
            for r in conn.execute(
                sa.text(
                    "SELECT run_id FROM evaluation_runs WHERE decision_id = "
                    "(SELECT MIN(decision_id) FROM evaluation_runs)"
                )
            )
        ]
    with pytest.raises(PromotionError, match="exactly one"), engine.begin() as conn:
        promote(conn, "spy_daily", run_ids=two)


def test_a_non_primary_run_cannot_change_any_statistic(engine: sa.Engine, tmp_path: Path) -> None:
    seed_ledger(engine, tmp_path)
    mature_and_evaluate(engine)
    with engine.connect() as conn:
        before = role_statistics(conn, "spy_daily")
    assert before.height > 0
    # A replay whose prices are poisoned produces wildly different, unpromoted runs.
    poisoned = MappingPrices(
        {
            sym: type(s)(s.timestamps, s.closes * (1 + 0.5 * (s.closes.size > 0)), s.bars_per_day)
            for sym in prices().symbols
            if (s := prices().series(sym)) is not None
        }
    )
    with engine.begin() as conn:
        rep = replay(conn, poisoned, get_profile())
        # Legacy-style observations of a non-primary run are ignored as well.
        conn.execute(
            sa.text(
                "INSERT INTO methodology_observations (run_id, role_id, metric, value) "
                "SELECT run_id, 'valuation', 'raw_return', 99.0 FROM evaluation_runs "
                "WHERE NOT is_primary"
            )
        )
    assert rep.n_runs > 0
    with engine.connect() as conn:
        after = role_statistics(conn, "spy_daily")
    assert after.equals(before)


def test_mlflow_records_one_run_per_batch_linked_both_ways(
    engine: sa.Engine, tmp_path: Path, mlflow_uri: str
) -> None:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import mlflow

    seed_ledger(engine, tmp_path)
    profile = get_profile()
    with engine.begin() as conn:
        settle_open_positions(conn, prices(), registry())
        mature_cases(conn, registry(), as_of=AS_OF, min_points=3, profile=profile.name)
    tracker = EvaluationTracker(mlflow_uri, ledger_url=str(engine.url))
    evaluated = tracked_evaluate(engine, tracker, prices(), profile)
    promoted = tracked_promote(
        engine, tracker, profile.name, source_batch=evaluated.info.batch_id, only_unpromoted=True
    )
    replayed = tracked_evaluate(engine, tracker, prices(), get_profile(version=2), replay_runs=True)
    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    assert exp is not None
    found = client.search_runs([exp.experiment_id])
    kinds = sorted(r.data.tags["reflexmem.kind"] for r in found)
    assert kinds == ["evaluate", "promote", "replay"]
    run = client.get_run(evaluated.mlflow_run_id)
    assert run.data.params["profile"] == "spy_daily"
    assert run.data.params["profile_version"] == "1"
    assert set(run.data.params["roles"].split(",")) <= set(registry().ids)
    assert run.data.metrics["n_runs"] == evaluated.n_runs
    assert run.data.tags["reflexmem.batch_id"] == evaluated.info.batch_id
    table = client.load_table(
        exp.experiment_id, "evaluation_runs.json", run_ids=[evaluated.mlflow_run_id]
    )
    assert len(table) == evaluated.n_runs
    assert {"run_id", "decision_id", "case_id", "execution_id", "raw_return_quality"} <= set(table)
    # Ledger -> MLflow and back.
    with engine.connect() as conn:
        ids = {
            r[0]
            for r in conn.execute(
                sa.text(
                    "SELECT DISTINCT r.mlflow_run_id FROM evaluation_runs r "
                    "JOIN evaluation_run_lineage l ON l.run_id = r.run_id WHERE l.batch_id = :b"
                ),
                {"b": evaluated.info.batch_id},
            )
        }
        batch_row = conn.execute(
            sa.text("SELECT mlflow_run_id FROM evaluation_batches WHERE batch_id = :b"),
            {"b": promoted.info.batch_id},
        ).scalar_one()
    assert ids == {evaluated.mlflow_run_id}
    assert batch_row == promoted.mlflow_run_id
    assert set(pl.Series(table["run_id"]).to_list()) == set(evaluated.runs["run_id"].to_list())
    assert client.get_run(replayed.mlflow_run_id).data.params["profile_version"] == "2"
