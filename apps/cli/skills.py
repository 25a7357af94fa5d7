"""REFLEX skills on the command line: check, propose, status, effect, Experiment A."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from apps.cli.common import app, console, emit, err, open_resources, parse_as_of

if TYPE_CHECKING:
    from reflexmem.reflex.outcomes import OutcomeEffect

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


def _outcome_fields(outcome: OutcomeEffect | None) -> dict[str, float | int | None]:
    """The outcome effect as flat JSON fields (nulls when there is too little data)."""
    if outcome is None:
        return dict.fromkeys(
            ("effect_return", "effect_ci_low", "effect_ci_high", "n_held_out", "n_proceeded",
             "n_stopped", "loss_rate_proceeded", "loss_rate_stopped"),
        )  # fmt: skip
    return {
        "effect_return": outcome.effect,
        "effect_ci_low": outcome.ci_low,
        "effect_ci_high": outcome.ci_high,
        "n_held_out": outcome.n_passed + outcome.n_held,
        "n_proceeded": outcome.n_passed,
        "n_stopped": outcome.n_held,
        "loss_rate_proceeded": outcome.loss_rate_passed,
        "loss_rate_stopped": outcome.loss_rate_held,
    }


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.2f}%"


def outcome_line(outcome: OutcomeEffect | None) -> str:
    """`effect on realized return: +x.xx% [lo, hi], n held h / passed p`."""
    if outcome is None:
        return "effect on realized return: n/a"
    interval = (
        f"[{_pct(outcome.ci_low)}, {_pct(outcome.ci_high)}]"
        if outcome.ci_low is not None
        else "[no interval: fewer than 2 settled decisions on a side or 5 two-week blocks]"
    )
    return (
        f"effect on realized return: {_pct(outcome.effect)} {interval}, "
        f"n held {outcome.n_held} / passed {outcome.n_passed}"
    )


@skills_app.command("status")
def skills_status(
    family: Annotated[str, typer.Option(help="Task family.")] = "trade_decision",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    as_of: Annotated[str | None, typer.Option(help="The cycle clock (ISO).")] = None,
) -> None:
    """Every skill version of a family: layer, kind, state, parent, where it came from.

    `kind` is `policy` for a check that only restates its role's evidence requirement,
    `learned` otherwise; a learned trading check carries its outcome effect on held-out
    decisions (`effect_return` with its 95 % interval and n; null with too little data).
    """
    from reflexmem.operations.skill_lifecycle import skill_status

    res = open_resources()
    listed = skill_status(res, family, parse_as_of(as_of))
    rows = [
        {
            "skill": s.view.key,
            "skill_id": s.view.spec.skill_id,
            "version": s.view.spec.version,
            "kind": s.kind,
            "layer": str(s.view.spec.layer),
            "state": str(s.view.state),
            "parent": s.view.spec.previous_version,
            "from": s.view.spec.provenance.get("kind", "file"),
            "lesson": s.view.spec.provenance.get("lesson"),
            "mlflow_model_version": s.view.mlflow_model_version,
            "moves": [f"{state}@{at.isoformat()}" for state, at in s.view.history],
            **_outcome_fields(s.outcome),
        }
        for s in listed
    ]
    if as_json:
        emit({"family": family, "versions": rows}, True)
        return
    for r in rows:
        console.print(
            f"{r['skill']:<52} {r['layer']}  {r['kind']:<7}  {r['state']:<11} from {r['from']}",
            soft_wrap=True,
        )


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
    """Each promoted trading check's effect on realized returns of held-out decisions.

    Beside it, the label windows (failure mode with the check off and on): a diagnostic
    of agreement with reflection, not of whether the check helps.
    """
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
    outcomes = [
        {
            "skill": key,
            "kind": report.kinds.get(key),
            "state": report.states.get(key),
            "method": o.method,
            "mean_proceeded": o.mean_passed,
            "mean_stopped": o.mean_held,
            **_outcome_fields(o),
        }
        for key, o in report.outcomes.items()
    ]
    if as_json:
        emit(
            {
                "as_of": str(report.as_of),
                "outcomes": outcomes,
                "windows": rows,
                "windows_are": "label agreement with reflection (diagnostic)",
            },
            True,
        )
        return
    for key, o in report.outcomes.items():
        console.print(
            f"{key:<52} {report.kinds.get(key, ''):<7}  {outcome_line(o)}",
            soft_wrap=True,
            highlight=False,
            markup=False,
        )
    if rows:
        console.print("label windows (diagnostic: agreement with reflection's labels):")
    for r in rows:
        console.print(
            f"{r['skill']:<52} {r['window']:<16} decisions {r['decisions']:>5}  failure "
            f"{r['failure_cases']:>4}  stopped {r['stopped']:>4}  went-ahead rate "
            f"{r['rate_proceeded']:.1%}"
        )
