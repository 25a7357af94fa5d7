"""The demo's stage runner: runs each operation directly and shows what it did.

`make demo` runs `reflexmem.operations.cycle.run_cycle` with this runner, so the demo's
sequence is the cycle's own; the runner only numbers each stage as it starts (one
counter for the whole demo) and renders its report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

from apps.render import admission_table
from reflexmem.operations import (
    cycle_runs,
    evaluation,
    intake,
    maturation,
    memory,
    reflection,
    skill_lifecycle,
    skills,
)
from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.operations.stages import stage_of

R = TypeVar("R")


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> Table:
    """A small right-aligned table; the first column (a name) folds, never cut short."""
    out = Table(title=title)
    for i, name in enumerate(header):
        out.add_column(name, justify="right" if i else "left", overflow="ellipsis" if i else "fold")
    for row in rows:
        out.add_row(*[str(x) for x in row])
    return out


class DemoRunner(DirectRunner):
    """A direct runner that numbers and renders every stage."""

    def __init__(self, resources: Resources, console: Console, start: int = 1) -> None:
        super().__init__(resources)
        self.console = console
        self.step = start

    def heading(self, title: str) -> None:
        """Start the next numbered stage."""
        self.console.rule(f"{self.step}. {title}")
        self.step += 1

    def run(self, op: Callable[..., R], /, **params: Any) -> R:
        """Number, run and render one stage (the cycle's own run is one line, unnumbered)."""
        if op is cycle_runs.begin_cycle or op is cycle_runs.end_cycle:
            done = super().run(op, **params)
            if isinstance(done, cycle_runs.CycleStart):
                self.console.print(
                    f"[dim]{done.name} {done.cycle_id}: MLflow parent run "
                    f"{done.mlflow_run_id}[/dim]"
                )
            return done
        self.heading(stage_of(op).title)
        result = super().run(op, **params)
        self._render(op, [result])
        return result

    def map(
        self, op: Callable[..., R], key: str, values: Sequence[Any], /, **params: Any
    ) -> list[R]:
        """Number one stage, run it for every value, render the reports together."""
        self.heading(stage_of(op).title)
        results = super().map(op, key, values, **params)
        self._render(op, results)
        return results

    def _render(self, op: Callable[..., Any], reports: Sequence[Any]) -> None:
        c = self.console
        if not reports:
            c.print("nothing to do")
            return
        r: Any = reports[0]
        if op is intake.admit:
            c.print(admission_table(r))
        elif op is maturation.plan:
            c.print(f"as of {r.as_of.isoformat() if r.as_of else '- (no bars)'}; roles {r.roles}")
        elif op is maturation.settle:
            c.print(f"{r.open_positions} open positions, {r.settled} settled")
        elif op is maturation.mature:
            rows: list[tuple[object, ...]] = [("matured (eligible)", r.matured)]
            rows += [(f"pending: {k}", v) for k, v in r.pending.items()]
            c.print(table("maturity", ("cases", "count"), rows))
        elif op is evaluation.evaluate:
            c.print(
                f"{r.runs} runs in batch {r.batch_id} (profile {r.profile} "
                f"v{r.profile_version}, MLflow run {r.mlflow_run_id})"
            )
        elif op is evaluation.promote:
            c.print(f"{r.promoted} promoted to primary (MLflow run {r.mlflow_run_id})")
        elif op is reflection.reflect:
            classes: dict[str, int] = {}
            for rep in reports:
                for name, n in rep.by_class.items():
                    classes[name] = classes.get(name, 0) + n
            c.print(
                table(
                    "reflected cases per outcome class", ("class", "cases"), sorted(classes.items())
                )
            )
            c.print(
                f"reflected {sum(x.reflected for x in reports)}, lessons "
                f"{sum(x.lessons for x in reports)}, failed {sum(x.failed for x in reports)}"
            )
        elif op is memory.record_episodes:
            c.print(
                table(
                    "episodes per role namespace (each closed window distilled as it closes)",
                    (
                        "namespace",
                        "episodes",
                        "bandit credits",
                        "windows",
                        "pattern versions",
                        "rules promoted",
                        "rules confirmed",
                    ),
                    [
                        (
                            e.namespace,
                            e.recorded,
                            sum(e.credited.values()),
                            e.windows_closed,
                            e.distilled.patterns if e.distilled else 0,
                            len(e.distilled.promoted) if e.distilled else 0,
                            len(e.distilled.confirmed) if e.distilled else 0,
                        )
                        for e in reports
                    ],
                )
            )
        elif op is memory.namespaces_due:
            c.print(", ".join(r) if r else "none: recording distilled every window it closed")
        elif op is memory.distil:
            c.print(
                table(
                    "distillation per namespace",
                    ("namespace", "windows", "pattern versions", "rules promoted", "confirmed"),
                    [
                        (d.namespace, d.windows, d.patterns, len(d.promoted), len(d.confirmed))
                        for d in reports
                    ],
                )
            )
        elif op is skills.generate_candidates:
            c.print(
                f"{r.episodes} episodes, {r.clusters} lessons, candidates: "
                f"{', '.join(r.registered) or 'none yet'}"
            )
        elif op is skills.check_decisions:
            c.print(f"{r.decisions} decisions checked: {r.by_status or 'no usable skill yet'}")
        elif op in (skill_lifecycle.advance_skills, skill_lifecycle.audit_skills):
            for m in r.moves:
                c.print(f"{m.skill}: {m.frm} -> {m.to}")
            if not r.moves:
                c.print(f"no move; waiting: {len(r.waiting)} version(s)")
        elif op is intake.ingest_drop:
            c.print(f"loaded {r.loaded}, unchanged {list(r.unchanged)}, rejected {r.rejected}")
