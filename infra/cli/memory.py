"""Recall: what an agent in active mode may retrieve, under every constraint."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer
from rich.table import Table

from infra.cli.common import (
    app,
    console,
    err,
)
from reflexmem.settings import Settings


@app.command("recall")
def recall_cmd(
    query: Annotated[str, typer.Argument(help="What to recall (plain text; never SQL).")],
    role: Annotated[str, typer.Option(help="Exact role id (required).")],
    symbol: Annotated[str | None, typer.Option(help="Only cases on this symbol.")] = None,
    scenario: Annotated[str | None, typer.Option(help="Only cases in this scenario.")] = None,
    as_of: Annotated[
        str | None, typer.Option("--as-of", help="ISO time; nothing recorded later (UTC if naive).")
    ] = None,
    k: Annotated[int, typer.Option("--k", help="How many items to return.")] = 5,
    embedder: Annotated[str, typer.Option(help="none, hashing or minilm (extra).")] = "none",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Recall reflected role cases (active mode only; shadow has no recall)."""
    from datetime import UTC, datetime

    from infra.services import ready_engine
    from reflexmem.recall import (
        HashingEmbedder,
        RecallConstraints,
        RecallQueryError,
        RecallUnavailable,
        recall,
        require_active,
    )
    from reflexmem.settings import runtime_mode

    try:
        require_active(runtime_mode())
    except RecallUnavailable as exc:
        err.print(f"[red]refused:[/red] {exc}")
        raise typer.Exit(3) from exc
    try:
        when = None if as_of is None else datetime.fromisoformat(as_of)
    except ValueError as exc:
        err.print(f"--as-of must be an ISO timestamp: {exc}")
        raise typer.Exit(2) from exc
    if when is not None and when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    emb = None
    if embedder == "hashing":
        emb = HashingEmbedder()
    elif embedder == "minilm":
        from reflexmem.recall.embeddings import MiniLMEmbedder

        emb = MiniLMEmbedder()
    elif embedder != "none":
        err.print("--embedder must be none, hashing or minilm")
        raise typer.Exit(2)
    engine = ready_engine(Settings())
    try:
        constraints = RecallConstraints(role=role, symbol=symbol, scenario=scenario, as_of=when)
        with engine.connect() as conn:
            result = recall(conn, constraints, query, k=k, embedder=emb)
    except (RecallQueryError, ValueError) as exc:
        err.print(f"[red]bad query:[/red] {exc}")
        raise typer.Exit(2) from exc
    finally:
        engine.dispose()
    payload = {
        "role": role,
        "symbol": symbol,
        "scenario": scenario,
        "as_of": None if when is None else when.isoformat(),
        "terms": list(result.terms),
        "candidates": result.candidates,
        "hits": [h.to_dict() for h in result.hits],
    }
    if as_json:
        sys.stdout.write(json.dumps(payload) + "\n")
        return
    table = Table(title=f"recall for {role!r}: {query!r}")
    for col in ("#", "kind", "tier", "id", "score", "text"):
        table.add_column(col)
    for i, h in enumerate(result.hits, 1):
        table.add_row(str(i), h.kind, h.tier.value, h.id, f"{h.score:.3f}", h.text)
    console.print(table)
