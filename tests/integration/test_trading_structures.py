"""A structure search on the user's own roles and ledger, both backends.

After a cycle, one learned check (a real generated skill version, made active) belongs
to the role with the most decisions. `structures search --trading` starts from the
roles isolated, pinning that version; it stores and activates the root in scope
`trading`, searches with exploratory edges on time-ordered decisions, and prints for
each edge of the chosen structure its paired interval on the final test (or that no
edge earns its place). A second search starts from the scope's active structure.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from adapters.tracking.structures import StructureTracker
from apps.cli import app
from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.operations.structures import SearchParams, run_structure_search
from reflexmem.reflex.rule_checks import rule_check_file
from reflexmem.reflex.skills import SkillSpec, parse_skill
from reflexmem.reflex.versions import register_skill
from reflexmem.structures import persist, rollout
from reflexmem.structures.mutations import Step
from reflexmem.structures.operations import mutate
from reflexmem.structures.trading import module_id, subgoal
from tests.support import AS_OF, make_resources, seed_ledger
from tests.unit.reflex.trading_data import confirmed_rule


def _busiest(engine: sa.Engine) -> tuple[str, str]:
    """The (role, symbol) pair with the most decisions."""
    with engine.connect() as conn:
        role, symbol = conn.execute(
            sa.text(
                "SELECT role_id, symbol FROM trading_decisions GROUP BY role_id, symbol "
                "ORDER BY COUNT(*) DESC, role_id, symbol LIMIT 1"
            )
        ).one()
    return str(role), str(symbol)


def _cli_env(monkeypatch: pytest.MonkeyPatch, engine: sa.Engine, tmp_path: Path) -> None:
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REFLEX_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    for name in ("REFLEX_MLFLOW_TRACKING_URI", "REFLEX_ARTIFACT_ROOT"):
        monkeypatch.delenv(name, raising=False)


def _active_check(engine: sa.Engine, res: Resources, role: str, symbol: str) -> SkillSpec:
    """The role's generated "avoid <symbol>" check, registered and made active.

    Its promotion on outcomes is tested elsewhere; here it only has to be usable.
    """
    made = rule_check_file(
        confirmed_rule(f"symbol:{symbol}", -0.4, f"role:{role}"),
        role,
        res.registry,
        now=datetime(2024, 1, 1, tzinfo=UTC),
    )
    assert not isinstance(made, str)
    spec = parse_skill(made[1], f"test:{made[0]}.yaml", res.registry)
    with engine.begin() as conn:
        register_skill(conn, spec)
        conn.execute(
            sa.text("UPDATE skill_versions SET state = 'active' WHERE skill_id = :s"),
            {"s": spec.skill_id},
        )
    return spec


def test_trading_search_runs_on_the_ledger_and_reports_its_edges(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path, n=1500)
    run_cycle(DirectRunner(res), CycleParams(as_of=AS_OF))
    role, symbol = _busiest(engine)
    spec = _active_check(engine, res, role, symbol)

    found = run_structure_search(DirectRunner(res), SearchParams(environment="trading"))
    out = found.summary
    assert out["scope"] == "trading"
    assert out["environment"] == "trading"
    parent = found.result.parent.structure
    assert parent.edges == ()
    assert parent.pins.versions[spec.skill_id] == spec.key
    assert subgoal(role) in parent.handler_of
    evidence = out["edge_evidence"]
    assert evidence["final_test_decisions"] == out["final_test"][0]["tasks"] > 0
    assert evidence["verdict"].startswith(("edges earning", "no edge earns"))
    for row in evidence["edges"]:
        assert row["n"] == evidence["final_test_decisions"]
        assert row["low"] <= row["mean"] <= row["high"]
    names = [r["name"] for r in out["final_test"]]
    assert names[:2] == ["winner", "parent"]
    assert found.result.stats.evaluated > 0
    active = rollout.active(engine, "trading")
    assert active is not None
    with engine.connect() as conn:
        assert persist.has_version(conn, parent.structure_id)
    assert rollout.active(engine, "office") is None

    # The CLI runs the same search from the scope's active structure and prints JSON.
    _cli_env(monkeypatch, engine, tmp_path)
    done = CliRunner().invoke(app, ["structures", "search", "--trading", "--json"])
    assert done.exit_code == 0, done.output
    again = json.loads(done.stdout)
    assert again["parent"] == active[1].structure_id
    assert "verdict" in again["edge_evidence"]


def test_decisions_checked_under_the_active_structure_pin_it_and_borrow_its_lent_checks(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mlflow_uri: str
) -> None:
    tracker = StructureTracker(mlflow_uri, (tmp_path / "artifacts").as_uri())
    res = replace(make_resources(engine), structure_tracker=tracker)
    seed_ledger(res, tmp_path, n=1500)
    first = AS_OF - timedelta(days=40)
    run_cycle(DirectRunner(res), CycleParams(as_of=first))
    role, symbol = _busiest(engine)
    with engine.connect() as conn:
        other = conn.execute(
            sa.text(
                "SELECT role_id FROM trading_decisions WHERE role_id <> :r AND symbol = :s "
                "AND decided_at > :t GROUP BY role_id ORDER BY COUNT(*) DESC, role_id LIMIT 1"
            ),
            {"r": role, "s": symbol, "t": first},
        ).scalar_one()
    spec = _active_check(engine, res, role, symbol)
    run_structure_search(DirectRunner(res), SearchParams(environment="trading"))
    found = rollout.active(engine, "trading")
    assert found is not None
    # Lend the role's checks to the other role, and make that the active structure.
    step = Step(
        "add_edge",
        {
            "source": module_id(role),
            "target": module_id(other),
            "fields": ["checks"],
            "contract": "lend-checks-v1",
            "contract_fields": {"checks": "string"},
        },
    )
    child = mutate(engine, found[1].structure_id, step).child
    registered = tracker.register(engine, child.structure_id, families=[role, other])
    bundle = rollout.activate(engine, "trading", child.structure_id)

    run_cycle(DirectRunner(res), CycleParams(as_of=AS_OF))
    with engine.connect() as conn:
        ran = conn.execute(
            sa.text(
                "SELECT s.decision_id, s.bundle_id, d.role_id, d.symbol FROM decision_structures s "
                "JOIN trading_decisions d ON d.decision_id = s.decision_id"
            )
        ).all()
        lent = conn.execute(
            sa.text(
                "SELECT e.status, d.symbol FROM episodes e "
                "JOIN trading_decisions d ON d.decision_id = e.decision_id "
                "WHERE e.skill_id = :k AND d.role_id = :o AND e.case_id IS NULL"
            ),
            {"k": spec.skill_id, "o": other},
        ).all()
        early = conn.execute(
            sa.text(
                "SELECT COUNT(*) FROM decision_structures s JOIN trading_decisions d "
                "ON d.decision_id = s.decision_id WHERE d.decided_at <= :t"
            ),
            {"t": first},
        ).scalar_one()
    assert ran, "decisions checked after the structure was active pin its bundle"
    assert {r.bundle_id for r in ran} == {bundle.bundle_id}
    assert early == 0  # decisions checked before there was a trading structure pin none
    # The other role's decisions went through the lent check: its symbol held, others not.
    assert {s for status, s in lent if status == "hold"} == {symbol}
    assert any(s != symbol for status, s in lent if status == "success")

    _cli_env(monkeypatch, engine, tmp_path)
    decision = next(r.decision_id for r in ran if r.role_id == other)
    done = CliRunner().invoke(app, ["lineage", decision, "--json"])
    assert done.exit_code == 0, done.output
    steps = json.loads(done.stdout)["steps"]
    assert steps[-1]["kind"] == "structure"
    assert steps[-1]["id"] == child.structure_id
    assert steps[-1]["bundle_id"] == bundle.bundle_id
    assert steps[-1]["ran_under"] is True
    assert steps[-1]["mlflow_version"] == registered["version"]
    assert steps[-1]["url"]
    assert spec.key in steps[-1]["skill_versions"]
