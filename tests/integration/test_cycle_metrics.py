"""The cycle's parent run logs what happened, distillation inside the episodes stage included."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
import sqlalchemy as sa

from reflexmem.operations.cycle import CycleParams, CycleReport, run_cycle
from reflexmem.operations.resources import NullTracker
from reflexmem.operations.runner import DirectRunner
from tests.support import AS_OF, make_resources, seed_ledger

if TYPE_CHECKING:
    from adapters.tracking.eval import EvaluationTracker


class SummaryTracker(NullTracker):
    """A tracker that keeps the summaries cycles close with (and records nothing else)."""

    def __init__(self) -> None:
        self.closed: list[tuple[str, dict[str, float]]] = []

    def end_cycle(self, cycle_id: str, status: str, summary: Mapping[str, float]) -> None:
        self.closed.append((status, dict(summary)))


def tracked_cycle(
    engine: sa.Engine, tmp: Path, mlflow_uri: str
) -> tuple[EvaluationTracker, CycleReport]:
    """One cycle over 1,200 seeded decisions, tracked in MLflow: the tracker and its report."""
    from adapters.tracking.eval import EvaluationTracker
    from tests.support import registry

    tracker = EvaluationTracker(
        mlflow_uri, ledger_url=str(engine.url), artifact_root=tmp / "artifacts", registry=registry()
    )
    res = make_resources(engine, tracker=tracker)
    seed_ledger(res, tmp, n=2400)  # enough two-week blocks per role to form a rule
    return tracker, run_cycle(DirectRunner(res), CycleParams(as_of=AS_OF))


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
    rules = ("rules_promoted", "rules_confirmed", "rules_rejected", "rules_followed")
    assert sum(summary[k] for k in rules) == tiers.get("procedural", 0)
    assert summary["windows_distilled"] == sum(d.windows for d in report.memory.distilled) > 0
    assert summary["episodes"] == tiers["episodic"]
    assert summary["decisions_checked"] == 1200


def test_every_distillation_batch_is_a_run_nested_in_its_cycle_with_its_versions(
    engine: sa.Engine, tmp_path: Path, mlflow_uri: str
) -> None:
    import mlflow

    from adapters.tracking.memory import EXPERIMENT, VERSIONS_FILE

    tracker, report = tracked_cycle(engine, tmp_path, mlflow_uri)
    assert report.cycle is not None
    parent = report.cycle.mlflow_run_id
    batches = [d for d in report.memory.distilled if d.windows]
    assert batches
    assert all(d.mlflow_run_id is not None for d in batches)
    client = tracker.client
    experiment = client.get_experiment_by_name(EXPERIMENT)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    assert {r.info.run_id for r in runs} == {d.mlflow_run_id for d in batches}
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {parent}
    assert sum(r.data.metrics["pattern_versions"] for r in runs) == sum(d.patterns for d in batches)
    with engine.connect() as conn:
        pattern = conn.execute(
            sa.text("SELECT entry_id FROM memory_entries WHERE tier = 'semantic' LIMIT 1")
        ).scalar_one()
    found = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.`reflexmem.pattern_ids` LIKE '%,{pattern},%'",
    )
    assert len(found) == 1
    path = mlflow.artifacts.download_artifacts(
        run_id=found[0].info.run_id,
        artifact_path=VERSIONS_FILE,
        dst_path=str(tmp_path / "dl"),
        tracking_uri=mlflow_uri,
    )
    versions = pl.read_parquet(path)
    assert pattern in versions["entry_id"].to_list()
    assert set(versions["tier"].to_list()) <= {"semantic", "procedural"}
    with engine.connect() as conn:
        stamped: dict[str, str | None] = dict(
            conn.execute(sa.text("SELECT entry_id, mlflow_run_id FROM memory_entries")).all()
        )
        unlinked = conn.execute(
            sa.text(
                "SELECT COUNT(*) FROM memory_entries WHERE tier <> 'episodic' "
                "AND mlflow_run_id IS NULL"
            )
        ).scalar_one()
    assert unlinked == 0  # every pattern and rule version, followed rules' included
    for run in runs:  # every version a batch wrote or moved names that batch's run
        listed = run.data.tags["reflexmem.pattern_ids"] + run.data.tags["reflexmem.rule_ids"]
        ids = [i for i in listed.split(",") if i and not i.endswith("...")]
        assert ids
        assert all(stamped[i] in {d.mlflow_run_id for d in batches} for i in ids)
    assert stamped[pattern] == found[0].info.run_id


def test_lineage_reaches_pattern_and_rule_with_the_run_that_made_each(
    engine: sa.Engine, tmp_path: Path, mlflow_uri: str
) -> None:
    import mlflow

    from adapters.lineage import Links, pick_decision, trace
    from adapters.tracking.memory import EXPERIMENT, VERSIONS_FILE

    tracker, report = tracked_cycle(engine, tmp_path, mlflow_uri)
    with engine.connect() as conn:
        decision = pick_decision(conn)
        assert decision is not None
        chain = trace(conn, decision, Links(tracker.client, "http://ui"))
    assert chain is not None
    learned = chain.of("pattern") + chain.of("rule")
    assert chain.of("pattern"), "the decision's case took part in a pattern"
    assert chain.of("rule"), "and the pattern formed a rule"
    experiment = tracker.client.get_experiment_by_name(EXPERIMENT).experiment_id
    cycle_run = report.cycle.mlflow_run_id if report.cycle else None
    for step in learned:
        assert step.mlflow_run_id is not None, step
        assert step.url is not None
        assert step.mlflow_run_id in step.url
        assert f"/experiments/{experiment}/" in step.url
        assert step.detail["cycle_mlflow_run_id"] == cycle_run
        # the run's versions table lists the version the step shows (its ID tags are
        # cut at a few thousand characters, the ledger's link is not)
        path = mlflow.artifacts.download_artifacts(
            run_id=step.mlflow_run_id,
            artifact_path=VERSIONS_FILE,
            dst_path=str(tmp_path / "dl" / step.mlflow_run_id),
            tracking_uri=mlflow_uri,
        )
        newest = step.detail.get("current_id", step.id)
        assert newest in pl.read_parquet(path)["entry_id"].to_list()
