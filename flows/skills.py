"""The skill learning path's flows: candidate generation, shadow evaluation, audit.

Composition and schedules only: each flow builds its `Settings` from the pinned URIs,
fixes the cycle's clock with `plan` (the newest bar, or the `as_of` asked for) and runs
the same sequence the daily cycle runs (`reflexmem.operations.cycle.run_generation`,
`run_shadow`, `run_audit`) through a `PrefectRunner`, so every stage is the task wrapping
one operation. Each publishes a table artifact of what it did.

| flow | stages | schedule |
|---|---|---|
| `candidate_generation` | lessons and memory rules -> L0/L1/L2 candidates | `5 1 * * *` |
| `shadow_evaluation` | check new decisions -> advance versions on their evidence | `20 * * * *` |
| `audit` | skill audits, drift, revalidation; structure drift and rollback | `50 1 * * *` |

Shadow evaluation runs hourly, after the distillation sweep (`45 * * * *`), so that new
decisions are checked soon after they arrive; generation and audits run once a day
after the daily cycle (`15 0 * * *`), which runs all three itself.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from prefect import flow

from flows.artifacts import table_artifact
from flows.cycle import SCHEDULED
from flows.settings import flow_settings
from reflexmem.operations.cycle import plain, run_audit, run_generation, run_shadow
from reflexmem.operations.maturation import plan
from reflexmem.operations.structure_audit import run_structure_audit
from tasks.runner import PrefectRunner

GENERATION_CRON = "5 1 * * *"
SHADOW_CRON = "20 * * * *"
AUDIT_CRON = "50 1 * * *"


def _table(key: str, description: str, rows: list[dict[str, Any]]) -> None:
    table_artifact(
        key=key,
        table=[{k: str(v) for k, v in r.items()} for r in rows] or [{"-": "nothing to do"}],
        description=description,
    )


@flow(name="candidate_generation", **SCHEDULED)
def candidate_generation(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """Cluster reflected episodes by lesson; register L0/L1/L2 candidates and memory rules."""
    runner = PrefectRunner(flow_settings(database_url, tracking_uri, home))
    clock = runner.run(plan, as_of=as_of).as_of
    report: dict[str, Any] = plain(run_generation(runner, clock))
    _table(
        "skill-candidates",
        f"{len(report['registered'])} candidate(s) from {report['episodes']} episodes",
        [{"candidate": key} for key in report["registered"]],
    )
    return report


@flow(name="shadow_evaluation", **SCHEDULED)
def shadow_evaluation(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """Check new decisions with usable skills, then move versions on their evidence."""
    runner = PrefectRunner(flow_settings(database_url, tracking_uri, home))
    clock = runner.run(plan, as_of=as_of).as_of
    report: dict[str, Any] = plain(run_shadow(runner, clock))
    _table(
        "skill-shadow-evaluation",
        f"{report['checks']['decisions']} decision(s) checked",
        [
            {"skill": m["skill"], "from": m["frm"], "to": m["to"]}
            for m in report["lifecycle"]["moves"]
        ],
    )
    return report


@flow(name="audit", **SCHEDULED)
def audit(
    database_url: str | None = None,
    tracking_uri: str | None = None,
    home: str | None = None,
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """Audit active skills and structure bundles: drift, quarantine, revalidate, roll back.

    The structure part runs after the skill audit: a scope without an active bundle is
    skipped; a drifted bundle is quarantined and the previous verified one restored.
    """
    runner = PrefectRunner(flow_settings(database_url, tracking_uri, home))
    clock = runner.run(plan, as_of=as_of).as_of
    report: dict[str, Any] = plain(run_audit(runner, clock))
    _table(
        "skill-audit",
        f"{report['checks']} evaluation(s)",
        [{"skill": m["skill"], "from": m["frm"], "to": m["to"]} for m in report["moves"]],
    )
    structures = run_structure_audit(runner)
    report["structures"] = plain(structures)
    _table(
        "structure-audit",
        f"{len(structures.scopes)} scope(s), {len(structures.rolled_back)} rolled back",
        [
            {
                "scope": s.scope,
                "drifted": s.drifted,
                "quarantined": s.quarantined or "",
                "restored": s.restored or "",
                "skipped": s.skipped or "",
            }
            for s in structures.scopes
        ],
    )
    return report
