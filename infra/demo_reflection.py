"""`make demo`, continued after admission: maturation, evaluation, reflection.

Runs the same core calls the flows run, directly (no Prefect server needed), with the
rule-based reflector (no network) and MLflow tracking on the demo's SQLite store.
"Now" is the end of the vendored price data, so the late decisions are honestly not
due or unsettled instead of being judged on prices nobody has.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import sqlalchemy as sa
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from infra.tracking_eval import EvaluationTracker, tracked_evaluate, tracked_promote
from reflexmem.evaluation import get_profile, role_statistics
from reflexmem.maturation import dfull_prices, mature_cases, settle_open_positions
from reflexmem.reflection import RuleReflector
from reflexmem.reflection.batch import guarded_executor, reflect_all
from reflexmem.registry import load_registry
from reflexmem.settings import Settings


def _table(title: str, header: tuple[str, ...], rows: list[tuple[object, ...]]) -> Table:
    table = Table(title=title)
    for i, name in enumerate(header):
        table.add_column(name, justify="right" if i else "left")
    for row in rows:
        table.add_row(*[str(x) for x in row])
    return table


def demo_reflection(settings: Settings, engine: sa.Engine, console: Console) -> None:
    """Maturation, evaluation (tracked in MLflow) and rule-based reflection of the demo."""
    registry = load_registry()
    source = dfull_prices()
    profile = get_profile()
    ends = [s.last for s in (source.series(t) for t in source.symbols) if s is not None]
    last = np.max(np.asarray(ends, dtype="datetime64[us]")).astype(datetime)
    as_of = last.replace(tzinfo=UTC) + timedelta(hours=1)

    console.rule(f"5. maturation check as of {as_of.isoformat(timespec='minutes')}")
    with engine.begin() as conn:
        settled = settle_open_positions(conn, source, registry)
        maturity = mature_cases(
            conn,
            registry,
            as_of=as_of,
            min_points=settings.min_evaluation_points,
            profile=profile.name,
        )
    console.print(
        f"positions: {settled.open_positions} open, {settled.settled} settled from fills + prices"
    )
    rows: list[tuple[object, ...]] = [("matured (eligible)", maturity.matured)]
    rows += [(f"pending: {k}", v) for k, v in maturity.pending.items()]
    console.print(_table("maturity", ("cases", "count"), rows))

    console.rule(f"6. evaluation runs (profile {profile.name} v{profile.version}) -> MLflow")
    tracker = EvaluationTracker(
        settings.resolved_tracking_uri, ledger_url=settings.resolved_database_url
    )
    evaluated = tracked_evaluate(engine, tracker, source, profile)
    promoted = tracked_promote(
        engine, tracker, profile.name, source_batch=evaluated.info.batch_id, only_unpromoted=True
    )
    console.print(
        f"{evaluated.n_runs} runs in batch {evaluated.info.batch_id} "
        f"(MLflow run {evaluated.mlflow_run_id}); {promoted.promoted} promoted to primary "
        f"(MLflow run {promoted.mlflow_run_id})"
    )
    with engine.connect() as conn:
        stats = role_statistics(conn, profile.name)
    console.print(
        _table(
            "primary-run statistics",
            ("role", "metric", "n", "mean"),
            [
                (r, m, n, f"{v:+.4f}")
                for r, m, n, v in stats.select("role_id", "metric", "n", "mean").iter_rows()
            ],
        )
    )

    console.rule("7. reflection (rule-based L0/L1, serialized per role, no network)")
    executor, broker = guarded_executor()
    reports = reflect_all(engine, registry, RuleReflector(), executor=executor)
    classes: dict[str, int] = {}
    for report in reports:
        for name, n in report.by_class.items():
            classes[name] = classes.get(name, 0) + n
    console.print(
        _table(
            "reflected cases per outcome class",
            ("outcome class", "cases"),
            sorted(classes.items()),
        )
    )
    console.print(
        f"reflected {sum(r.reflected for r in reports)}, failed {sum(r.failed for r in reports)}, "
        f"lessons {sum(r.lessons for r in reports)} "
        f"({sum(r.memory_entries for r in reports)} kept as episodic memory); "
        f"broker calls: {len(broker)}"
    )
    with engine.connect() as conn:
        examples = conn.execute(
            sa.text(
                "SELECT role_id, outcome_class, lesson FROM role_cases "
                "WHERE lesson IS NOT NULL ORDER BY role_id, case_id"
            )
        ).all()
    # One lesson per role, a look-ahead (leakage) lesson first when there is one.
    ordered = sorted(examples, key=lambda row: "look-ahead" not in row[2])
    shown: dict[str, tuple[str, str]] = {}
    for role, cls, lesson in ordered:
        if role not in shown and len(shown) < 3:
            shown[role] = (cls, lesson)
    for role, (cls, lesson) in shown.items():
        console.print(f"[bold]{escape(role)}[/bold] ({escape(cls)}) {escape(lesson)}")
    if classes and set(classes) == {"missing_data"}:
        console.print(
            "[yellow]note[/yellow]: the synthetic stream records only price_history evidence, "
            "so every role lacks evidence it requires; the rules classify that as missing_data."
        )
    store = settings.resolved_tracking_uri
    console.print(
        f"open the MLflow UI on this store: [bold]mlflow ui --backend-store-uri {store}[/bold]"
    )
