"""Skill versions as MLflow registered model versions: tags, parent, evidence, aliases."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from adapters.tracking.skills import SkillTracker, model_name, register_tracked, transition_tracked
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.reflex.lifecycle import EvidenceKind, LifecycleError
from reflexmem.reflex.versions import transitions_of, version_info
from tests.integration.reflex_data import bad, next_version, ok, spec

S, K = SkillState, EvidenceKind


def walk(engine: sa.Engine, tracker: SkillTracker, skill_id: str, version: int) -> None:
    transition_tracked(
        engine, tracker, skill_id, version, S.VALIDATING, [ok(K.EVALUATION)], actor="t"
    )
    transition_tracked(
        engine,
        tracker,
        skill_id,
        version,
        S.LIMITED,
        [ok(K.REPLAY)],
        actor="t",
        rollout_fraction=0.2,
    )


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[sa.Engine]:
    from adapters import migrate
    from adapters.db import make_engine

    eng = make_engine(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    migrate.upgrade(eng)
    yield eng
    eng.dispose()


def test_every_version_is_a_model_version_with_lineage_and_aliases(
    sqlite_engine: sa.Engine, mlflow_uri: str, tmp_path: Path
) -> None:
    engine = sqlite_engine
    tracker = SkillTracker(mlflow_uri, artifact_root=tmp_path / "artifacts")
    first = register_tracked(engine, tracker, spec())
    assert first.mlflow_model_version == "1"
    assert register_tracked(engine, tracker, spec()).mlflow_model_version == "1"  # idempotent
    walk(engine, tracker, "filing_kind_rules", 1)
    assert tracker.aliases("filing_kind_rules") == {"challenger": "1"}
    transition_tracked(
        engine, tracker, "filing_kind_rules", 1, S.ACTIVE, [ok(K.SHADOW), ok(K.ROLLOUT)], actor="t"
    )
    assert tracker.aliases("filing_kind_rules") == {"champion": "1"}

    second = register_tracked(engine, tracker, next_version())
    assert second.mlflow_model_version == "2"
    walk(engine, tracker, "filing_kind_rules", 2)
    assert tracker.aliases("filing_kind_rules") == {"champion": "1", "challenger": "2"}
    transition_tracked(
        engine, tracker, "filing_kind_rules", 2, S.ACTIVE, [ok(K.SHADOW), ok(K.ROLLOUT)], actor="t"
    )
    assert tracker.aliases("filing_kind_rules") == {"champion": "2"}

    client = tracker.client
    name = model_name("filing_kind_rules")
    v1, v2 = (client.get_model_version(name, v) for v in ("1", "2"))
    assert v1.tags["reflexmem.lifecycle_state"] == "retired"
    assert v2.tags["reflexmem.lifecycle_state"] == "active"
    assert (v1.tags["reflexmem.parent_version"], v2.tags["reflexmem.parent_version"]) == (
        "none",
        "1",
    )
    assert v2.tags["reflexmem.source_experiences"].split(",")[0] == "exp-a-src-01"
    assert v2.tags["reflexmem.source_experience_count"] == "4"
    assert str(client.get_model_version_by_alias(name, "champion").version) == "2"
    yaml_path = client.download_artifacts(v2.run_id, "skill/filing_kind_rules.yaml", str(tmp_path))
    assert "skill_id: filing_kind_rules" in Path(yaml_path).read_text()
    assert str(tmp_path / "artifacts") in client.get_run(v2.run_id).info.artifact_uri

    with engine.connect() as conn:
        moves = transitions_of(conn, "filing_kind_rules", 2)
        assert version_info(conn, "filing_kind_rules", 2).mlflow_model_version == "2"
    active_move = moves[-1]
    run = client.get_run(active_move.mlflow_run_id)
    assert run.data.tags["reflexmem.to_state"] == "active"
    assert run.data.metrics["rollout.treated"] == 40.0
    assert run.data.metrics["shadow.passed"] == 1.0
    evidence = Path(client.download_artifacts(run.info.run_id, "evidence.json", str(tmp_path)))
    assert [e["kind"] for e in json.loads(evidence.read_text())] == ["shadow", "rollout"]


def test_quarantine_removes_the_champion_and_a_refused_move_fails_its_run(
    sqlite_engine: sa.Engine, mlflow_uri: str, tmp_path: Path
) -> None:
    engine = sqlite_engine
    tracker = SkillTracker(mlflow_uri, artifact_root=tmp_path / "artifacts")
    register_tracked(engine, tracker, spec())
    with pytest.raises(LifecycleError, match="not a legal move"):
        transition_tracked(
            engine,
            tracker,
            "filing_kind_rules",
            1,
            S.ACTIVE,
            [ok(K.SHADOW), ok(K.ROLLOUT)],
            actor="t",
        )
    refused = tracker.client.search_runs(
        [tracker.experiment_id()], "tags.`reflexmem.kind` = 'skill-transition'"
    )
    assert [r.info.status for r in refused] == ["FAILED"]
    assert "would skip" in refused[0].data.tags["reflexmem.refused"]
    walk(engine, tracker, "filing_kind_rules", 1)
    transition_tracked(
        engine, tracker, "filing_kind_rules", 1, S.ACTIVE, [ok(K.SHADOW), ok(K.ROLLOUT)], actor="t"
    )
    transition_tracked(
        engine, tracker, "filing_kind_rules", 1, S.QUARANTINED, [bad(K.DRIFT)], actor="audit"
    )
    assert tracker.aliases("filing_kind_rules") == {}
    mv = tracker.client.get_model_version(model_name("filing_kind_rules"), "1")
    assert mv.tags["reflexmem.lifecycle_state"] == "quarantined"
