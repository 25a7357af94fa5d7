"""`make demo`, recall stage: a few recalls in active mode, and the same one refused in shadow.

Uses the cases that earlier stages already reflected; it never fabricates lessons. The
process's own mode is frozen at start (SPEC 4.6), so the demo builds the two tool
registries an agent runtime would get in each mode and asks both for the same recall.
"""

from __future__ import annotations

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table

from reflexmem.ledger.models import RoleCase
from reflexmem.recall import RecallConstraints, recall
from reflexmem.recall.constraints import LEARNABLE_CLASSES
from reflexmem.runtime import ToolUnavailable, build_registry
from reflexmem.runtime.tools import RECALL_TOOL
from reflexmem.settings import MemoryMode, Settings, runtime_mode


def _samples(engine: sa.Engine, n: int = 3) -> list[tuple[str, str, str]]:
    rc = RoleCase.__table__
    stmt = (
        sa.select(rc.c.role_id, rc.c.symbol, rc.c.lesson)
        .where(
            rc.c.state == "reflected",
            rc.c.outcome_class.in_(LEARNABLE_CLASSES),
            rc.c.lesson.is_not(None),
        )
        .order_by(rc.c.decided_at.desc())
        .limit(200)
    )
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    seen: set[str] = set()
    out: list[tuple[str, str, str]] = []
    for role, symbol, lesson in rows:
        if role in seen:
            continue
        seen.add(role)
        query = " ".join(str(lesson).split()[:4])
        out.append((str(role), str(symbol), query))
        if len(out) == n:
            break
    return out


def demo_recall(settings: Settings, engine: sa.Engine, console: Console) -> None:
    """Print a few active-mode recalls and the shadow-mode refusal of the same recall."""
    console.rule("recall (SPEC 4.7): active mode recalls, shadow mode has no recall tool")
    console.print(f"this process runs in {runtime_mode().value} mode ({settings.backend} ledger)")
    samples = _samples(engine)
    if not samples:
        console.print(
            "[yellow]no reflected cases yet[/yellow]: recall needs the reflection stage; skipped"
        )
        return

    def do_recall(role: str, symbol: str | None, query: str) -> object:
        with engine.connect() as conn:
            return recall(conn, RecallConstraints(role=role, symbol=symbol), query, k=3)

    def record_case(**_: object) -> str:
        return "recorded"

    def reflect(*_: object) -> str:
        return "reflected"

    active = build_registry(
        MemoryMode.ACTIVE, record_case=record_case, recall=do_recall, reflect=reflect
    )
    shadow = build_registry(MemoryMode.SHADOW, record_case=record_case)
    for role, symbol, query in samples:
        result = active.call(RECALL_TOOL, role, symbol, query)
        table = Table(title=f"active: recall --role {role} --symbol {symbol} {query!r}")
        for col in ("#", "tier", "case", "score", "lesson"):
            table.add_column(col)
        for i, hit in enumerate(getattr(result, "hits", ()), 1):
            table.add_row(str(i), hit.tier.value, hit.id, f"{hit.score:.3f}", hit.text)
        console.print(table)
    role, symbol, query = samples[0]
    try:
        shadow.call(RECALL_TOOL, role, symbol, query)
    except ToolUnavailable as exc:
        console.print(f"[yellow]shadow: same recall refused[/yellow]: {exc}")
    console.print(
        f"shadow tools: {', '.join(shadow.names())}; active tools: {', '.join(active.names())}"
    )
