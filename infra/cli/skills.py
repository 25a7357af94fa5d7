"""REFLEX skills on the command line: check skill files, run Experiment A."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from infra.cli.common import app, console, err

skills_app = typer.Typer(no_args_is_help=True, help="REFLEX skills: check files, Experiment A.")
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

    from infra import migrate
    from infra.db import make_engine
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
