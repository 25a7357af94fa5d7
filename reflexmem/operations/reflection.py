"""The reflection stage (SPEC 4.5): one role's offerable cases, one locked batch.

The reflector is built per batch from `Resources.reflection` around a guarded executor
whose broker must never run (the reflector identity has no fund-moving tool), and a
reflector that holds a connection (the model adapter) is always closed afterwards.
"""

from __future__ import annotations

from datetime import date

from reflexmem.operations.resources import Resources
from reflexmem.reflection.batch import RoleReport, guarded_executor, reflect_role


def reflect(
    res: Resources,
    role_id: str,
    profile: str | None = None,
    day: date | None = None,
) -> RoleReport:
    """Reflect on one role's offerable cases (serialized per role by a database lock)."""
    setup = res.reflection
    executor, _broker = guarded_executor()
    reflector = setup.build(executor)
    try:
        return reflect_role(
            res.engine,
            res.registry,
            role_id,
            reflector,
            reflector_name=setup.name,
            profile=profile or res.profile,
            limit=setup.batch_limit,
            budget=setup.budget,
            day=day,
            executor=executor,
        )
    finally:
        close = getattr(reflector, "close", None)
        if callable(close):
            close()
