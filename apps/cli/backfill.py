"""`reflexmem backfill`: the learning cycle at staged clocks over ingested history.

After importing past trades a user runs one backfill instead of one cycle: the cycle's
own sequence at every clock from `--from` to `--to` every `--every`, oldest first
(`reflexmem.operations.backfill`), with a progress bar. It resumes: the same command
run again skips the clocks it already finished.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer

from apps.cli.common import app, console, emit, err, open_resources, parse_time


@app.command("backfill")
def backfill_cmd(
    start: Annotated[str, typer.Option("--from", help="First cycle clock (ISO date or time).")],
    end: Annotated[str, typer.Option("--to", help="Last cycle clock (ISO date or time).")],
    every: Annotated[str, typer.Option("--every", help="Step between clocks: 7d, 30d, 12h, 2w.")],
    role: Annotated[list[str] | None, typer.Option("--role", help="Only these roles.")] = None,
    profile: Annotated[str | None, typer.Option(help="Evaluation profile.")] = None,
    version: Annotated[int | None, typer.Option(help="Profile version.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Replay the cycle at staged clocks over ingested history (resumable, idempotent)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from reflexmem.operations.backfill import (
        BackfillParams,
        backfill_clocks,
        parse_every,
        run_backfill,
        summary,
    )
    from reflexmem.operations.cycle import CycleReport
    from reflexmem.operations.runner import DirectRunner

    try:
        step = parse_every(every)
        params = BackfillParams(
            start=parse_time(start, "--from"),
            end=parse_time(end, "--to"),
            every=step,
            roles=tuple(role) if role else None,
            profile=profile,
            version=version,
        )
        total = len(backfill_clocks(params.start, params.end, params.every))
    except ValueError as exc:
        err.print(str(exc))
        raise typer.Exit(2) from exc
    res = open_resources()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=err, disable=as_json) as bar:
        task = bar.add_task("backfill", total=total)

        def advance(at: datetime, report: CycleReport | None, done: int, _total: int) -> None:
            state = "done before" if report is None else "cycle run"
            bar.update(task, completed=done, description=f"{at:%Y-%m-%d %H:%M} {state}")

        report = run_backfill(DirectRunner(res), params, on_clock=advance)
    out = summary(report)
    if as_json:
        emit(out, True)
        return
    console.print(
        f"backfill {out['backfill']}: {out['ran']} cycle(s) run, {out['resumed_past']} "
        f"already done, {out['first']} .. {out['last']}"
    )
    emit(out, False)
