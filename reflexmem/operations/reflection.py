"""The reflection stage (docs/design.md §7): one role's offerable cases, one locked batch.

The reflector is built per batch from `Resources.reflection` around a guarded executor
whose broker must never run (the reflector identity has no fund-moving tool), and a
reflector that holds a connection (the model adapter) is always closed afterwards.

The batch reports to the tracker like an evaluation batch does: its run is opened just
before the summary row is written (the run ID goes on that row), finished with the
lessons table after the commit, and marked FAILED if the write fails.
"""

from __future__ import annotations

from datetime import date

from reflexmem.operations.resources import ReflectionRun, Resources
from reflexmem.reflection.batch import ReflectionBatch, RoleReport, guarded_executor, reflect_role


def reflect(
    res: Resources,
    role_id: str,
    profile: str | None = None,
    day: date | None = None,
    cycle_id: str | None = None,
) -> RoleReport:
    """Reflect on one role's offerable cases (serialized per role by a database lock)."""
    setup = res.reflection
    chosen = profile or res.profile
    executor, _broker = guarded_executor()
    reflector = setup.build(executor)
    opened: list[tuple[str, ReflectionRun]] = []

    def open_run(batch: ReflectionBatch) -> str | None:
        run = ReflectionRun(batch, setup.name, setup.model, setup.budget, chosen, cycle_id)
        run_id = res.tracker.open_reflection(run)
        if run_id is not None:
            opened.append((run_id, run))
        return run_id

    try:
        report = reflect_role(
            res.engine,
            res.registry,
            role_id,
            reflector,
            reflector_name=setup.name,
            profile=chosen,
            limit=setup.batch_limit,
            budget=setup.budget,
            day=day,
            executor=executor,
            open_run=open_run,
        )
    except BaseException:
        if opened:
            res.tracker.fail(opened[-1][0])
        raise
    finally:
        close = getattr(reflector, "close", None)
        if callable(close):
            close()
    if opened:
        res.tracker.finish_reflection(opened[-1][1], report)
    return report
