"""One record type for every refusal: a structure file, a mutation, a message, a scope.

Whatever refuses (the schema, a static check, the broker, the scoped memory), it says
the same four things: where (`source`: a file path, an operator, an episode), which
field, which check, and why in plain words. The log is an append-only list the ledger
persists as `structure_events` rows, so a refusal is never just an exception that
scrolled by.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum


class RefusalKind(StrEnum):
    """What was refused (the `kind` of its ledger event)."""

    FILE = "refused_file"
    MUTATION = "refused_mutation"
    MESSAGE = "refused_message"
    SCOPE = "refused_scope"


@dataclass(frozen=True)
class Refusal:
    """A refused structure, mutation, message or read, with its file, field and check."""

    kind: RefusalKind
    source: str
    field: str
    check: str
    reason: str
    structure_id: str | None = None

    def __str__(self) -> str:
        return f"{self.source}: {self.field}: {self.check}: {self.reason}"

    def to_dict(self) -> dict[str, str | None]:
        """Plain form for JSON and ledger rows."""
        return {
            "kind": self.kind.value,
            "source": self.source,
            "field": self.field,
            "check": self.check,
            "reason": self.reason,
            "structure_id": self.structure_id,
        }


class StructureRefused(ValueError):
    """A structure (file or mutation output) failed the schema or a static check."""

    def __init__(self, refusals: Sequence[Refusal]) -> None:
        if not refusals:
            raise ValueError("StructureRefused needs at least one refusal")
        self.refusals = tuple(refusals)
        more = f" (+{len(self.refusals) - 1} more)" if len(self.refusals) > 1 else ""
        super().__init__(f"structure refused: {self.refusals[0]}{more}")


class IsolationRefused(PermissionError):
    """Storage, retrieval or the broker refused an access (docs/design.md §11: below the prompt)."""

    def __init__(self, refusal: Refusal) -> None:
        self.refusal = refusal
        super().__init__(str(refusal))


@dataclass
class RefusalLog:
    """Append-only list of refusals shared by the layers of one process or search."""

    items: list[Refusal] = field(default_factory=list)

    def add(self, refusal: Refusal) -> Refusal:
        """Record one refusal and return it."""
        self.items.append(refusal)
        return refusal

    def extend(self, refusals: Sequence[Refusal]) -> None:
        """Record several refusals."""
        self.items.extend(refusals)

    def of_kind(self, kind: RefusalKind) -> list[Refusal]:
        """Refusals of one kind, in order."""
        return [r for r in self.items if r.kind == kind]

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Refusal]:
        return iter(self.items)
