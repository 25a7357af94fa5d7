"""A crash inside the skill stages, then a rerun, leaves the ledger of an uninterrupted run.

The crash bench (`reflexmem bench crash`) found three ways the REFLEX stages diverged
after a SIGKILL and a rerun: a lesson half registered (the rerun skips any lesson with
a version, so its other forms and their sources were never written), a version
registered in MLflow but not yet linked in the ledger (the rerun skipped it, leaving its
`mlflow_model_version` empty), and a lifecycle move committed without its `skill_checks`
row (the rerun starts from the new state). Here the crash is injected deterministically
at those instants: right after a real MLflow call returned, before the ledger write that
follows it. The ledger is then compared by checksums with a clean run.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine
from adapters.tracking.skills import SkillTracker
from reflexmem.ledger.checksums import table_checksums
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.operations.cycle import run_skills
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.reflex.lifecycle import Evidence
from reflexmem.reflex.skills import SkillSpec
from reflexmem.reflex.versions import TransitionRecord, VersionInfo
from tests.integration.skill_data import reflected
from tests.support import AS_OF, make_resources


class Crash(Exception):
    """The injected kill."""


class CrashingTracker:
    """A real MLflow tracker that dies after the `at`-th call of `method` did its work."""

    def __init__(self, inner: SkillTracker, method: str, at: int) -> None:
        self.inner, self.method, self.at, self.calls = inner, method, at, 0

    def _tick(self, name: str) -> None:
        if name == self.method:
            self.calls += 1
            if self.calls == self.at:
                raise Crash(f"{name} #{self.at}")

    def register(self, spec: SkillSpec, state: SkillState) -> str | None:
        out = self.inner.register(spec, state)
        self._tick("register")
        return out

    def open_move(
        self, info: VersionInfo, to: SkillState, evidence: Sequence[Evidence]
    ) -> str | None:
        out = self.inner.open_move(info, to, evidence)
        self._tick("open_move")
        return out

    def finish_move(self, run_id: str, records: Sequence[TransitionRecord], mlflow: str) -> None:
        self.inner.finish_move(run_id, records, mlflow)
        self._tick("finish_move")

    def fail_move(self, run_id: str, reason: str) -> None:
        self.inner.fail_move(run_id, reason)

    def log_check(
        self, info: VersionInfo, kind: str, evidence: Sequence[Evidence], detail: Mapping[str, Any]
    ) -> str | None:
        out = self.inner.log_check(info, kind, evidence, detail)
        self._tick("log_check")
        return out


@pytest.fixture(scope="module")
def base_ledger(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite ledger reflected up to memory (what the skill stages start from)."""
    tmp = tmp_path_factory.mktemp("skill-crash")
    path = tmp / "base.sqlite"
    engine = make_engine(f"sqlite:///{path}")
    migrate.upgrade(engine)
    reflected(make_resources(engine), tmp)
    engine.dispose()
    return path


def _ledger(base: Path, mlflow_template: Path, where: Path) -> tuple[sa.Engine, SkillTracker]:
    where.mkdir()
    shutil.copy(base, where / "ledger.sqlite")
    shutil.copy(mlflow_template, where / "mlflow.sqlite")
    tracker = SkillTracker(f"sqlite:///{where / 'mlflow.sqlite'}", artifact_root=where / "art")
    return make_engine(f"sqlite:///{where / 'ledger.sqlite'}"), tracker


def _stages(engine: sa.Engine, tracker: Any) -> Resources:
    res = replace(make_resources(engine), skill_tracker=tracker)
    run_skills(DirectRunner(res), AS_OF)
    return res


def test_a_crash_in_any_skill_stage_then_a_rerun_leaves_the_clean_ledger(
    base_ledger: Path, mlflow_template: Path, tmp_path: Path
) -> None:
    clean_engine, clean_tracker = _ledger(base_ledger, mlflow_template, tmp_path / "clean")
    _stages(clean_engine, clean_tracker)
    with clean_engine.connect() as conn:
        clean = table_checksums(conn)
    clean_engine.dispose()
    assert clean["skill_versions"][0] > 1
    assert clean["skill_sources"][0] > 0
    assert clean["skill_transitions"][0] > clean["skill_versions"][0]  # some moves were made
    points = [("register", 1), ("register", 2), ("open_move", 2), ("finish_move", 1)]
    failures: dict[str, dict[str, Any]] = {}
    for method, at in points:
        engine, tracker = _ledger(base_ledger, mlflow_template, tmp_path / f"{method}-{at}")
        with pytest.raises(Crash):
            _stages(engine, CrashingTracker(tracker, method, at))
        _stages(engine, tracker)  # the rerun, with a healthy tracker
        with engine.connect() as conn:
            after = table_checksums(conn)
            unlinked = conn.execute(
                sa.text("SELECT COUNT(*) FROM skill_versions WHERE mlflow_model_version IS NULL")
            ).scalar_one()
        engine.dispose()
        differing = {t: (clean[t], after.get(t)) for t in clean if after.get(t) != clean[t]}
        if differing or unlinked:
            failures[f"{method} #{at}"] = {"differing": differing, "unlinked": unlinked}
    assert failures == {}
