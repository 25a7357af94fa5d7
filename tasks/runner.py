"""The stage runner flows use: each stage runs as the Prefect task wrapping its operation.

`reflexmem.operations.cycle` writes the sequence of stages once against a runner; this
runner turns `run(op, ...)` into a task call and `map(op, key, values, ...)` into one
submitted task per value (tagged `role:<id>` for per-role stages, so a server's tag
concurrency limit can hold a second batch of the same role), gathered in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from reflexmem.settings import Settings
from tasks.stages import task_for

R = TypeVar("R")


class PrefectRunner:
    """Runs operations as Prefect tasks inside the current flow run."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def run(self, op: Callable[..., R], /, **params: Any) -> R:
        """Run the operation's task and wait for its result."""
        result: R = task_for(op)(self.settings, **params)
        return result

    def map(
        self, op: Callable[..., R], key: str, values: Sequence[Any], /, **params: Any
    ) -> list[R]:
        """Submit one task per value (side by side on the flow's task runner); results in order."""
        task = task_for(op)
        futures = [
            task.with_options(tags=[f"role:{v}"] if key == "role_id" else []).submit(
                self.settings, **{key: v}, **params
            )
            for v in values
        ]
        return [f.result() for f in futures]
