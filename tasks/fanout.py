"""Where fan-out tasks run: the flow's own threads, or a Dask cluster (`prefect-dask`).

Per-role reflection, per-namespace distillation and per-seed benchmark runs are
independent tasks. By default they are submitted to the flow's task runner (threads in
the flow's process). When the settings ask for Dask (`REFLEX_DASK_ADDRESS` names a
running scheduler, or `REFLEX_TASK_RUNNER=dask` starts a local cluster of
`REFLEX_DASK_WORKERS` processes for the flow run), they are submitted to a
`DaskTaskRunner` entered for the life of the flow, so the tasks run in other processes,
possibly on other machines. Those processes share nothing with the flow but what the
`Settings` name (the ledger and the tracking server): each task rebuilds its resources
from the pickled `Settings` with `adapters.resources.resources_for`, once per worker.

The choice is made at run time from the settings, not when the flow is decorated, so a
deployment served by a worker picks it up from the worker's environment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from prefect import Task

from reflexmem.settings import Settings

Submit = Callable[[Task[..., Any], dict[str, Any]], Any]
"""`submit(task, parameters) -> PrefectFuture`."""


def _on_flow(task: Task[..., Any], parameters: dict[str, Any]) -> Any:
    return task.submit(**parameters)


def dask_runner(settings: Settings) -> Any:
    """The `DaskTaskRunner` the settings name: an existing scheduler, or a local cluster."""
    from prefect_dask.task_runners import DaskTaskRunner

    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": settings.dask_workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,
        }
    )


@contextmanager
def fanout(settings: Settings) -> Iterator[Submit]:
    """A submit function for independent tasks, on threads or on Dask per the settings."""
    if not settings.uses_dask:
        yield _on_flow
        return
    with dask_runner(settings) as runner:

        def on_dask(task: Task[..., Any], parameters: dict[str, Any]) -> Any:
            return runner.submit(task, parameters=parameters)

        yield on_dask
