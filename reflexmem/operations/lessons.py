"""Review of held lessons as operations: list, accept, reject (`reflexmem review lessons`).

A lesson that addresses the system is held by its reflection batch and never recalled
until a person accepts it (`reflexmem.reflection.review`); these are the stages the CLI
calls, each in its own transaction.
"""

from __future__ import annotations

from reflexmem.ledger.enums import CaseState
from reflexmem.operations.resources import Resources
from reflexmem.reflection.review import HeldLesson, decide_lesson, held_lessons


def held(res: Resources, role_id: str | None = None) -> list[HeldLesson]:
    """Every lesson waiting for review (of one role, when given)."""
    if role_id is not None:
        res.registry.get(role_id)
    with res.engine.connect() as conn:
        return held_lessons(conn, role_id)


def accept(res: Resources, case_id: str, reviewer: str, note: str | None = None) -> CaseState:
    """Accept a held lesson: the case becomes reflected and recallable from now on."""
    with res.engine.begin() as conn:
        return decide_lesson(conn, case_id, accept=True, reviewer=reviewer, note=note)


def reject(res: Resources, case_id: str, reviewer: str, note: str | None = None) -> CaseState:
    """Reject a held lesson: the case is kept for audit only, never recalled or learned."""
    with res.engine.begin() as conn:
        return decide_lesson(conn, case_id, accept=False, reviewer=reviewer, note=note)
