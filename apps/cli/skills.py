"""REFLEX skills on the command line: check, propose, status, effect, Experiment A."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from apps.cli.common import app, console, emit, err, open_resources, parse_as_of

skills_app = typer.Typer(
    no_args_is_help=True, help="REFLEX skills: check, propose, status, effect, Experiment A."
)
app.add_typer(skills_app, name="skills")


@skills_app.command("check")
def skills_check(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Skill files (default: shipped).")
    ] = None,
) -> None:
    """Validate skill files against the schema, the role registry and their own contract."""
    from reflexmem.reflex.skills import SKILLS_DIR, SkillLoadError, load_skill_files
    from reflexmem.registry import load_registry

    files = paths or sorted(SKILLS_DIR.glob("*.yaml"))
    try:
        specs = load_skill_files(files, load_registry())
    except SkillLoadError as exc:
        err.print(f"[red]refused:[/red] {exc.path}: {exc.field}: {exc.reason}", soft_wrap=True)
        raise typer.Exit(1) from exc
    for spec in specs:
        console.print(f"ok  {spec.key}  {spec.layer}  {spec.task_family}  owner={spec.owner}")


@skills_app.command("experiment-a")
def skills_experiment_a(
    home: Annotated[
        Path | None, typer.Option(help="Directory for its own ledger and files.")
    ] = None,
) -> None:
    """Experiment A on a fresh SQLite ledger: layers per experience stage, holds, reviews."""
    import tempfile

    from adapters import migrate
    from adapters.db import make_engine
    from reflexmem.reflex.experiment_a import format_experiment_a, run_experiment_a

    root = home or Path(tempfile.mkdtemp(prefix="reflex-experiment-a-"))
    ledger = root / "ledger.sqlite"
    if ledger.exists():
        err.print(f"{ledger} exists; Experiment A needs a fresh ledger")
        raise typer.Exit(2)
    engine = make_engine(f"sqlite:///{ledger}")
    migrate.upgrade(engine)
    report = run_experiment_a(engine, root / "files")
    console.print(format_experiment_a(report), soft_wrap=True, highlight=False)
    console.print(f"\nledger: {ledger}")


@skills_app.command("status")
def skills_status(
    family: Annotated[str, typer.Option(help="Task family.")] = "trade_decision",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Every skill version of a family: layer, state, parent, where it came from."""
    from reflexmem.reflex.cycle_ledger import load_views

    res = open_resources()
    with res.engine.connect() as conn:
        views = load_views(conn, family)
    rows = [
        {
            "skill": v.key,
            "layer": str(v.spec.layer),
            "state": str(v.state),
            "parent": v.spec.previous_version,
            "from": v.spec.provenance.get("kind", "file"),
            "lesson": v.spec.provenance.get("lesson"),
            "mlflow_model_version": v.mlflow_model_version,
            "moves": [f"{state}@{at.isoformat()}" for state, at in v.history],
        }
        for v in views
    ]
    if as_json:
        emit({"family": family, "versions": rows}, True)
        return
    for r in rows:
        console.print(f"{r['skill']:<52} {r['layer']}  {r['state']:<11} from {r['from']}")


@skills_app.command("propose")
def skills_propose(
    path: Annotated[Path, typer.Argument(help="A skill file (YAML).")],
    as_of: Annotated[str | None, typer.Option(help="The cycle clock (ISO).")] = None,
) -> None:
    """Admit a skill file as a candidate; the cycle evaluates it like a generated one."""
    from reflexmem.operations.skills import propose_skill
    from reflexmem.reflex.skills import SkillLoadError

    res = open_resources()
    try:
        made = propose_skill(res, path.read_text(encoding="utf-8"), str(path), parse_as_of(as_of))
    except SkillLoadError as exc:
        err.print(f"[red]refused:[/red] {exc.path}: {exc.field}: {exc.reason}", soft_wrap=True)
        raise typer.Exit(1) from exc
    console.print(f"{made.skill} registered as {made.state} ({made.sources} known sources)")


@skills_app.command("effect")
def skills_effect(
    as_of: Annotated[str | None, typer.Option(help="The cycle clock (ISO).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Each promoted trading check's failure mode with it off and on (held-apart decisions)."""
    from reflexmem.operations.skill_lifecycle import skill_effects

    report = skill_effects(open_resources(), parse_as_of(as_of))
    rows = [
        {
            **w.__dict__,
            "false_stops": w.false_stops,
            "rate_without_check": round(w.rate_without_check, 4),
            "rate_proceeded": round(w.rate_proceeded, 4),
        }
        for w in report.windows
    ]
    if as_json:
        emit({"as_of": str(report.as_of), "windows": rows}, True)
        return
    for r in rows:
        console.print(
            f"{r['skill']:<52} {r['window']:<16} decisions {r['decisions']:>5}  failure "
            f"{r['failure_cases']:>4}  stopped {r['stopped']:>4}  went-ahead rate "
            f"{r['rate_proceeded']:.1%}"
        )
