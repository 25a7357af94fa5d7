"""How a staged job's sequence runs its stages: the `StageRunner` protocol and the direct runner.

A sequence (the cycle and its parts, the structure search, the AEL benchmark) names its
stages in order and hands each to a runner: `run(op, **params)` for one stage,
`map(op, key, values, **params)` for one stage per value. `DirectRunner` calls the
operation in this process (the CLI, the demo, the benchmarks and the tests); the
Prefect runner (`tasks/runner.py`) calls the task wrapping the same operation. A
sequence is written once, so no entry point can hold a drifting copy of it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from reflexmem.operations.resources import Resources

R = TypeVar("R")


class StageRunner(Protocol):
    """Runs one operation with parameters, or one operation over a list of values."""

    def run(self, op: Callable[..., R], /, **params: Any) -> R:
        """`op(resources, **params)`, however the runner executes it."""
        ...

    def map(
        self, op: Callable[..., R], key: str, values: Sequence[Any], /, **params: Any
    ) -> list[R]:
        """`op(resources, **{key: v}, **params)` for every value (possibly concurrently)."""
        ...


class DirectRunner:
    """Calls operations in this process, one after the other."""

    def __init__(self, resources: Resources) -> None:
        self.resources = resources

    def run(self, op: Callable[..., R], /, **params: Any) -> R:
        """Call the operation now."""
        return op(self.resources, **params)

    def map(
        self, op: Callable[..., R], key: str, values: Sequence[Any], /, **params: Any
    ) -> list[R]:
        """Call the operation once per value, in order."""
        return [op(self.resources, **{key: v}, **params) for v in values]
