"""Recall: what an agent in active mode may retrieve, under every constraint.

The role namespace's bandit chooses the retrieval policy for each recall and the recall
is logged with `--decision`, so the decision's outcome later credits that policy.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.table import Table

from apps.cli.common import app, console, err, open_resources, parse_as_of
from reflexmem.settings import Settings


@app.command(
    "recall",
    # A query may start with "-" ("-5% drawdown"): unknown dash words are query text.
    context_settings={"ignore_unknown_options": True},
)
def recall_cmd(
    query: Annotated[list[str], typer.Argument(help="What to recall (plain text; never SQL).")],
    role: Annotated[str, typer.Option(help="Exact role id (required).")],
    symbol: Annotated[str | None, typer.Option(help="Only cases on this symbol.")] = None,
    scenario: Annotated[str | None, typer.Option(help="Only cases in this scenario.")] = None,
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="Valid time (the cycle's clock, ISO, UTC if naive): what was decided and "
            "had matured by then, as a live run at that clock would recall it.",
        ),
    ] = None,
    known_at: Annotated[
        str | None,
        typer.Option(
            "--known-at",
            help="Recorded time (wall clock, ISO): only what had been written by then.",
        ),
    ] = None,
    decision: Annotated[
        str | None, typer.Option(help="The decision this recall informs (credits the policy).")
    ] = None,
    k: Annotated[int | None, typer.Option("--k", help="At most this many items.")] = None,
    embedder: Annotated[
        str | None, typer.Option(help="none, hashing or minilm (default REFLEX_EMBEDDER).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Recall lessons, patterns and rules of a role (active mode only; shadow has no recall)."""
    from reflexmem.operations.recall import recall
    from reflexmem.recall import (
        RecallConstraints,
        RecallQueryError,
        RecallUnavailable,
        require_active,
    )
    from reflexmem.settings import runtime_mode

    try:
        require_active(runtime_mode())
    except RecallUnavailable as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(3) from exc
    when, known = parse_as_of(as_of), parse_as_of(known_at, "--known-at")
    text = " ".join(query)
    settings = Settings() if embedder is None else Settings(embedder=embedder)  # type: ignore[arg-type]
    res = open_resources(settings)
    try:
        constraints = RecallConstraints(
            role=role, symbol=symbol, scenario=scenario, as_of=when, known_at=known
        )
        report = recall(res, constraints, text, decision_id=decision, k=k)
    except (RecallQueryError, ValueError, KeyError) as exc:
        err.print(f"[red]bad query:[/red] {exc}")
        raise typer.Exit(2) from exc
    result = report.result
    payload = {
        "role": role,
        "symbol": symbol,
        "scenario": scenario,
        "as_of": None if when is None else when.isoformat(),
        "known_at": None if known is None else known.isoformat(),
        "decision": decision,
        "policy": report.policy.name,
        "recall_id": report.recall_id,
        "terms": list(result.terms),
        "candidates": result.candidates,
        "hits": [h.to_dict() for h in result.hits],
    }
    if as_json:
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    table = Table(title=f"recall for {role!r} (policy {report.policy.name}): {text!r}")
    for col in ("#", "kind", "tier", "id", "score", "text"):
        table.add_column(col)
    for i, h in enumerate(result.hits, 1):
        table.add_row(str(i), h.kind, h.tier.value, h.id, f"{h.score:.3f}", h.text)
    console.print(table)
