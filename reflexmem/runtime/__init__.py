"""What an agent runtime gets from Reflex Memory, decided by the frozen mode (docs/design.md §9).

`tools.build_registry(mode, ...)` is the one place an agent runtime asks for its tools:
in `shadow` the registry simply has no recall and no manual-reflect tool (asking for one
raises `ToolUnavailable`), only the store path that records candidate cases; in
`active` both exist. Execution tools are wrapped so that no recalled case text can reach
them. `prompt.assemble_prompt` orders every prompt by precedence: identity and static
safety rules, permission gates, explicit user constraints, and only then recalled cases.
"""

from reflexmem.runtime.prompt import Prompt, PromptSection, assemble_prompt
from reflexmem.runtime.tools import (
    CaseTextLeak,
    Tool,
    ToolKind,
    ToolRegistry,
    ToolUnavailable,
    build_registry,
)

__all__ = [
    "CaseTextLeak",
    "Prompt",
    "PromptSection",
    "Tool",
    "ToolKind",
    "ToolRegistry",
    "ToolUnavailable",
    "assemble_prompt",
    "build_registry",
]
