"""The REFLEX review queue: inputs the router would not guess at (`reflexmem review ...`)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.table import Table

from apps.cli.common import app, console, err, open_resources

review_app = typer.Typer(
    no_args_is_help=True, help="Review queue: new input formats, environment changes."
)
app.add_typer(review_app, name="review")


def _row(entry: Any) -> dict[str, Any]:
    return {
        "review_id": entry.review_id,
        "kind": str(entry.kind),
        "task_family": entry.task_family,
        "environment_version": entry.environment_version,
        "occurrences": entry.occurrences,
        "first_episode_id": entry.first_episode_id,
        "last_episode_id": entry.last_episode_id,
        "status": str(entry.status),
        "resolution": None if entry.resolution is None else str(entry.resolution),
        "resolution_note": entry.resolution_note,
        "resolved_by": entry.resolved_by,
        "first_seen_at": entry.first_seen_at.isoformat(),
        "last_seen_at": entry.last_seen_at.isoformat(),
        "detail": entry.detail,
    }


@review_app.command("list")
def review_list(
    show_all: Annotated[bool, typer.Option("--all", help="Include resolved items.")] = False,
    family: Annotated[str | None, typer.Option(help="Only this task family.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List queued causes, most frequent first (open ones unless --all)."""
    from reflexmem.ledger.reflex_enums import ReviewStatus
    from reflexmem.reflex.review import list_reviews

    engine = open_resources().engine
    with engine.connect() as conn:
        entries = list_reviews(
            conn, status=None if show_all else ReviewStatus.OPEN, task_family=family
        )
    if as_json:
        sys.stdout.write(json.dumps({"items": [_row(e) for e in entries]}, default=str) + "\n")
        return
    table = Table(title=f"review queue ({'all' if show_all else 'open'})")
    for name in ("id", "kind", "family", "env", "seen", "last episode", "status"):
        table.add_column(name)
    for e in entries:
        verdict = str(e.status) if e.resolution is None else f"{e.status}: {e.resolution}"
        table.add_row(
            str(e.review_id), str(e.kind), e.task_family, e.environment_version or "-",
            str(e.occurrences), e.last_episode_id or "-", verdict,
        )  # fmt: skip
    console.print(table)


@review_app.command("resolve")
def review_resolve(
    review_id: Annotated[int, typer.Argument(help="The item's ID (from `review list`).")],
    resolution: Annotated[str, typer.Option(help="accepted, rejected or duplicate.")],
    note: Annotated[str, typer.Option(help="Why (required).")],
    by: Annotated[str, typer.Option(help="Who resolves it.")] = "operator",
) -> None:
    """Record a verdict on an open item; an unknown or already resolved item is refused."""
    from reflexmem.reflex.review import ReviewError, resolve_review

    engine = open_resources().engine
    try:
        with engine.begin() as conn:
            entry = resolve_review(conn, review_id, resolution, note=note, actor=by)
    except ReviewError as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(1) from exc
    console.print(
        f"review #{entry.review_id} resolved as {entry.resolution} by {entry.resolved_by}"
    )
