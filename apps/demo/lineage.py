"""`make demo`, last stages: versioned definitions in the registry, one trade's lineage, the report.

The evaluation profiles, role skill files and shipped REFLEX skills become registered
model versions (the Models page of the MLflow UI); then the demo follows the decision
whose chain reaches furthest from trade to rule, exactly as `reflexmem lineage` prints
it, and writes the HTML report (`reflexmem report`) beside the store.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from adapters.lineage import Links, pick_decision, trace
from adapters.tracking.context import existing_client
from adapters.tracking.registry import sync_definitions
from apps.demo.runner import table
from apps.report.page import write_report
from reflexmem.operations.resources import Resources
from reflexmem.settings import Settings


def show_registry(settings: Settings, res: Resources, console: Console) -> None:
    """Register profiles, role skill files and the shipped REFLEX skills; list them."""
    from adapters.tracking.skills import SkillTracker, model_name, register_tracked
    from reflexmem.reflex.skills import SKILLS_DIR, load_skill_files

    synced = sync_definitions(settings, res.registry)
    tracker = SkillTracker(
        settings.resolved_tracking_uri, artifact_root=settings.resolved_artifact_root
    )
    rows: list[tuple[object, ...]] = [
        (model, ", ".join(f"v{k} -> model version {v}" for k, v in versions.items()))
        for model, versions in synced["profiles"].items()
    ]
    rows += sorted({(m, f"model version {v}") for m, v in synced["role_skills"].values()})
    for spec in load_skill_files(sorted(SKILLS_DIR.glob("*.yaml")), res.registry):
        info = register_tracked(res.engine, tracker, spec)
        rows.append((model_name(spec.skill_id), f"{spec.key} ({info.state}) -> model version "
                     f"{info.mlflow_model_version}"))  # fmt: skip
    console.print(table("registered models (MLflow UI: Models)", ("model", "versions"), rows))


def show_lineage(settings: Settings, res: Resources, console: Console) -> None:
    """One decision's chain from trade to rule, then the report written under REFLEX_HOME."""
    links = Links(existing_client(settings.resolved_tracking_uri), settings.mlflow_ui_url)
    with res.engine.connect() as conn:
        decision = pick_decision(conn)
        found = trace(conn, decision, links) if decision else None
    if found is None:
        console.print("[yellow]no evaluated decision to follow yet[/yellow]")
        return
    rows = [
        (s.kind, s.id, s.mlflow_run_id or "-", escape(str(s.detail.get("state") or "")))
        for s in found.steps
    ]
    console.print(table(f"lineage of decision {found.decision_id}",
                        ("step", "id", "MLflow run", "state"), rows))  # fmt: skip
    console.print(f"every field and UI link: [bold]uv run reflexmem lineage {decision}[/bold]")
    report = write_report(settings, res.engine, settings.home / "report.html")
    console.print(f"report: {report.resolve()}")
    console.print("notebook: [bold]uv run python notebooks/lineage_review.py[/bold]")
