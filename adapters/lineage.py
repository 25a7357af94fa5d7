"""The whole chain of one decision, from the ledger and the MLflow store: `reflexmem lineage`.

Starting from a decision ID, every step a reviewer needs, in order: the decision, its
previews, executions (with fills), position, role case, evaluation runs (with their
components), promotions, the reflection batch and its lesson, the semantic pattern
lineages the lesson fed, the procedural rules made from them, and the skill and
structure versions built on the decision's episode, if any. Each step says where it
lives in MLflow (the batch's run, or the registered model version) with the UI URL.

The ledger is the source of every link (`evaluation_runs.mlflow_run_id`,
`evaluation_batches`, `reflection_batch_cases`, `memory_sources`, ...): the chain is
walked with indexed lookups per decision, never by scanning an artifact. MLflow is asked
only for each run's experiment (for the URL) and its parent cycle run; without a
reachable tracking store the URLs use MLflow's direct run route.

Asked `as_of` (valid time) and `known_at` (recorded time), the chain keeps only the
case, lesson, pattern, rule, skill and structure steps valid and recorded by then
(`reflexmem.recall.clocks`, recall's own formulas): a case not valid takes its
reflection, lesson and memory steps with it, a pattern shows the versions valid by then.
Those steps carry `valid_at` and `recorded_at`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from adapters.lineage_learned import memory_steps, ran_under_steps, reflex_steps
from adapters.lineage_step import Step
from adapters.lineage_step import rows as _rows
from adapters.tracking.context import run_url
from reflexmem.operations.cycle import plain
from reflexmem.recall.clocks import Clocks, Times, case_times

__all__ = ["KINDS", "Lineage", "Links", "Step", "pick_decision", "trace"]

KINDS = (
    "decision", "preview", "execution", "position", "case", "evaluation", "promotion",
    "reflection", "lesson", "pattern", "rule", "skill", "structure",
)  # fmt: skip


@dataclass(frozen=True)
class Lineage:
    """A decision and its steps, in chain order."""

    decision_id: str
    steps: tuple[Step, ...]
    clocks: Clocks = field(default_factory=Clocks)

    def as_json(self) -> dict[str, Any]:
        """The shape `reflexmem lineage --json` prints."""
        return {
            "decision_id": self.decision_id,
            "as_of": plain(self.clocks.as_of),
            "known_at": plain(self.clocks.known_at),
            "steps": [s.as_json() for s in self.steps],
        }

    def of(self, kind: str) -> list[Step]:
        """The steps of one kind."""
        return [s for s in self.steps if s.kind == kind]


class Links:
    """MLflow run pages and parents (looked up once per run), or direct links offline."""

    def __init__(self, client: Any | None, ui_base: str) -> None:
        self.client = client
        self.ui_base = ui_base
        self._runs: dict[str, Any] = {}

    def _run(self, run_id: str) -> Any | None:
        if self.client is None:
            return None
        if run_id not in self._runs:
            try:
                self._runs[run_id] = self.client.get_run(run_id)
            except Exception:  # an unreachable or foreign store: links stay direct
                self._runs[run_id] = None
        return self._runs[run_id]

    def run(self, run_id: str | None) -> tuple[str | None, dict[str, Any]]:
        """The run's URL and its parent cycle run (when MLflow knows the run)."""
        if not run_id:
            return None, {}
        run = self._run(run_id)
        if run is None:
            return run_url(self.ui_base, run_id), {}
        parent = run.data.tags.get("mlflow.parentRunId")
        extra: dict[str, Any] = {"mlflow_status": run.info.status}
        if parent:
            extra["cycle_id"] = run.data.tags.get("reflexmem.cycle_id")
            extra["cycle_mlflow_run_id"] = parent
            parent_run = self._run(parent)
            extra["cycle_url"] = run_url(
                self.ui_base, parent, parent_run.info.experiment_id if parent_run else None
            )
        return run_url(self.ui_base, run_id, run.info.experiment_id), extra

    def step(
        self,
        kind: str,
        id_: str,
        run_id: str | None,
        detail: Mapping[str, Any],
        times: Times = (None, None),
    ) -> Step:
        """A step linked to its MLflow run."""
        url, extra = self.run(run_id)
        return Step(kind, id_, run_id, url, {**detail, **extra}, times)

    def linked(self, step: Step) -> Step:
        """The step with its MLflow run's URL and parent cycle (if it names a run)."""
        if not step.mlflow_run_id:
            return step
        return self.step(step.kind, step.id, step.mlflow_run_id, step.detail, step.times)


def _plain_steps(kind: str, key: str, rows: list[dict[str, Any]]) -> list[Step]:
    return [Step(kind, str(r.pop(key)), detail=r) for r in rows]


def _trade_steps(conn: sa.Connection, d: str) -> list[Step]:
    previews = _rows(
        conn,
        "SELECT preview_id, symbol, direction, created_at, consume_count, consumed_at, "
        "consumed_by_decision_id FROM trade_previews WHERE decision_id = :d "
        "OR consumed_by_decision_id = :d ORDER BY created_at, preview_id",
        d=d,
    )
    steps = _plain_steps("preview", "preview_id", previews)
    for e in _rows(
        conn,
        "SELECT execution_id, preview_id, symbol, direction, instrument, origin, "
        "origin_verified, executed_at FROM trade_executions WHERE decision_id = :d "
        "ORDER BY executed_at, execution_id",
        d=d,
    ):
        fills = _rows(
            conn,
            "SELECT fill_id, quantity, price, fee, filled_at FROM trade_fills "
            "WHERE execution_id = :e ORDER BY filled_at, fill_id",
            e=e["execution_id"],
        )
        steps.append(Step("execution", e.pop("execution_id"), detail={**e, "fills": fills}))
    positions = _rows(
        conn,
        "SELECT position_id, status, opened_at, settled_at, entry_price, exit_price, "
        "realized_return, evaluation_points FROM position_lifecycles WHERE decision_id = :d "
        "ORDER BY opened_at, position_id",
        d=d,
    )
    return steps + _plain_steps("position", "position_id", positions)


def _evaluation_steps(conn: sa.Connection, d: str, links: Links) -> list[Step]:
    steps: list[Step] = []
    for r in _rows(
        conn,
        "SELECT r.run_id, r.profile, r.profile_version, r.is_primary, r.mlflow_run_id, "
        "r.created_at, l.batch_id, l.replay_of FROM evaluation_runs r "
        "LEFT JOIN evaluation_run_lineage l ON l.run_id = r.run_id "
        "WHERE r.decision_id = :d ORDER BY r.created_at, r.run_id",
        d=d,
    ):
        components = _rows(
            conn,
            "SELECT name, value, missing, quality FROM evaluation_components "
            "WHERE run_id = :r ORDER BY component_id",
            r=r["run_id"],
        )
        run_id = r.pop("mlflow_run_id")
        steps.append(
            links.step("evaluation", r.pop("run_id"), run_id, {**r, "components": components})
        )
    for p in _rows(
        conn,
        "SELECT p.batch_id, p.run_id, p.previous_run_id, p.profile, p.promoted_at, "
        "b.profile_version, b.mlflow_run_id, l.batch_id AS source_batch, "
        "sb.mlflow_run_id AS source_mlflow_run_id FROM evaluation_promotions p "
        "LEFT JOIN evaluation_batches b ON b.batch_id = p.batch_id "
        "LEFT JOIN evaluation_run_lineage l ON l.run_id = p.run_id "
        "LEFT JOIN evaluation_batches sb ON sb.batch_id = l.batch_id "
        "WHERE p.decision_id = :d ORDER BY p.promoted_at, p.promotion_id",
        d=d,
    ):
        run_id = p.pop("mlflow_run_id")
        steps.append(links.step("promotion", p.pop("batch_id"), run_id, p))
    return steps


def trace(
    conn: sa.Connection, decision_id: str, links: Links, clocks: Clocks | None = None
) -> Lineage | None:
    """The chain of `decision_id` at `clocks`, or None if the ledger has no such decision."""
    clocks = clocks or Clocks()
    found = _rows(
        conn,
        "SELECT decision_id, agent_id, role_id, account, market, symbol, direction, "
        "decided_at, scenario FROM trading_decisions WHERE decision_id = :d",
        d=decision_id,
    )
    if not found:
        return None
    decision = found[0]
    steps = [Step("decision", decision.pop("decision_id"), detail=decision)]
    steps += _trade_steps(conn, decision_id)
    cases = _rows(
        conn,
        "SELECT case_id, role_id, state, pending_reason, outcome_class, lesson, "
        "batch_id AS admission_batch_id FROM role_cases WHERE decision_id = :d",
        d=decision_id,
    )
    times = case_times(conn, [c["case_id"] for c in cases])
    cases = [c for c in cases if times[c["case_id"]].admits(clocks, times[c["case_id"]].case)]
    for case in cases:
        steps.append(Step("case", case["case_id"], detail=case, times=times[case["case_id"]].case))
    steps += _evaluation_steps(conn, decision_id, links)
    keys = [decision_id]
    for case in cases:
        case_id = case["case_id"]
        when = times[case_id]
        episodes = _rows(conn, "SELECT episode_id FROM episodes WHERE case_id = :c", c=case_id)
        episode_id = episodes[0]["episode_id"] if episodes else None
        for r in _rows(
            conn,
            "SELECT b.batch_id, b.role_id, b.reflector, b.mlflow_run_id, b.finished_at "
            "FROM reflection_batch_cases c JOIN reflection_batches b ON b.batch_id = c.batch_id "
            "WHERE c.case_id = :c",
            c=case_id,
        ):
            if not when.admits(clocks, when.lesson):
                continue  # not reflected (or matured) by the clocks: no verdict yet
            detail = {**r, "case_id": case_id, "outcome_class": case["outcome_class"]}
            run_id = detail.pop("mlflow_run_id")
            step = links.step("reflection", detail.pop("batch_id"), run_id, detail, when.lesson)
            steps.append(step)
            if case["lesson"] is not None:
                lesson = {
                    "text": case["lesson"],
                    "case_id": case_id,
                    "episode_id": episode_id,
                    "artifact": "lessons.parquet",
                }
                key = episode_id or case_id
                steps.append(links.step("lesson", key, run_id, lesson, when.lesson))
        keys += [case_id, *([episode_id] if episode_id else [])]
        steps += [links.linked(s) for s in memory_steps(conn, case_id, clocks)]
    steps += reflex_steps(conn, keys, links.ui_base, clocks)
    steps += ran_under_steps(conn, decision_id, links.ui_base, clocks)
    return Lineage(decision_id, tuple(steps), clocks)


_RULE_CASES = (
    "SELECT rc.decision_id FROM memory_entries r "
    "JOIN memory_sources rs ON rs.entry_id = r.entry_id "
    "JOIN memory_sources ps ON ps.entry_id = rs.source_id "
    "JOIN role_cases rc ON rc.case_id = ps.source_id"
)
"""Decisions of the cases behind a rule (through its semantic version's window)."""
_RULE_WHERE = "WHERE r.tier = 'procedural' AND rc.lesson IS NOT NULL"


def pick_decision(conn: sa.Connection) -> str | None:
    """A decision whose chain reaches furthest: behind a rule, else a pattern, else evaluated.

    Rules are tried live first; a rule's semantic version lists the cases of its window,
    so one of those cases' decisions walks all the way from trade to rule. A decision
    checked under a trading structure comes first (its chain ends at the structure):
    behind a rule if one is, else the newest evaluated one.
    """
    for sql in (
        f"{_RULE_CASES} JOIN decision_structures ds ON ds.decision_id = rc.decision_id "
        f"{_RULE_WHERE} ORDER BY rc.decision_id LIMIT 1",
        "SELECT ds.decision_id FROM decision_structures ds JOIN evaluation_runs er "
        "ON er.decision_id = ds.decision_id AND er.is_primary "
        "ORDER BY ds.checked_at DESC, ds.decision_id LIMIT 1",
        f"{_RULE_CASES} {_RULE_WHERE} "
        "ORDER BY CASE r.state WHEN 'active' THEN 0 WHEN 'candidate' THEN 1 ELSE 2 END, "
        "r.created_episode DESC, rc.decision_id LIMIT 1",
        "SELECT rc.decision_id FROM memory_sources s JOIN memory_entries e "
        "ON e.entry_id = s.entry_id AND e.tier = 'semantic' "
        "JOIN role_cases rc ON rc.case_id = s.source_id WHERE rc.lesson IS NOT NULL "
        "ORDER BY rc.decision_id LIMIT 1",
        "SELECT decision_id FROM evaluation_runs WHERE is_primary ORDER BY decision_id LIMIT 1",
    ):
        row = conn.execute(sa.text(sql)).first()
        if row is not None:
            return str(row[0])
    return None
