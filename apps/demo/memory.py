"""`make demo`, after the cycle: what the memory learned, and a recall showing it.

Everything shown is read back from the ledger the cycle wrote; nothing is fabricated.
The recall goes through the agent's active-mode tool registry, and the same recall is
asked of a shadow-mode registry, which has no recall tool at all (docs/design.md §9).
"""

from __future__ import annotations

import sqlalchemy as sa
from rich.console import Console
from rich.markup import escape

from apps.demo.runner import table
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.operations.recall import RecallReport, recall
from reflexmem.operations.resources import Resources
from reflexmem.recall import RecallConstraints
from reflexmem.runtime import ToolUnavailable, build_registry
from reflexmem.runtime.tools import RECALL_TOOL
from reflexmem.settings import MemoryMode

COUNTS_SQL = """
SELECT namespace, tier, state, COUNT(*), MAX(support)
FROM memory_entries WHERE namespace LIKE 'role:%' AND tier <> 'episodic'
GROUP BY namespace, tier, state
"""
TOP_SQL = """
SELECT namespace, tier, text, support FROM memory_entries
WHERE namespace LIKE 'role:%' AND tier <> 'episodic' AND state = 'active'
ORDER BY CASE tier WHEN 'procedural' THEN 0 ELSE 1 END, support DESC, entry_id LIMIT 6
"""


def show_memory_line(res: Resources, console: Console) -> None:
    """Lessons per role -> live semantic patterns (with support) -> procedural rules."""
    with res.engine.connect() as conn:
        lessons: dict[str, int] = dict(
            conn.execute(
                sa.text(
                    "SELECT role_id, COUNT(*) FROM role_cases WHERE lesson IS NOT NULL "
                    "GROUP BY role_id"
                )
            ).all()
        )
        counts = conn.execute(sa.text(COUNTS_SQL)).all()
        top = conn.execute(sa.text(TOP_SQL)).all()
    per: dict[str, dict[str, int]] = {}
    for ns, tier, state, n, _support in counts:
        per.setdefault(ns, {})[f"{tier}:{state}"] = int(n)
    rows = []
    for role_id in res.registry.ids:
        got = per.get(role_namespace(role_id), {})
        rows.append(
            (
                role_id,
                lessons.get(role_id, 0),
                got.get("semantic:active", 0),
                got.get("semantic:superseded", 0),
                got.get("procedural:candidate", 0),
                got.get("procedural:active", 0),
            )
        )
    console.print(
        table(
            "lessons -> semantic patterns -> procedural rules",
            ("role", "lessons", "patterns", "older versions", "rule candidates", "rules"),
            rows,
        )
    )
    for ns, tier, text, support in top:
        console.print(f"[bold]{escape(ns)}[/bold] {tier} (support {support}): {escape(text)}")


def _sample(res: Resources) -> tuple[str, str] | None:
    """A role with an active rule (else any pattern), and a query from its wording."""
    with res.engine.connect() as conn:
        row = conn.execute(
            sa.text(
                "SELECT namespace, text FROM memory_entries WHERE namespace LIKE 'role:%' "
                "AND tier IN ('procedural', 'semantic') AND state = 'active' "
                "ORDER BY CASE tier WHEN 'procedural' THEN 0 ELSE 1 END, support DESC, entry_id "
                "LIMIT 1"
            )
        ).first()
    if row is None:
        return None
    role = str(row[0]).removeprefix("role:")
    words = [w for w in str(row[1]).replace(":", " ").split() if w.isalpha() and len(w) > 3]
    return role, " ".join(words[2:7])


def show_recall(res: Resources, console: Console) -> None:
    """One active-mode recall with the full policy, and its refusal in shadow mode."""
    sample = _sample(res)
    if sample is None:
        console.print("[yellow]no live patterns yet[/yellow]: recall shows only cases")
        return
    role, query = sample

    def do_recall(role_id: str, text: str) -> RecallReport:
        return recall(res, RecallConstraints(role=role_id), text, policy="full_detailed")

    def record_case(**_: object) -> str:
        return "recorded"

    def reflect(*_: object) -> str:
        return "reflected"

    active = build_registry(
        MemoryMode.ACTIVE, record_case=record_case, recall=do_recall, reflect=reflect
    )
    shadow = build_registry(MemoryMode.SHADOW, record_case=record_case)
    report = active.call(RECALL_TOOL, role, query)
    hits = report.result.hits
    console.print(
        table(
            f"active: recall --role {role} {query!r} (policy {report.policy.name})",
            ("#", "tier", "id", "score", "text"),
            [(i, h.tier.value, h.id, f"{h.score:.3f}", h.text) for i, h in enumerate(hits, 1)],
        )
    )
    tiers = sorted({h.tier.value for h in hits})
    console.print(f"tiers in this recall: {', '.join(tiers)}; distinct texts: {len(hits)}")
    try:
        shadow.call(RECALL_TOOL, role, query)
    except ToolUnavailable as exc:
        console.print(f"[yellow]shadow: same recall refused[/yellow]: {exc}")
