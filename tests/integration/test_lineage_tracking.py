"""Lineage in MLflow on both ledgers: promotion sources, reflection runs, nesting per cycle."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import polars as pl
import pytest
import sqlalchemy as sa

from adapters.lineage import Links, trace
from adapters.tracking.context import VIEW
from adapters.tracking.eval import EvaluationTracker
from adapters.tracking.sets import digest
from reflexmem.operations import evaluation, reflection
from reflexmem.operations.cycle import CycleParams, run_maturation
from reflexmem.operations.runner import DirectRunner
from tests.support import AS_OF, make_resources, registry, seed_ledger

R = TypeVar("R")


def _tracked(engine: sa.Engine, tmp_path: Path, uri: str) -> Any:
    tracker = EvaluationTracker(
        uri, ledger_url=str(engine.url), artifact_root=tmp_path / "artifacts", registry=registry()
    )
    res = make_resources(engine, tracker=tracker)
    seed_ledger(res, tmp_path)
    return res, tracker


def test_a_promotion_names_its_source_batch_run_and_profile_version(
    engine: sa.Engine, tmp_path: Path, mlflow_uri: str
) -> None:
    res, tracker = _tracked(engine, tmp_path, mlflow_uri)
    first = run_maturation(DirectRunner(res), CycleParams(as_of=AS_OF))
    replayed = evaluation.replay(res, version=2)
    promoted = evaluation.promote(res, source_batch=replayed.batch_id)
    assert promoted.promoted == replayed.runs > 0
    assert promoted.profile_version == 2  # the promoted runs' version, never 0
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT profile_version FROM evaluation_batches WHERE batch_id = :b"),
            {"b": promoted.batch_id},
        ).scalar_one()
    assert stored == 2
    run = tracker.client.get_run(promoted.mlflow_run_id)
    assert run.info.run_name == f"promote-spy_daily-v2-{promoted.batch_id}"
    assert run.data.tags["reflexmem.source_batches"] == replayed.batch_id
    assert run.data.tags["reflexmem.source_mlflow_runs"] == replayed.mlflow_run_id
    assert run.data.params["source_batch"] == replayed.batch_id
    assert run.data.tags["reflexmem.profile_model_version"] == "2"
    assert run.data.tags["mlflow.source.type"] == "LOCAL"
    # The first promotion of the cycle is version 1 and names the first evaluation batch.
    initial = tracker.client.get_run(first.promotion.mlflow_run_id)
    assert initial.data.tags["reflexmem.source_batches"] == first.evaluation.batch_id
    assert initial.data.params["profile_version"] == "1"
    # Every profile version is a registered model version with its parent and YAML.
    versions = tracker.client.search_model_versions("name = 'reflexmem-profile.spy_daily'")
    by_version = {mv.tags["reflexmem.profile_version"]: mv for mv in versions}
    assert set(by_version) == {"1", "2"}
    assert by_version["2"].tags["reflexmem.parent_version"] == "1"
    assert by_version["1"].tags["reflexmem.parent_version"] == "none"
    model = tracker.client.get_registered_model("reflexmem-profile.spy_daily")
    assert model.aliases["default"] == by_version["1"].version
    with tempfile.TemporaryDirectory() as tmp:
        path = tracker.client.download_artifacts(
            by_version["2"].run_id, "definition/spy_daily.yaml", tmp
        )
        assert "signal_lookback_bars: 8" in Path(path).read_text()


def test_a_reflection_batch_is_one_run_with_its_lessons_and_decision_set(
    engine: sa.Engine, tmp_path: Path, mlflow_uri: str
) -> None:
    res, tracker = _tracked(engine, tmp_path, mlflow_uri)
    run_maturation(DirectRunner(res), CycleParams(as_of=AS_OF))
    report = reflection.reflect(res, "valuation")
    assert report.reflected > 0
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT mlflow_run_id FROM reflection_batches WHERE batch_id = :b"),
            {"b": report.batch_id},
        ).scalar_one()
        linked = pl.DataFrame(
            conn.execute(
                sa.text("SELECT c.case_id, rc.decision_id, rc.outcome_class, rc.lesson "
                        "FROM reflection_batch_cases c JOIN role_cases rc "
                        "ON rc.case_id = c.case_id WHERE c.batch_id = :b"),
                {"b": report.batch_id},
            ).all(),
            schema=["case_id", "decision_id", "outcome_class", "lesson"],
            orient="row",
        )  # fmt: skip
    assert stored == report.mlflow_run_id
    assert linked.height == report.reflected + report.failed
    run = tracker.client.get_run(report.mlflow_run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["reflexmem.batch_id"] == report.batch_id
    assert run.data.tags["reflexmem.roles"] == ",valuation,"
    assert run.data.tags["reflexmem.reflector"] == "rules"
    assert run.data.tags["reflexmem.role_skill"] == "reflexmem-role-skill.equity_research"
    for name, n in report.by_class.items():
        assert run.data.metrics[f"class_{name}"] == n
    assert run.data.metrics["lessons"] == report.lessons
    (dataset,) = [d.dataset for d in run.inputs.dataset_inputs]
    assert dataset.digest == digest(linked["decision_id"])
    assert dataset.source_type == "reflexmem-ledger"
    assert report.batch_id in dataset.source
    with tempfile.TemporaryDirectory() as tmp:
        lessons = pl.read_parquet(
            tracker.client.download_artifacts(report.mlflow_run_id, "lessons.parquet", tmp)
        )
    joined = lessons.join(linked, on="case_id", suffix="_ledger")
    assert joined.height == linked.height
    assert (joined["lesson"].fill_null("") == joined["lesson_ledger"].fill_null("")).all()
    assert (joined["outcome_class"] == joined["outcome_class_ledger"]).all()
    # The chain of one of its decisions, walked on this backend's ledger.
    decision = linked.filter(pl.col("lesson").is_not_null())["decision_id"][0]
    with engine.connect() as conn:
        found = trace(conn, decision, Links(tracker.client, "http://ui"))
    assert found is not None
    kinds = [s.kind for s in found.steps]
    assert kinds[:5] == ["decision", "preview", "execution", "position", "case"]
    assert {"evaluation", "promotion", "reflection", "lesson"} <= set(kinds)
    (step,) = found.of("reflection")
    assert (step.id, step.mlflow_run_id) == (report.batch_id, report.mlflow_run_id)
    assert step.url == (
        f"http://ui/#/experiments/{run.info.experiment_id}/runs/{run.info.run_id}{VIEW}"
    )
    with engine.connect() as conn:
        assert trace(conn, "no-such-decision", Links(None, "http://ui")) is None


class _Failing(DirectRunner):
    def run(self, op: Callable[..., R], /, **params: Any) -> R:
        if op is evaluation.promote:
            raise RuntimeError("promotion crashed")
        return super().run(op, **params)


def test_a_cycle_run_is_the_parent_of_its_batches_and_fails_with_them(
    engine: sa.Engine, tmp_path: Path, mlflow_uri: str
) -> None:
    res, tracker = _tracked(engine, tmp_path, mlflow_uri)
    with pytest.raises(RuntimeError, match="promotion crashed"):
        run_maturation(_Failing(res), CycleParams(as_of=AS_OF))
    cycles = tracker.client.search_runs(
        [tracker.store.experiment("learning-cycles")],
        filter_string="tags.`reflexmem.kind` = 'cycle'",
    )
    assert [c.info.status for c in cycles] == ["FAILED"]
    report = run_maturation(DirectRunner(res), CycleParams(as_of=AS_OF))  # nothing left to do
    assert report.cycle is not None
    assert report.evaluation.runs == 0
    # The evaluation batch of the failed cycle is nested under that failed cycle's run.
    evaluations = tracker.client.search_runs(
        [tracker.experiment_id()], filter_string="tags.`reflexmem.kind` = 'evaluate'"
    )
    (ev,) = evaluations
    assert ev.data.tags["mlflow.parentRunId"] == cycles[0].info.run_id
    assert ev.data.tags["reflexmem.cycle_id"] == cycles[0].data.tags["reflexmem.cycle_id"]
    assert ev.data.tags["reflexmem.symbols"].startswith(",")
    assert ev.data.tags["reflexmem.first_decided_at"] <= ev.data.tags["reflexmem.last_decided_at"]
    second = tracker.client.get_run(report.cycle.mlflow_run_id)
    assert second.info.status == "FINISHED"
    assert second.data.metrics["evaluated"] == 0
