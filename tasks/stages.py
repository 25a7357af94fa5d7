"""Prefect tasks: each wraps exactly one stage of `reflexmem.operations.stages`.

A task takes the `Settings` (plain, picklable data) instead of resources, and gets the
resources from `adapters.resources.resources_for`, once per worker process: a task that a
work pool or a Dask worker runs in another process reaches the same ledger, tracker and
price source as the flow that submitted it. Each wrapper keeps the operation's own
signature (with `res` replaced by `settings`), so Prefect records real parameter names.

Retry counts come from the stage list. Retries are safe because every operation is
idempotent by its own selection and writes in one transaction: a retry finds the work
committed (and selects nothing) or does it from scratch. Results are small reports, kept
in memory (no result persistence).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from prefect import Task, task
from prefect.cache_policies import NO_CACHE

from adapters.resources import resources_for
from reflexmem.operations.stages import stage_of
from reflexmem.settings import Settings


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


_TASKS: dict[Callable[..., Any], Task[..., Any]] = {}


def task_for(op: Callable[..., Any]) -> Task[..., Any]:
    """The task that wraps `op`, made once from its stage (`reflexmem.operations.stages`).

    An operation missing from the stage list is a programming error (`KeyError`).
    """
    found = _TASKS.get(op)
    if found is None:
        found = _TASKS[op] = _wrap(op, stage_of(op).retries)
    return found
