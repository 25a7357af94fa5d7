"""The stage runner flows use: each stage runs as the Prefect task wrapping its operation.

`reflexmem.operations.cycle` writes the sequence of stages once against a runner; this
runner turns `run(op, ...)` into a task call and `map(op, key, values, ...)` into one
task per value, submitted side by side on a PostgreSQL ledger and run one after another
on SQLite, whose single writer would only make side-by-side tasks queue (a stage that
writes no ledger, such as a benchmark's part, runs side by side on either); results come
back in order either way.

Side by side, per-role tasks are tagged `role:<id>`, so a server's tag concurrency limit
(`reflexmem serve` sets one per role) holds a second batch of the same role. One after
another they are not: every tagged task run costs a lease round trip to the Prefect API
(about 1.4 s each on this 2-core machine under load, 11 s of a 44 s cycle at 1e4
decisions), and what the limit would hold is already held by the ledger's own role lock
(`reflexmem.reflection.locks.role_lock`), which guards every path, flows or
not.

Where the side-by-side tasks run (the flow's threads, or Dask worker processes) is
`tasks.fanout`'s choice from the settings; `prefect_runner(settings)` enters it for the
life of a flow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from reflexmem.operations.stages import stage_of
from reflexmem.settings import Settings
from tasks.fanout import Submit, fanout
from tasks.stages import task_for

R = TypeVar("R")


class PrefectRunner:
    """Runs operations as Prefect tasks inside the current flow run."""

    def __init__(self, settings: Settings, submit: Submit | None = None) -> None:
        self.settings = settings
        self.submit = submit
        # SQLite has one writer: side-by-side writers would only queue on its write lock.
        self.concurrent_ledger_writes = settings.backend == "postgresql"

    def run(self, op: Callable[..., R], /, **params: Any) -> R:
        """Run the operation's task and wait for its result."""
        result: R = task_for(op)(self.settings, **params)
        return result

    def map(
        self, op: Callable[..., R], key: str, values: Sequence[Any], /, **params: Any
    ) -> list[R]:
        """One task per value, side by side on the flow's task runner; results in order."""
        task = task_for(op)
        if self.concurrent_ledger_writes is False and stage_of(op).ledger_writer:
            return [task(self.settings, **{key: v}, **params) for v in values]
        if self.submit is None:
            futures = [
                task.with_options(tags=_tags(key, v)).submit(self.settings, **{key: v}, **params)
                for v in values
            ]
        else:
            futures = [
                self.submit(
                    task.with_options(tags=_tags(key, v)),
                    {"settings": self.settings, key: v, **params},
                )
                for v in values
            ]
        return [f.result() for f in futures]


@contextmanager
def prefect_runner(settings: Settings) -> Iterator[PrefectRunner]:
    """A runner whose side-by-side tasks go where the settings say (threads or Dask)."""
    with fanout(settings) as submit:
        yield PrefectRunner(settings, submit if settings.uses_dask else None)


def _tags(key: str, value: Any) -> list[str]:
    return [f"role:{value}"] if key == "role_id" else []
