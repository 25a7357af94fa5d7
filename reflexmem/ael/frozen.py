"""Proof that a split ran with frozen learning state: a digest before and after.

Kept apart from the agent so the runner, the JSON document and the tests share one
definition of "identical": the SHA-256 of the canonical JSON of everything the agent
has learned.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any


def digest(state: Any) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces) of `state`."""
    blob = json.dumps(state, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class FrozenCheck:
    """Proof that a split ran with frozen learning state: digests before and after."""

    split: str
    before_sha256: str
    after_sha256: str
    decisions: int

    @property
    def identical(self) -> bool:
        """Whether every piece of learning state is byte-identical across the split."""
        return self.before_sha256 == self.after_sha256

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "split": self.split,
            "before_sha256": self.before_sha256,
            "after_sha256": self.after_sha256,
            "identical": self.identical,
            "decisions": self.decisions,
        }
