from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from adapters.tracking.structures import MODEL, StructureRegistry, StructureTracker
from reflexmem.operations.runner import DirectRunner
from reflexmem.operations.structures import run_structure_search, show_structures
from reflexmem.structures import operations as ops
from reflexmem.structures import persist, rollout
from reflexmem.structures.evaluate import replay
from reflexmem.structures.experiment_b import candidates
from reflexmem.structures.mutations import Step
from reflexmem.structures.office import SKILLS, OfficeEnvironment
from reflexmem.structures.office_tasks import stream, task_sets
from reflexmem.structures.refusals import StructureRefused
from reflexmem.structures.runtime import SkillAnswer, SkillContext, SkillFn
from tests.integration.structure_drift import narrowed_and_repinned
from tests.support import make_resources


def _url(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _count(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_search_registers_versions_in_ledger_and_mlflow(
    engine: sa.Engine, mlflow_uri: str, tmp_path: Path
) -> None:
    artifacts = (tmp_path / "artifacts").as_uri()
    res = replace(make_resources(engine), structure_tracker=StructureTracker(mlflow_uri, artifacts))
    out = run_structure_search(DirectRunner(res)).summary
    assert out["registered"]
    winner, root = out["registered_id"], "office-all-shared"
    with engine.connect() as conn:
        w = persist.get_version(conn, winner)
        r = persist.get_version(conn, root)
        parents = persist.lineage_parents(conn, winner)
        archive = persist.archive_of(conn, out["search_id"])
        kinds = [e["kind"] for e in persist.events(conn)]
    assert w is not None
    assert r is not None
    assert w.structure.parent_id == root
    assert (w.lifecycle, r.lifecycle) == ("active", "retired")
    assert [p["parent_id"] for p in parents] == [root]
    assert [s.operator for s in w.steps] == ["delete_edge", "delete_edge", "conditionalize_edge"]
    assert len(archive) == 2
    assert {a["passes_floor"] for a in archive} == {True, False}
    assert (kinds.count("registered"), kinds.count("activated")) == (2, 2)

    registry = StructureRegistry(mlflow_uri, artifacts)
    exp = registry.client.get_experiment_by_name("structure-versions")
    assert exp.artifact_location == artifacts
    mv_root, mv_win = registry.version_of(root), registry.version_of(winner)
    assert mv_root is not None
    assert mv_win is not None
    assert (r.mlflow_model, r.mlflow_version) == (MODEL, str(mv_root.version))
    assert w.mlflow_version == str(mv_win.version)
    assert mv_win.tags["reflexmem.parent_id"] == root
    assert mv_win.tags["reflexmem.parent_version"] == str(mv_root.version)
    assert mv_win.tags["reflexmem.operator"] == "delete_edge+delete_edge+conditionalize_edge"
    assert mv_win.tags["reflexmem.selection_success.receipt"] == "1.0000"
    for alias in (
        "current",
        "current-document",
        "current-image",
        "current-receipt",
        "current-schedule",
    ):
        assert registry.by_alias(alias).version == mv_win.version
    assert yaml.safe_load(registry.structure_yaml(mv_win.version)) == w.structure.to_data() | {
        "lifecycle": "validating"
    }
    run = registry.client.get_run(mv_win.run_id)
    contexts = {
        tag.value
        for d in run.inputs.dataset_inputs
        for tag in d.tags
        if tag.key == "mlflow.data.context"
    }
    assert contexts == {"generation", "selection", "final_test"}
    assert run.data.metrics["selection_cost"] == 1.0
    assert run.data.metrics["test_success_receipt_schedule"] == 1.0

    again = run_structure_search(DirectRunner(res)).summary  # from the new current: nothing better
    assert not again["registered"]
    assert _count(engine, persist.V) == 2
    shown = show_structures(res)
    assert shown["current"] == winner
    assert [link["structure_id"] for link in shown["lineage"]] == [winner, root]


def _admit(engine: sa.Engine, tmp_path: Path, data: dict[str, Any], name: str) -> StructureRefused:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(StructureRefused) as info:
        ops.admit_file(engine, path)
    return info.value


def _faulty(ctx: SkillContext) -> SkillAnswer:
    ans = SKILLS["extract-receipt@1"][1](ctx)
    if ans.status == "ok":  # a broken skill version: the amount travels as text
        return SkillAnswer("ok", ans.value, {**ans.emit, "amount": str(ans.emit["amount"])})
    return ans


class FaultyEnvironment(OfficeEnvironment):
    def skill(self, version: str) -> tuple[str, SkillFn]:
        if version == "extract-receipt@9":
            return "extract_fields", _faulty
        return super().skill(version)


def test_bad_input_is_refused_recorded_and_changes_nothing(
    engine: sa.Engine, tmp_path: Path
) -> None:
    env = FaultyEnvironment()
    sets = task_sets(env, "composite", 0)
    root = candidates()["all_shared"]
    ops.ensure_root(engine, "office", root, replay(root, env, sets.selection))
    cond = candidates()["conditional"]
    ops.admit_file(engine, _path(tmp_path, cond.to_data(), "ok.yaml"))  # a valid candidate
    with engine.connect() as conn:
        active_before = persist.active_bundle_id(conn, "office")

    data = cond.to_data() | {"structure_id": "office-bad-schema"}
    data["edges"] = [{**data["edges"][0], "message_schema": 7}]
    schema = _admit(engine, tmp_path, data, "schema.yaml")
    assert {(r.field, r.check) for r in schema.refusals} == {("edges[0].message_schema", "schema")}

    data = cond.to_data() | {"structure_id": "office-wide"}
    data["modules"]["image"]["allowed_tools"] = ["local-ocr", "place-order"]
    wide = _admit(engine, tmp_path, data, "wide.yaml")
    assert [(r.source, r.field, r.check) for r in wide.refusals] == [
        (str(tmp_path / "wide.yaml"), "modules.image.allowed_tools", "no_widening")
    ]
    orphan = _admit(
        engine, tmp_path, cond.to_data() | {"structure_id": "o", "parent_id": "nope"}, "o.yaml"
    )
    assert orphan.refusals[0].check == "parent"

    with pytest.raises(StructureRefused) as mut:
        ops.mutate(
            engine,
            root.structure_id,
            Step("narrow_scope", {"module": "image", "knowledge": ["images", "docs"]}),
        )
    assert mut.value.refusals[0].source == "narrow_scope"

    repinned = ops.mutate(
        engine,
        "office-conditional",
        Step("repin", {"skills": {"extract-receipt": "extract-receipt@9"}}),
    )
    rollout.activate(engine, "lab", repinned.child.structure_id)  # another scope
    receipts = [t for t in sets.test if t.family == "receipt"]
    _, results = rollout.run_active(engine, "lab", env, receipts)
    assert {(r.outcome, r.refused_messages) for r in results} == {("hold", 1)}

    with engine.connect() as conn:
        events = persist.events(conn, ["refused_file", "refused_mutation", "refused_message"])
        stored = {row[0] for row in conn.execute(sa.select(persist.V.c.structure_id))}
        active_after = persist.active_bundle_id(conn, "office")
    by_kind = {k: [e for e in events if e["kind"] == k] for k in {e["kind"] for e in events}}
    assert len(by_kind["refused_file"]) == 3
    assert by_kind["refused_mutation"][0]["check_name"] == "no_widening"
    assert len(by_kind["refused_message"]) == len(receipts)
    assert all("must be number" in e["reason"] for e in by_kind["refused_message"])
    assert stored == {root.structure_id, "office-conditional", repinned.child.structure_id}
    assert active_after == active_before


def _path(tmp_path: Path, data: dict[str, Any], name: str) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_drift_quarantines_and_rolls_back_the_bundle_and_replay_matches(engine: sa.Engine) -> None:
    env = OfficeEnvironment()
    sets = task_sets(env, "composite", 0)
    root = candidates()["all_shared"]
    ops.ensure_root(engine, "office", root, replay(root, env, sets.selection))
    with pytest.raises(rollout.RollbackRefused):
        rollout.quarantine_and_rollback(engine, "office", rollout.check_drift(engine, "office"))
    cond = ops.mutate(
        engine, root.structure_id, Step("delete_edge", {"edge": "document->schedule"})
    )
    b1 = rollout.activate(
        engine, "office", cond.child.structure_id, replay(cond.child, env, sets.selection)
    )
    live = stream(env, "composite", 1, rare_every=4)
    _, before = rollout.run_active(engine, "office", env, live)
    assert all(r.solved for r in before)

    b2_struct = narrowed_and_repinned(engine, cond.child.structure_id)
    validation = stream(env, "composite", 3, per_family=40)  # no rare type: it looks fine
    b2 = rollout.activate(
        engine, "office", b2_struct.structure_id, replay(b2_struct, env, validation)
    )
    recorded, under_b2 = rollout.replay_recorded(engine, "office", env, b1.bundle_id)
    assert recorded != under_b2  # the change really changes results on B1's episodes
    rollout.run_active(
        engine, "office", env, stream(env, "composite", 2, per_family=40, rare_every=4)
    )

    report = rollout.check_drift(engine, "office")
    assert report.drifted
    assert [f.family for f in report.families if f.drifted] == ["document"]
    back = rollout.quarantine_and_rollback(engine, "office", report)
    assert back.quarantined == b2
    assert back.restored == b1
    found = rollout.active(engine, "office")
    assert found is not None
    bundle, structure = found
    assert (bundle.structure_id, bundle.skill_versions, bundle.index_version) == (
        cond.child.structure_id,
        ("classify-document@1", "extract-receipt@1", "schedule-event@1"),
        "office-index@1",
    )
    assert structure.fingerprint() == cond.child.fingerprint()
    with engine.connect() as conn:
        b2_row = persist.bundle_row(conn, b2.bundle_id)
        b2_version = persist.get_version(conn, b2_struct.structure_id)
        cond_version = persist.get_version(conn, cond.child.structure_id)
        assert b2_row is not None
        assert b2_row["state"] == "quarantined"
        assert b2_version is not None
        assert b2_version.lifecycle == "quarantined"
        assert cond_version is not None
        assert cond_version.lifecycle == "active"
        kinds = [e["kind"] for e in persist.events(conn, ["drift", "quarantined", "rolled_back"])]
    assert kinds == ["drift", "quarantined", "rolled_back"]
    recorded, replayed = rollout.replay_recorded(engine, "office", env, b1.bundle_id)
    assert len(recorded) == len(live)
    assert replayed == recorded
