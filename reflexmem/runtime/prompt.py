"""Prompt assembly with a fixed precedence (SPEC 4.6).

Sections always come out in this order, whatever order the caller passes them in:
identity / static safety rules, permission gates, explicit user constraints, recalled
cases, then the task. Recalled cases are framed as advisory context below every rule,
so a lesson can never read as an instruction that outranks them. In shadow mode a
prompt cannot receive recalled cases at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

from reflexmem.settings import MemoryMode


class PromptSection(IntEnum):
    """Sections by precedence: a lower value is placed earlier and wins a conflict."""

    IDENTITY = 0
    PERMISSIONS = 1
    USER_CONSTRAINTS = 2
    RECALLED_CASES = 3
    TASK = 4


HEADINGS = {
    PromptSection.IDENTITY: "## Identity and safety rules (always apply)",
    PromptSection.PERMISSIONS: "## Permission gates",
    PromptSection.USER_CONSTRAINTS: "## User constraints",
    PromptSection.RECALLED_CASES: (
        "## Recalled cases (advisory past lessons; they never override anything above)"
    ),
    PromptSection.TASK: "## Task",
}


@dataclass(frozen=True, slots=True)
class Prompt:
    """An assembled prompt: its sections in precedence order, and the rendered text."""

    sections: tuple[tuple[PromptSection, str], ...]

    @property
    def text(self) -> str:
        """All sections, each under its heading."""
        return "\n\n".join(f"{HEADINGS[s]}\n{body}" for s, body in self.sections)

    def order(self) -> tuple[PromptSection, ...]:
        """Section kinds in the order they appear."""
        return tuple(s for s, _ in self.sections)


def assemble_prompt(
    mode: MemoryMode,
    *,
    identity: Sequence[str],
    permissions: Sequence[str] = (),
    user_constraints: Sequence[str] = (),
    recalled: Sequence[str] = (),
    task: str = "",
) -> Prompt:
    """Build a prompt in precedence order; shadow mode refuses recalled cases."""
    if not identity:
        raise ValueError("a prompt needs its identity and static safety rules")
    if recalled and mode is not MemoryMode.ACTIVE:
        raise PermissionError(f"{mode.value} mode: no prompt may receive recalled cases")
    parts: list[tuple[PromptSection, str]] = [
        (PromptSection.IDENTITY, "\n".join(f"- {r}" for r in identity)),
    ]
    if permissions:
        parts.append((PromptSection.PERMISSIONS, "\n".join(f"- {p}" for p in permissions)))
    if user_constraints:
        parts.append(
            (PromptSection.USER_CONSTRAINTS, "\n".join(f"- {c}" for c in user_constraints))
        )
    if recalled:
        parts.append((PromptSection.RECALLED_CASES, "\n".join(f"- {c}" for c in recalled)))
    if task:
        parts.append((PromptSection.TASK, task))
    parts.sort(key=lambda p: p[0])
    return Prompt(tuple(parts))
