"""A confirmed avoid-rule of the memory becomes a learned check on the ledger, on both backends.

The rule is written to the memory tables as distillation writes one (the production
builders); candidate generation turns it into a check once, and the lifecycle moves it
on realized returns alone. The figures of its outcome step are held to a plain polars
computation on the same decisions.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

from apps.cli import app
from reflexmem.ledger.enums import EntryState
from reflexmem.memory.ledger_store import LedgerMemoryStore
from reflexmem.operations import skill_lifecycle, skills
from reflexmem.operations.resources import Resources
from reflexmem.reflex.outcomes import MIN_HELD
from reflexmem.reflex.trading import judged_frame, read_episodes
from tests.integration.skill_data import clock_between, reflected
from tests.support import AS_OF, make_resources
from tests.unit.reflex.trading_data import confirmed_rule, formed_rule


def _reflected(engine: sa.Engine, tmp_path: Path) -> tuple[Resources, datetime, pl.DataFrame]:
    """A reflected ledger, a clock 40 % into it, and its judged decisions up to `AS_OF`."""
    res = make_resources(engine)
    created = clock_between(reflected(res, tmp_path), 0.4)
    with engine.connect() as conn:
        episodes = judged_frame(read_episodes(conn, res.registry, through=AS_OF), res.registry)
    return res, created, episodes


def test_a_confirmed_avoid_rule_becomes_a_check_judged_on_outcomes(
    engine: sa.Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    res, created, episodes = _reflected(engine, tmp_path)
    # every settled return comes with when it settled, after its decision, on both backends
    settled = episodes.filter(pl.col("realized_return").is_not_null())
    assert settled.height > 0
    assert settled["settled_at"].null_count() == 0
    assert (settled["settled_at"] > settled["decided_at_ts"]).all()
    later = episodes.filter(
        (pl.col("decided_at_ts") > created)
        & (pl.col("role_id") == "momentum")
        & pl.col("realized_return").is_not_null()
    )
    symbol = str(later["symbol"].mode().sort()[0])
    store = LedgerMemoryStore(engine)
    store.put(confirmed_rule(f"symbol:{symbol}", -0.4))
    policy = confirmed_rule("missing:technicals", -0.4)
    store.put(policy)

    report = skills.generate_candidates(res, as_of=created)
    key = f"momentum_avoid_symbol_{symbol.lower()}@1"
    assert key in report.registered
    assert "policy check" in report.skipped[policy.id]
    assert key not in skills.generate_candidates(res, as_of=created).registered  # once

    first_run = skill_lifecycle.advance_skills(res, as_of=created)
    (validated,) = [m for m in first_run.moves if m.skill == key]
    assert (validated.frm, validated.to) == ("candidate", "validating")
    assert validated.evidence["outcome"]["effect"] > 0  # the rule's confirmation, negated

    second = skill_lifecycle.advance_skills(res, as_of=AS_OF)
    held = later.filter(pl.col("symbol") == symbol)["realized_return"]
    passed = later.filter(pl.col("symbol") != symbol)["realized_return"]
    effect = float(passed.mean()) - float(held.mean())  # type: ignore[arg-type]
    assert held.len() >= MIN_HELD
    (step,) = [m for m in second.moves if m.skill == key and m.frm == "validating"]
    assert step.evidence["outcome"]["effect"] == pytest.approx(effect, abs=1e-4)
    assert step.evidence["outcome"]["n_held"] == held.len()
    assert step.to == ("limited" if effect > 0 else "rejected")

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("REFLEX_DATABASE_URL", engine.url.render_as_string(hide_password=False))
    out = CliRunner().invoke(app, ["skills", "status", "--json", "--as-of", AS_OF.isoformat()])
    assert out.exit_code == 0, out.output
    (row,) = [r for r in json.loads(out.output)["versions"] if f"{r['skill']}" == key]
    assert row["kind"] == "learned"


def test_a_formed_rule_makes_its_check_which_falls_with_the_rule(
    engine: sa.Engine, tmp_path: Path
) -> None:
    res, created, episodes = _reflected(engine, tmp_path)
    symbol = str(episodes.filter(pl.col("role_id") == "momentum")["symbol"].mode().sort()[0])
    confirmed = confirmed_rule(f"symbol:{symbol}", -0.4)
    formed = formed_rule(f"symbol:{symbol}", -0.4)
    store = LedgerMemoryStore(engine)
    store.put(formed)

    key = f"momentum_avoid_symbol_{symbol.lower()}@1"
    assert key in skills.generate_candidates(res, as_of=created).registered
    moved = skill_lifecycle.advance_skills(res, as_of=created).moves
    (validated,) = [m for m in moved if m.skill == key]
    assert (validated.frm, validated.to) == ("candidate", "validating")
    # the contrast it formed on, negated: the evidence to start replaying, not a test
    assert validated.evidence["outcome"]["effect"] == pytest.approx(
        -(formed.stats or {})["formed"]["effect"], abs=1e-4
    )

    # its rule fails its confirmatory test: the check is rejected with it, wherever it is
    store.set_state(formed.id, EntryState.SUPERSEDED)
    store.put(replace(confirmed, state=EntryState.RETIRED))
    report = skill_lifecycle.advance_skills(res, as_of=AS_OF)
    (fell,) = [m for m in report.moves if m.skill == key]
    assert fell.to == "rejected"
    assert key not in skills.generate_candidates(res, as_of=AS_OF).registered  # never again
