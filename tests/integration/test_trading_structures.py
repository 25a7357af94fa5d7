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
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from apps.cli import app
from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.runner import DirectRunner
from reflexmem.operations.structures import SearchParams, run_structure_search
from reflexmem.reflex.rule_checks import rule_check_file
from reflexmem.reflex.skills import parse_skill
from reflexmem.reflex.versions import register_skill
from reflexmem.structures import persist, rollout
from reflexmem.structures.trading import subgoal
from tests.support import AS_OF, make_resources, seed_ledger
from tests.unit.reflex.trading_data import confirmed_rule


def test_trading_search_runs_on_the_ledger_and_reports_its_edges(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path, n=1500)
    run_cycle(DirectRunner(res), CycleParams(as_of=AS_OF))
    with engine.connect() as conn:
        role, symbol = conn.execute(
            sa.text(
                "SELECT role_id, symbol FROM trading_decisions GROUP BY role_id, symbol "
                "ORDER BY COUNT(*) DESC, role_id, symbol LIMIT 1"
            )
        ).one()
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
        # The check's promotion on outcomes is tested elsewhere; here it is simply usable.
        conn.execute(
            sa.text("UPDATE skill_versions SET state = 'active' WHERE skill_id = :s"),
            {"s": spec.skill_id},
        )

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
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REFLEX_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    for name in ("REFLEX_MLFLOW_TRACKING_URI", "REFLEX_ARTIFACT_ROOT"):
        monkeypatch.delenv(name, raising=False)
    done = CliRunner().invoke(app, ["structures", "search", "--trading", "--json"])
    assert done.exit_code == 0, done.output
    again = json.loads(done.stdout)
    assert again["parent"] == active[1].structure_id
    assert "verdict" in again["edge_evidence"]
