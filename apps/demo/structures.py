"""`make demo`, structures stage: experiment B, a search, a refusal, the current structure.

Runs experiment B's table from the fixed tasks, then the selection loop from the
active structure (all-shared the first time) with registration in MLflow, shows a
widening mutation being refused and recorded, and ends with the current structure,
its parent chain and the newest search's archive.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from reflexmem.operations.resources import Resources
from reflexmem.operations.runner import DirectRunner
from reflexmem.operations.structures import run_structure_search, show_structures
from reflexmem.structures.experiment_b import table
from reflexmem.structures.mutations import Step


def demo_structures(res: Resources, console: Console) -> None:
    """Print experiment B, search and register, refuse a widening, show the current one."""
    from reflexmem.structures.operations import mutate
    from reflexmem.structures.refusals import StructureRefused

    t = Table(title="Experiment B (cost = stored edges + unnecessarily activated areas)")
    for col in ("environment", "candidate", "solved", "edges", "unneeded", "cost"):
        t.add_column(col)
    for r in table():
        t.add_row(
            r["environment"],
            r["candidate"],
            f"{r['solved']}/{r['tasks']}",
            str(r["stored_edges"]),
            str(r["unneeded_activations"]),
            str(r["cost"]),
        )
    console.print(t)
    out = run_structure_search(DirectRunner(res)).summary
    console.print(
        f"search {out['search_id']}: {out['parent']} -> {out['winner']} "
        f"({'registered' if out['registered'] else 'parent kept'}; {out['operator']})"
    )
    if out["mlflow"]:
        console.print(
            f"MLflow: {out['mlflow']['model']} v{out['mlflow']['version']}, aliases "
            f"{', '.join(out['mlflow']['aliases'])}"
        )
    for row in out["final_test"]:
        console.print(
            f"  final test {row['name']}: {row['solved']}/{row['tasks']}, cost {row['cost']:g}"
        )
    current = show_structures(res)
    try:
        mutate(
            res.engine,
            str(current["current"]),
            Step("narrow_scope", {"module": "document", "knowledge": ["docs", "ground-truth"]}),
        )
    except StructureRefused as exc:
        console.print(f"[yellow]refused and recorded[/yellow]: {escape(str(exc.refusals[0]))}")
    edges = escape(", ".join(current["edges"]) or "none")
    console.print(f"current structure: [bold]{current['current']}[/bold], edges: {edges}")
    for link in current["lineage"][1:]:
        console.print(f"  parent: {link['structure_id']} ({link['operator']}, {link['lifecycle']})")
    a = Table(title="archive of the newest search (non-dominated: success per family, cost)")
    for col in ("candidate", "cost", "passes floor", "success"):
        a.add_column(col)
    for e in current["archive"]:
        a.add_row(
            e["candidate_id"],
            f"{e['cost']:g}",
            str(e["passes_floor"]),
            ", ".join(f"{k}={v:.2f}" for k, v in sorted(e["success"].items())),
        )
    console.print(a)
