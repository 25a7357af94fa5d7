"""The learned steps of a decision's chain: pattern lineages, rules, skill and structure versions.

Patterns and rules are followed through `memory_sources` (a pattern version lists the
cases of its window and the version it extends; a rule lists its pattern version);
skill versions are matched on their source experiences and structure bundles on the
skill versions they pin. Each step carries its valid and recorded time, and only the
steps valid and recorded by the asked clocks are kept (`reflexmem.recall.clocks`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import sqlalchemy as sa

from adapters.lineage_step import Step, json_value, rows
from adapters.tracking.context import model_version_url
from reflexmem.ledger.structure_models import DecisionStructure, StructureBundle
from reflexmem.recall.clocks import (
    Clocks,
    Times,
    as_times,
    entry_times,
    skill_recorded_time,
    skill_valid_time,
    structure_recorded_time,
    structure_valid_time,
    stv,
    sv,
)

sb = cast(sa.Table, StructureBundle.__table__)


def memory_steps(conn: sa.Connection, case_id: str, clocks: Clocks) -> list[Step]:
    """Pattern lineages that took the case, followed to their newest version, and rules.

    Each names the distillation run that wrote its newest kept version (the caller
    links it to MLflow).

    Only the versions and rules valid and recorded by `clocks` count: a lineage is cut
    at its first version that was not, and left out if its first one was not.
    """
    steps: list[Step] = []
    first = rows(
        conn,
        "SELECT e.entry_id FROM memory_sources s JOIN memory_entries e "
        "ON e.entry_id = s.entry_id WHERE s.source_id = :c AND e.tier = 'semantic' "
        "ORDER BY e.created_episode, e.entry_id",
        c=case_id,
    )
    rule_ids: dict[str, None] = {}
    for row in first:
        chain = [row["entry_id"]]
        while True:
            nxt = rows(
                conn,
                "SELECT e.entry_id FROM memory_sources s JOIN memory_entries e "
                "ON e.entry_id = s.entry_id WHERE s.source_id = :p AND e.tier = 'semantic' "
                "ORDER BY e.created_episode DESC LIMIT 1",
                p=chain[-1],
            )
            if not nxt or nxt[0]["entry_id"] in chain:
                break
            chain.append(nxt[0]["entry_id"])
        times = entry_times(conn, chain)
        kept = 0
        while kept < len(chain) and clocks.admits(times[chain[kept]]):
            kept += 1
        if not kept:
            continue
        chain = chain[:kept]
        current = rows(
            conn,
            "SELECT entry_id, namespace, state, text, support, confidence, wins, losses, "
            "mlflow_run_id FROM memory_entries WHERE entry_id = :e",
            e=chain[-1],
        )[0]
        run_id = current.pop("mlflow_run_id")
        detail = {**current, "current_id": current.pop("entry_id"), "versions": chain}
        steps.append(Step("pattern", chain[0], run_id, detail=detail, times=times[chain[0]]))
        for rule in rows(
            conn,
            "SELECT DISTINCT e.entry_id, e.created_episode FROM memory_sources s "
            "JOIN memory_entries e ON e.entry_id = s.entry_id "
            f"WHERE s.source_id IN ({', '.join(f':v{i}' for i in range(len(chain)))}) "
            "AND e.tier = 'procedural' ORDER BY e.created_episode, e.entry_id",
            **{f"v{i}": v for i, v in enumerate(chain)},
        ):
            rule_ids[rule["entry_id"]] = None
    rule_times = entry_times(conn, rule_ids)
    for rule_id in rule_ids:
        if not clocks.admits(rule_times[rule_id]):
            continue
        r = rows(
            conn,
            "SELECT entry_id, namespace, state, text, support, confidence, mlflow_run_id "
            "FROM memory_entries WHERE entry_id = :e",
            e=rule_id,
        )[0]
        run_id = r.pop("mlflow_run_id")
        steps.append(Step("rule", r.pop("entry_id"), run_id, detail=r, times=rule_times[rule_id]))
    return steps


def reflex_steps(
    conn: sa.Connection, keys: Sequence[str], ui_base: str, clocks: Clocks
) -> list[Step]:
    """Skill versions whose source experiences name the decision's episode or case.

    Then the structure bundles pinning one of them; both valid and recorded by `clocks`.
    """
    steps: list[Step] = []
    pins: list[str] = []
    skills = sa.select(
        sv.c.skill_id,
        sv.c.version,
        sv.c.state,
        sv.c.source_experiences,
        sv.c.mlflow_model_version,
        skill_valid_time().label("valid_at"),
        skill_recorded_time().label("recorded_at"),
    ).order_by(sv.c.skill_id, sv.c.version)
    for s in conn.execute(skills).mappings():
        sources = {str(x) for x in (json_value(s["source_experiences"]) or [])}
        times = as_times(s["valid_at"], s["recorded_at"])
        if not sources & set(keys) or not clocks.admits(times):
            continue
        key = f"{s['skill_id']}@{s['version']}"
        pins.append(key)
        mv = s["mlflow_model_version"]
        url = model_version_url(ui_base, f"reflex_skill.{s['skill_id']}", mv) if mv else None
        detail = {"state": s["state"], "mlflow_model_version": mv}
        steps.append(Step("skill", key, None, url, detail, times))
    if pins:
        bundles = (
            sa.select(
                sb.c.bundle_id,
                sb.c.structure_id,
                sb.c.skill_versions,
                sb.c.state,
                stv.c.mlflow_model,
                stv.c.mlflow_version,
                structure_valid_time().label("valid_at"),
                structure_recorded_time().label("recorded_at"),
            )
            .select_from(sb.join(stv, stv.c.structure_id == sb.c.structure_id))
            .order_by(sb.c.created_at, sb.c.bundle_id)
        )
        for row in conn.execute(bundles).mappings():
            b = dict(row)
            times = as_times(b.pop("valid_at"), b.pop("recorded_at"))
            b["skill_versions"] = json_value(b["skill_versions"])
            if not set(map(str, b["skill_versions"] or [])) & set(pins):
                continue
            if not clocks.admits(times):
                continue
            steps.append(_structure_step(b["structure_id"], b, ui_base, times))
    return steps


def _structure_step(structure_id: str, detail: dict[str, Any], ui_base: str, times: Times) -> Step:
    """A `structure` step linked to its MLflow registered model version, if it has one."""
    model, mv = detail["mlflow_model"], detail["mlflow_version"]
    url = model_version_url(ui_base, model, mv) if model and mv else None
    return Step("structure", structure_id, None, url, detail, times)


def ran_under_steps(
    conn: sa.Connection, decision_id: str, ui_base: str, clocks: Clocks
) -> list[Step]:
    """The trading bundle the decision's pre-decision check ran under, if any.

    Its structure version with its MLflow registered model version, and the skill and
    index versions it pinned; valid and recorded at the check's clock.
    """
    ds = cast(sa.Table, DecisionStructure.__table__)
    query = (
        sa.select(
            ds.c.bundle_id,
            ds.c.structure_id,
            ds.c.checked_at,
            sb.c.scope,
            sb.c.skill_versions,
            sb.c.index_version,
            stv.c.mlflow_model,
            stv.c.mlflow_version,
        )
        .select_from(
            ds.join(sb, sb.c.bundle_id == ds.c.bundle_id).join(
                stv, stv.c.structure_id == ds.c.structure_id
            )
        )
        .where(ds.c.decision_id == decision_id)
    )
    steps = []
    for row in conn.execute(query).mappings():
        b = dict(row)
        at = b.pop("checked_at")
        times = as_times(at, at)
        if not clocks.admits(times):
            continue
        b["skill_versions"] = json_value(b["skill_versions"])
        b["ran_under"] = True
        steps.append(_structure_step(b.pop("structure_id"), b, ui_base, times))
    return steps
