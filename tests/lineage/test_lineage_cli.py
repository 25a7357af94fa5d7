"""`reflexmem lineage`: a decision's chain as JSON, every step linked to MLflow; 1 if unknown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from adapters.db import make_engine
from adapters.lineage import KINDS, pick_decision
from adapters.tracking.context import VIEW, existing_client
from reflexmem.settings import Settings

CLI = str(Path(sys.executable).with_name("reflexmem"))


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120, check=False)


def test_lineage_prints_the_whole_chain_with_run_ids_and_urls(store_env: Settings) -> None:
    engine = make_engine(store_env.resolved_database_url)
    with engine.connect() as conn:
        decision = pick_decision(conn)
        assert decision is not None
        evaluation = conn.execute(
            sa.text("SELECT run_id, mlflow_run_id FROM evaluation_runs WHERE decision_id = :d"),
            {"d": decision},
        ).one()
        case = conn.execute(
            sa.text("SELECT case_id, outcome_class FROM role_cases WHERE decision_id = :d"),
            {"d": decision},
        ).one()
        reflection = conn.execute(
            sa.text("SELECT b.batch_id, b.mlflow_run_id FROM reflection_batch_cases c "
                    "JOIN reflection_batches b ON b.batch_id = c.batch_id WHERE c.case_id = :c"),
            {"c": case.case_id},
        ).one()  # fmt: skip
    engine.dispose()
    done = _cli("lineage", decision, "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["decision_id"] == decision
    steps = data["steps"]
    assert all({"kind", "id", "mlflow_run_id", "url"} <= set(s) for s in steps)
    assert {s["kind"] for s in steps} <= set(KINDS)
    kinds = [s["kind"] for s in steps]
    for kind in ("decision", "preview", "execution", "position", "case", "evaluation",
                 "promotion", "reflection", "lesson", "pattern", "rule"):  # fmt: skip
        assert kind in kinds, kinds
    by_kind = {s["kind"]: s for s in steps}
    assert by_kind["evaluation"]["id"] == evaluation.run_id
    assert by_kind["evaluation"]["mlflow_run_id"] == evaluation.mlflow_run_id
    assert by_kind["reflection"]["id"] == reflection.batch_id
    assert by_kind["reflection"]["mlflow_run_id"] == reflection.mlflow_run_id
    assert by_kind["reflection"]["outcome_class"] == case.outcome_class
    assert by_kind["execution"]["fills"], "the execution step lists its fills"
    assert {c["name"] for c in by_kind["evaluation"]["components"]} >= {"raw_return"}
    # Every MLflow step links its run page, and the run is the batch's (tags both ways).
    client = existing_client(store_env.resolved_tracking_uri)
    assert client is not None
    for step in steps:
        if step["mlflow_run_id"]:
            run = client.get_run(step["mlflow_run_id"])
            assert step["url"] == (
                f"{store_env.mlflow_ui_url}/#/experiments/{run.info.experiment_id}"
                f"/runs/{step['mlflow_run_id']}{VIEW}"
            )
            assert step["cycle_mlflow_run_id"] == run.data.tags["mlflow.parentRunId"]
    promotion = client.get_run(by_kind["promotion"]["mlflow_run_id"])
    assert promotion.data.tags["reflexmem.source_mlflow_runs"] == evaluation.mlflow_run_id
    assert promotion.data.params["profile_version"] == "1"
    assert promotion.info.run_name.startswith("promote-spy_daily-v1-")
    # The human form names the same runs.
    text = _cli("lineage", decision)
    assert text.returncode == 0
    assert evaluation.mlflow_run_id in text.stdout


def test_an_unknown_decision_exits_1(store_env: Settings) -> None:
    done = _cli("lineage", "no-such-decision", "--json")
    assert done.returncode == 1
    assert "unknown decision" in done.stderr
    assert done.stdout == ""
