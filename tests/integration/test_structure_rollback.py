"""Drift -> quarantine -> rollback as a product feature: the operation, the CLI, MLflow.

Real ledgers (SQLite and PostgreSQL through the `engine` fixture), real structures and
episodes, a real MLflow store; nothing is mocked.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from adapters.tracking.structures import StructureRegistry, StructureTracker
from reflexmem.operations.structure_audit import (
    StructureAuditRefused,
    audit_structures,
    rollback_structure,
)
from reflexmem.structures import persist, restore, rollout
from tests.integration.structure_drift import SCOPE, drift_under_b, steady_under_b, two_bundles
from tests.support import make_resources

FAMILIES = ["document", "image", "receipt", "schedule"]


def _ledger(engine: sa.Engine) -> dict[str, Any]:
    """Everything a rollback may change: bundles, pointers, lifecycles, events."""
    with engine.connect() as conn:
        return {
            "bundles": sorted(
                (r.bundle_id, r.state, r.index_version, str(r.activated_at))
                for r in conn.execute(sa.select(persist.B))
            ),
            "pointers": sorted(tuple(r) for r in conn.execute(sa.select(persist.P))),
            "lifecycles": sorted(
                tuple(r)
                for r in conn.execute(sa.select(persist.V.c.structure_id, persist.V.c.lifecycle))
            ),
            "events": len(persist.events(conn)),
        }


def _pins(engine: sa.Engine, bundle_id: str) -> tuple[dict[str, str], dict[str, str]]:
    with engine.connect() as conn:
        row = persist.bundle_row(conn, bundle_id)
        assert row is not None
        return restore.pin_checksums(conn, row), restore.recorded_pins(conn, row)


def test_drift_quarantines_b_and_restores_a_with_its_pins(engine: sa.Engine) -> None:
    setup = two_bundles(engine)
    drift_under_b(engine, setup.env)
    a_now, a_recorded = _pins(engine, setup.a.bundle_id)
    assert a_now == a_recorded  # recorded by A's activation
    assert set(a_recorded) == {"structure", "skill_versions", "index_version", "bundle"}
    assert a_recorded["bundle"] == setup.a.bundle_id

    report = audit_structures(make_resources(engine))  # no tracking configured

    (office,) = report.scopes
    assert office.scope == SCOPE
    assert office.drifted
    assert office.drift is not None
    assert [f["family"] for f in office.drift["families"] if f["drifted"]] == ["document"]
    assert (office.quarantined, office.restored) == (setup.b.bundle_id, setup.a.bundle_id)
    assert office.pins_before == office.pins_after == a_recorded
    assert office.mlflow is None
    found = rollout.active(engine, SCOPE)
    assert found is not None
    assert found[0] == setup.a
    assert found[1].fingerprint() == setup.a_structure.fingerprint()
    with engine.connect() as conn:
        b_row = persist.bundle_row(conn, setup.b.bundle_id)
        b_version = persist.get_version(conn, setup.b_structure.structure_id)
        a_version = persist.get_version(conn, setup.a_structure.structure_id)
        events = persist.events(conn, ["drift", "quarantined", "rolled_back"])
    assert b_row is not None
    assert b_row["state"] == "quarantined"
    assert (b_version and b_version.lifecycle, a_version and a_version.lifecycle) == (
        "quarantined",
        "active",
    )
    assert [e["kind"] for e in events] == ["drift", "quarantined", "rolled_back"]
    assert {e["bundle_id"] for e in events} == {setup.b.bundle_id}
    assert events[-1]["detail"]["restored"] == setup.a.bundle_id
    assert events[-1]["detail"]["pins_after"] == a_recorded
    assert _pins(engine, setup.a.bundle_id) == (a_recorded, a_recorded)

    before = _ledger(engine)
    again = audit_structures(make_resources(engine))  # A has no drift: nothing moves
    assert [(s.drifted, s.restored) for s in again.scopes] == [(False, None)]
    assert _ledger(engine) == before
    elsewhere = audit_structures(make_resources(engine), scope="nowhere")
    assert [(s.scope, s.skipped) for s in elsewhere.scopes] == [("nowhere", "no active bundle")]


def test_no_drift_changes_nothing(engine: sa.Engine) -> None:
    setup = two_bundles(engine)
    steady_under_b(engine, setup.env)
    before = _ledger(engine)

    report = audit_structures(make_resources(engine))

    (office,) = report.scopes
    assert office.active == setup.b.bundle_id
    assert not office.drifted
    assert office.drift is not None
    assert office.drift["families"]  # it was tested, family by family
    assert (office.quarantined, office.restored, office.refused) == (None, None, None)
    assert _ledger(engine) == before
    found = rollout.active(engine, SCOPE)
    assert found is not None
    assert found[0] == setup.b


@pytest.mark.parametrize("tamper", ["index_version", "yaml"])
def test_changed_pins_refuse_the_rollback_and_change_nothing(
    engine: sa.Engine, tamper: str
) -> None:
    setup = two_bundles(engine)
    drift_under_b(engine, setup.env)
    with engine.begin() as conn:
        if tamper == "index_version":
            conn.execute(
                persist.B.update()
                .where(persist.B.c.bundle_id == setup.a.bundle_id)
                .values(index_version="office-index@9")
            )
        else:
            conn.execute(  # still a valid structure file, but not the one that ran
                persist.V.update()
                .where(persist.V.c.structure_id == setup.a_structure.structure_id)
                .values(yaml=persist.V.c.yaml + "\n# edited\n")
            )
    before = _ledger(engine)

    with pytest.raises(StructureAuditRefused) as info:
        audit_structures(make_resources(engine))

    assert "pins changed" in str(info.value)
    (office,) = info.value.report.scopes
    assert office.drifted
    assert office.restored is None
    assert _ledger(engine) == before
    found = rollout.active(engine, SCOPE)
    assert found is not None
    assert found[0].bundle_id == setup.b.bundle_id


def _cli(*args: str) -> tuple[int, str, str]:
    from apps.cli import app

    out = CliRunner().invoke(app, ["structures", *args])
    assert out.exception is None or isinstance(out.exception, SystemExit), out.exception
    return out.exit_code, out.stdout, out.stderr


def test_cli_drift_and_rollback_with_to_and_its_errors(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_uri: str
) -> None:
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REFLEX_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    monkeypatch.setenv("REFLEX_MLFLOW_TRACKING_URI", mlflow_uri)
    monkeypatch.setenv("REFLEX_ARTIFACT_ROOT", str(tmp_path / "artifacts"))
    setup = two_bundles(engine)
    drift_under_b(engine, setup.env)
    untouched = _ledger(engine)

    code, out, _ = _cli("drift", "--json")
    assert code == 0
    (office,) = json.loads(out)["scopes"]
    assert (office["drifted"], office["restore"]) == (True, setup.a.bundle_id)
    assert office["pins_before"] == _pins(engine, setup.a.bundle_id)[1]
    assert _ledger(engine) == untouched  # drift only reports

    for args, message in [
        (("--scope", "nowhere"), "unknown scope"),
        (("--to", "bundle-0000000000000000"), "has no bundle, structure or version"),
        (("--to", setup.b.bundle_id), "is the active bundle"),
    ]:
        code, out, err = _cli("rollback", *args, "--json")
        assert (code, out) == (2, "")
        assert message in err
        assert "Traceback" not in err
    assert _cli("drift", "--scope", "nowhere")[0] == 2
    assert _ledger(engine) == untouched

    code, out, _ = _cli("rollback", "--to", setup.root.structure_id, "--json")
    assert code == 0
    done = json.loads(out)
    assert (done["quarantined"], done["restored"]) == (setup.b.bundle_id, setup.root.bundle_id)
    assert done["pins_before"] == done["pins_after"] == _pins(engine, setup.root.bundle_id)[1]
    found = rollout.active(engine, SCOPE)
    assert found is not None
    assert found[0] == setup.root
    with engine.connect() as conn:
        kinds = [e["kind"] for e in persist.events(conn, ["drift", "quarantined", "rolled_back"])]
    assert kinds == ["quarantined", "rolled_back"]  # a manual rollback, not a drift

    after = _ledger(engine)
    refusals: list[tuple[tuple[str, ...], str]] = [
        (("--to", setup.b.bundle_id), "is quarantined"),
        ((), "has no earlier verified bundle"),  # the root was the first bundle
    ]
    for more, message in refusals:
        code, out, err = _cli("rollback", *more)
        assert (code, out) == (2, "")
        assert message in err
    assert _ledger(engine) == after


def test_rollback_moves_the_mlflow_aliases_back(
    engine: sa.Engine, mlflow_uri: str, tmp_path: Path
) -> None:
    artifacts = (tmp_path / "artifacts").as_uri()
    tracker = StructureTracker(mlflow_uri, artifacts)
    res = replace(make_resources(engine), structure_tracker=tracker)
    setup = two_bundles(engine)
    a_id, b_id = setup.a_structure.structure_id, setup.b_structure.structure_id
    a_mv = tracker.register(engine, a_id, families=FAMILIES)["version"]
    b_mv = tracker.register(engine, b_id, families=FAMILIES)["version"]
    registry = StructureRegistry(mlflow_uri, artifacts)
    aliases = ["current", *(f"current-{f}" for f in FAMILIES)]
    assert {str(registry.by_alias(a).version) for a in aliases} == {b_mv}
    drift_under_b(engine, setup.env)

    report = rollback_structure(res, SCOPE)  # default target: the previous verified bundle
    assert report.restored == setup.a.bundle_id
    assert report.mlflow == {
        "model": registry.model,
        "from_version": b_mv,
        "to_version": a_mv,
        "aliases": sorted(aliases),
        "moved": True,
    }
    assert {str(registry.by_alias(a).version) for a in aliases} == {a_mv}
    assert registry.client.get_model_version(registry.model, b_mv).aliases == []
    b_version, a_version = registry.version_of(b_id), registry.version_of(a_id)
    assert b_version is not None
    assert a_version is not None
    assert b_version.tags["reflexmem.lifecycle"] == "quarantined"
    assert a_version.tags["reflexmem.lifecycle"] == "active"


def test_an_mlflow_failure_leaves_the_ledger_unmoved(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tracking server that is not there (nothing listens on port 9), asked once.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "2")
    tracker = StructureTracker("http://127.0.0.1:9", (tmp_path / "artifacts").as_uri())
    res = replace(make_resources(engine), structure_tracker=tracker)
    setup = two_bundles(engine)
    drift_under_b(engine, setup.env)
    before = _ledger(engine)

    with pytest.raises(Exception, match=r"127\.0\.0\.1"):
        audit_structures(res)

    assert _ledger(engine) == before
    found = rollout.active(engine, SCOPE)
    assert found is not None
    assert found[0] == setup.b
