"""`reflexmem review lessons|accept-lesson|reject-lesson`: lessons held for review.

A reflection batch holds a lesson that tells the system what to do (admission,
permissions, rules, tools) instead of describing the trade; it is never recalled until
someone accepts it here. Registered on the `review` app of `apps.cli.review`.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.table import Table

from apps.cli.common import console, err, open_resources
from apps.cli.review import review_app

Reviewer = Annotated[str, typer.Option("--by", help="Who decides (recorded).")]
Note = Annotated[str | None, typer.Option(help="Why (recorded).")]


@review_app.command("lessons")
def lessons_list(
    role: Annotated[str | None, typer.Option(help="Only this role.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List lessons held for review, oldest first."""
    from reflexmem.operations import lessons

    items = lessons.held(open_resources(), role)
    if as_json:
        rows = [{**vars(i), "held_at": i.held_at.isoformat()} for i in items]
        sys.stdout.write(json.dumps({"held": rows}, default=str) + "\n")
        return
    table = Table(title=f"held lessons ({len(items)})")
    for col in ("case", "role", "class", "matched", "lesson"):
        table.add_column(col)
    for i in items:
        table.add_row(i.case_id, i.role_id, i.outcome_class or "-", i.matched, i.lesson or "")
    console.print(table)


def _decide(case_id: str, by: str, note: str | None, *, accept: bool) -> None:
    from reflexmem.operations import lessons
    from reflexmem.reflection.review import ReviewError

    res = open_resources()
    try:
        state = (lessons.accept if accept else lessons.reject)(res, case_id, by, note)
    except ReviewError as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(2) from exc
    console.print(f"{case_id}: {state.value}")


@review_app.command("accept-lesson")
def accept_lesson(case_id: str, by: Reviewer, note: Note = None) -> None:
    """Accept a held lesson: the case becomes reflected and recallable from now on."""
    _decide(case_id, by, note, accept=True)


@review_app.command("reject-lesson")
def reject_lesson(case_id: str, by: Reviewer, note: Note = None) -> None:
    """Reject a held lesson: kept for audit only, never recalled or learned."""
    _decide(case_id, by, note, accept=False)
