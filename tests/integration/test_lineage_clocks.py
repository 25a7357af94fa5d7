"""`reflexmem lineage` and `reflexmem audit` at a valid time and a recorded time, both backends.

One cycle makes a decision's chain reach a procedural rule; a skill version built on the
decision's episode (registered at a later cycle clock) and a structure bundle pinning it
(valid later still) extend it. Asked `--as-of` just before the rule's valid time, the
chain keeps the case and lesson and leaves the rule out; at it, the rule is back, and
the skill and structure only from their own clocks. `--known-at` does the same on the
wall clock of the writes. Audit keeps the cases valid (matured) and admitted by then.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from adapters.lineage import pick_decision
from apps.cli import app
from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.runner import DirectRunner
from reflexmem.reflex.skills import SKILLS_DIR, parse_skill
from reflexmem.reflex.versions import register_skill
from reflexmem.structures import persist
from reflexmem.structures.bundle import Bundle
from reflexmem.structures.experiment_b import candidates
from tests.support import AS_OF, make_resources, seed_ledger

US = timedelta(microseconds=1)


def _cli(*args: str) -> dict[str, Any]:
    done = CliRunner().invoke(app, [*args, "--json"])
    assert done.exit_code == 0, done.output
    return dict(json.loads(done.stdout))


def _audit(*args: str) -> list[dict[str, Any]]:
    done = CliRunner().invoke(app, ["audit", "--limit", "100000", *args, "--json"])
    assert done.exit_code == 0, done.output
    rows = json.loads(done.stdout)["rows"]
    return [r for r in rows if r["kind"] == "case"]


def _steps(decision: str, *opts: str) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for s in _cli("lineage", decision, *opts)["steps"]:
        out.setdefault(s["kind"], []).append(s)
    return out


def _t(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _iso(value: datetime) -> str:
    return value.isoformat()


def test_lineage_and_audit_see_the_chain_as_it_stood_at_either_clock(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path, n=2400)  # enough two-week blocks per role to form a rule
    run_cycle(DirectRunner(res), CycleParams(as_of=AS_OF))
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REFLEX_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    for name in ("REFLEX_MLFLOW_TRACKING_URI", "REFLEX_ARTIFACT_ROOT"):
        monkeypatch.delenv(name, raising=False)
    with engine.connect() as conn:
        decision = pick_decision(conn)
    assert decision is not None
    now = _steps(decision)
    assert now["rule"], "the cycle made a rule behind this decision"
    rule = now["rule"][0]
    case, lesson = now["case"][0], now["lesson"][0]
    rule_valid, rule_recorded = _t(rule["valid_at"]), _t(rule["recorded_at"])
    case_valid = _t(case["valid_at"])
    assert case_valid < rule_valid  # the rule needed later episodes than this case
    assert _t(case["recorded_at"]) < rule_recorded

    # A skill version learned from the decision's episode at a later cycle clock, and a
    # structure bundle pinning it, valid later still.
    skill_clock, structure_clock = rule_valid + timedelta(days=3), rule_valid + timedelta(days=9)
    text = (SKILLS_DIR / "filing_kind_examples.yaml").read_text()
    text = text.replace("source_experiences: [", f"source_experiences: [{lesson['id']}, ", 1)
    spec = parse_skill(text, "test:filing_kind_examples.yaml", res.registry)
    root = candidates()["all_shared"]
    with engine.begin() as conn:
        register_skill(conn, spec, now=skill_clock)
        persist.save_version(conn, root, operator="root", valid_at=structure_clock)
        bundle = Bundle("b-clocks", "office", root.structure_id, (spec.key,), "index-v1")
        persist.save_bundle(conn, bundle, None)
    now = _steps(decision)
    assert [s["id"] for s in now["skill"]] == [spec.key]
    assert _t(now["skill"][0]["valid_at"]) == skill_clock
    assert [s["id"] for s in now["structure"]] == [root.structure_id]
    assert _t(now["structure"][0]["valid_at"]) == structure_clock
    skill_recorded = _t(now["skill"][0]["recorded_at"])
    structure_recorded = _t(now["structure"][0]["recorded_at"])
    assert rule_recorded < skill_recorded <= structure_recorded

    # Valid time: just before the rule was valid, the case and lesson are, the rule not.
    before = _steps(decision, "--as-of", _iso(rule_valid - US))
    assert [s["id"] for s in before["case"]] == [case["id"]]
    assert "lesson" in before
    assert not {"rule", "pattern", "skill", "structure"} & set(before)
    at = _steps(decision, "--as-of", _iso(rule_valid))
    assert rule["id"] in [s["id"] for s in at["rule"]]
    assert "skill" not in at
    assert [s["id"] for s in _steps(decision, "--as-of", _iso(skill_clock))["skill"]] == [spec.key]
    assert "structure" not in _steps(decision, "--as-of", _iso(structure_clock - US))
    assert "structure" in _steps(decision, "--as-of", _iso(structure_clock))
    assert "case" not in _steps(decision, "--as-of", _iso(case_valid - US))

    # Recorded time: the same cut on the wall clock of the writes.
    before = _steps(decision, "--known-at", _iso(rule_recorded - US))
    assert [s["id"] for s in before["case"]] == [case["id"]]
    assert not {"rule", "skill"} & set(before)
    at = _steps(decision, "--known-at", _iso(rule_recorded))
    assert rule["id"] in [s["id"] for s in at["rule"]]
    assert "skill" not in at
    assert "skill" in _steps(decision, "--known-at", _iso(skill_recorded))
    # Both clocks at once: valid long after, but not yet written.
    late = _steps(decision, "--as-of", _iso(AS_OF), "--known-at", _iso(rule_recorded - US))
    assert "rule" not in late
    assert "case" in late

    # Audit: the cases valid (matured) and admitted by then, each with its clocks.
    role = case["role_id"]
    every = _audit("--role", role)
    assert case["id"] in {r["case_id"] for r in every}
    assert all("valid_at" in r and "recorded_at" in r for r in every)
    assert case["id"] in {r["case_id"] for r in _audit("--role", role, "--as-of", _iso(case_valid))}
    earlier = _audit("--role", role, "--as-of", _iso(case_valid - US))
    assert case["id"] not in {r["case_id"] for r in earlier}
    assert all(_t(r["valid_at"]) <= case_valid - US for r in earlier)
    assert len(earlier) < len(every)
    admitted = _t(case["recorded_at"])  # (+1us: SQLite holds it with an offset suffix)
    known = _audit("--role", role, "--known-at", _iso(admitted - US))
    assert case["id"] not in {r["case_id"] for r in known}
    assert case["id"] in {
        r["case_id"] for r in _audit("--role", role, "--known-at", _iso(admitted + US))
    }
