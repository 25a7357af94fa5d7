"""Prefect tasks: each wraps exactly one operation of `reflexmem.operations`.

A task takes the `Settings` (plain, picklable data) instead of resources, and gets the
resources from `adapters.resources.resources_for`, once per worker process: a task that a
work pool or a Dask worker runs in another process reaches the same ledger, tracker and
price source as the flow that submitted it. Each wrapper keeps the operation's own
signature (with `res` replaced by `settings`), so Prefect records real parameter names.

Retries are safe because every operation is idempotent by its own selection and writes
in one transaction: a retry finds the work committed (and selects nothing) or does it
from scratch. Results are small reports, kept in memory (no result persistence).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from prefect import Task, task
from prefect.cache_policies import NO_CACHE

from adapters.resources import resources_for
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
from reflexmem.settings import Settings

RETRIES: dict[Callable[..., Any], int] = {
    cycle_runs.begin_cycle: 2,
    cycle_runs.end_cycle: 2,
    intake.ingest_drop: 1,
    intake.admit: 2,
    maturation.plan: 2,
    maturation.settle: 2,
    maturation.mature: 2,
    evaluation.evaluate: 2,
    evaluation.replay: 1,
    evaluation.promote: 2,
    reflection.reflect: 1,
    memory.record_episodes: 2,
    memory.namespaces_due: 2,
    memory.distil: 2,
    memory.record_agent_episodes: 0,
    skills.generate_candidates: 2,
    skills.check_decisions: 2,
    skill_lifecycle.advance_skills: 1,
    skill_lifecycle.audit_skills: 1,
}
"""Every operation a flow may run, with its retry count."""


def _wrap(op: Callable[..., Any], retries: int) -> Task[..., Any]:
    signature = inspect.signature(op)
    params = list(signature.parameters.values())
    first = inspect.Parameter(
        "settings", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Settings
    )
    wrapped = signature.replace(parameters=[first, *params[1:]])

    def run(*args: Any, **kwargs: Any) -> Any:
        # Prefect binds the call to the signature below and may pass names positionally.
        arguments = dict(wrapped.bind(*args, **kwargs).arguments)
        settings = arguments.pop("settings")
        return op(resources_for(settings), **arguments)

    run.__signature__ = wrapped  # type: ignore[attr-defined]
    run.__name__ = op.__name__
    run.__doc__ = op.__doc__
    run.__module__ = op.__module__
    wrapper: Task[..., Any] = task(
        name=op.__name__.replace("_", "-"),
        retries=retries,
        retry_delay_seconds=2,
        cache_policy=NO_CACHE,
        persist_result=False,
    )(run)
    return wrapper


TASKS: dict[Callable[..., Any], Task[..., Any]] = {op: _wrap(op, n) for op, n in RETRIES.items()}


def task_for(op: Callable[..., Any]) -> Task[..., Any]:
    """The task that wraps `op`; an operation without a task is a programming error."""
    try:
        return TASKS[op]
    except KeyError:
        raise KeyError(f"no Prefect task wraps {op.__module__}.{op.__name__}") from None
