from __future__ import annotations

import warnings
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa

import reflexmem.ledger.reflection_models  # noqa: F401  (registers tables for TRUNCATE)
from adapters.tracking.eval import EXPERIMENT, EvaluationTracker
from reflexmem.evaluation import (
    COMPONENTS,
    PromotionError,
    get_profile,
    promote,
    replay,
    role_statistics,
)
from reflexmem.maturation import mature_cases
from reflexmem.operations import evaluation
from reflexmem.prices import MappingPrices
from tests.support import (
    AS_OF,
    dfull_mapping,
    make_resources,
    mature_and_evaluate,
    registry,
    scalar,
    seed_ledger,
)


def test_maturity_reasons_follow_the_role_policy(engine: sa.Engine, tmp_path: Path) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path)
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
    res = make_resources(engine)
    seed_ledger(res, tmp_path)
    mature_and_evaluate(res)
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
        rep = replay(conn, dfull_mapping(), profile_v2)
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
        swapped = promote(conn, "spy_daily", source_batch=rep.info.batch_id)
    assert swapped.promoted == runs
    assert swapped.promotions["previous_run_id"].null_count() == 0
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
    res = make_resources(engine)
    seed_ledger(res, tmp_path)
    mature_and_evaluate(res)
    with engine.connect() as conn:
        before = role_statistics(conn, "spy_daily")
    assert before.height > 0
    # A replay whose prices are poisoned produces wildly different, unpromoted runs.
    poisoned = MappingPrices(
        {
            sym: type(s)(s.timestamps, s.closes * (1 + 0.5 * (s.closes.size > 0)), s.bars_per_day)
            for sym in dfull_mapping().symbols
            if (s := dfull_mapping().series(sym)) is not None
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

    tracker = EvaluationTracker(
        mlflow_uri, ledger_url=str(engine.url), artifact_root=tmp_path / "artifacts"
    )
    res = make_resources(engine, tracker=tracker)
    seed_ledger(res, tmp_path)
    cycle = mature_and_evaluate(res)
    evaluated, promoted = cycle.evaluation, cycle.promotion
    replayed = evaluation.replay(res, version=2)
    assert evaluated.mlflow_run_id is not None  # a tracker was given: every batch is logged
    assert replayed.mlflow_run_id is not None
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
    assert run.data.metrics["n_runs"] == evaluated.runs
    assert run.data.tags["reflexmem.batch_id"] == evaluated.batch_id
    local = client.download_artifacts(
        evaluated.mlflow_run_id, "evaluation_runs.parquet", str(tmp_path)
    )
    table = pl.read_parquet(local)
    assert table.height == evaluated.runs
    assert str(tmp_path / "artifacts") in client.get_run(evaluated.mlflow_run_id).info.artifact_uri
    wanted = {"run_id", "decision_id", "case_id", "execution_id", "raw_return_quality"}
    assert wanted <= set(table.columns)
    # Ledger -> MLflow and back.
    with engine.connect() as conn:
        ids = {
            r[0]
            for r in conn.execute(
                sa.text(
                    "SELECT DISTINCT r.mlflow_run_id FROM evaluation_runs r "
                    "JOIN evaluation_run_lineage l ON l.run_id = r.run_id WHERE l.batch_id = :b"
                ),
                {"b": evaluated.batch_id},
            )
        }
        batch_row = conn.execute(
            sa.text("SELECT mlflow_run_id FROM evaluation_batches WHERE batch_id = :b"),
            {"b": promoted.batch_id},
        ).scalar_one()
    assert ids == {evaluated.mlflow_run_id}
    assert batch_row == promoted.mlflow_run_id
    with engine.connect() as conn:
        ledger_ids = {
            r[0]
            for r in conn.execute(
                sa.text("SELECT run_id FROM evaluation_run_lineage WHERE batch_id = :b"),
                {"b": evaluated.batch_id},
            )
        }
    assert set(table["run_id"].to_list()) == ledger_ids
    assert client.get_run(replayed.mlflow_run_id).data.params["profile_version"] == "2"
