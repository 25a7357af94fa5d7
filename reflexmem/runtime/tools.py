"""The tool registry an agent runtime gets, per frozen memory mode.

The registry is built once from the mode and is immutable: there is no way to add a
recall tool to a shadow registry later, because shadow must not be one call away from
active. Tools are plain callables with a kind; execution tools (anything that can move
funds or place orders) are wrapped by a guard that refuses any argument carrying
recalled case text, so "case text never reaches execution" is enforced by the
executor, not by prompt wording.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from reflexmem.settings import MemoryMode

RECALL_TOOL = "recall_cases"
REFLECT_TOOL = "reflect_case"
STORE_TOOL = "record_case"

MIN_GUARDED_CHARS = 12
"""Recalled texts shorter than this are not tracked (they would match ordinary words)."""


class ToolKind(StrEnum):
    """What a tool may touch."""

    MEMORY = "memory"  # reads role cases (recall) or writes lessons (manual reflect)
    STORE = "store"  # records candidate cases; never returns case text
    EXECUTION = "execution"  # can move funds / place orders; never sees case text


class ToolUnavailable(LookupError):
    """The runtime asked for a tool that this mode's registry does not have."""


class CaseTextLeak(PermissionError):
    """An execution tool was called with recalled case text in its arguments."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A named callable with its kind."""

    name: str
    kind: ToolKind
    description: str
    handler: Callable[..., Any]


@dataclass
class _RecalledTexts:
    """Texts and ids recall handed out in this runtime; execution args are checked against them."""

    texts: set[str] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)

    def remember(self, result: Any) -> None:
        hits = getattr(result, "hits", None)
        if hits is None:
            return
        for hit in hits:
            self.ids.add(str(hit.id))
            text = " ".join(str(hit.text).split()).lower()
            if len(text) >= MIN_GUARDED_CHARS:
                self.texts.add(text)

    def leaks(self, value: Any) -> str | None:
        from reflexmem.recall.api import RecallResult
        from reflexmem.recall.hit import RecallHit

        if isinstance(value, RecallHit | RecallResult):
            return f"a {type(value).__name__} object"
        if isinstance(value, str):
            flat = " ".join(value.split()).lower()
            for text in self.texts:
                if text in flat:
                    return f"recalled text {text[:40]!r}"
            for cid in self.ids:
                if cid and cid.lower() in flat:
                    return f"recalled case id {cid!r}"
            return None
        if isinstance(value, Mapping):
            for k, v in value.items():
                found = self.leaks(k) or self.leaks(v)
                if found:
                    return found
            return None
        if isinstance(value, list | tuple | set | frozenset):
            for v in value:
                found = self.leaks(v)
                if found:
                    return found
        return None


class ToolRegistry:
    """Immutable set of tools for one mode; `get` raises for a tool the mode lacks."""

    def __init__(self, mode: MemoryMode, tools: Iterable[Tool]) -> None:
        self._mode = mode
        self._recalled = _RecalledTexts()
        built: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in built:
                raise ValueError(f"duplicate tool {tool.name!r}")
            built[tool.name] = self._wrap(tool)
        self._tools: Mapping[str, Tool] = MappingProxyType(built)

    @property
    def mode(self) -> MemoryMode:
        """The mode the registry was built for."""
        return self._mode

    def names(self) -> tuple[str, ...]:
        """Tool names, sorted."""
        return tuple(sorted(self._tools))

    def has(self, name: str) -> bool:
        """Whether this registry has a tool of that name."""
        return name in self._tools

    def get(self, name: str) -> Tool:
        """The tool, or :class:`ToolUnavailable` saying why it is absent."""
        tool = self._tools.get(name)
        if tool is None:
            why = ""
            if name in (RECALL_TOOL, REFLECT_TOOL) and self._mode is MemoryMode.SHADOW:
                why = " (shadow mode has no recall or manual-reflect tool; restart in active)"
            raise ToolUnavailable(f"no tool {name!r} in {self._mode.value} mode{why}")
        return tool

    def call(self, name: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call a tool by name (execution tools go through the case-text guard)."""
        return self.get(name).handler(*args, **kwargs)

    def of_kind(self, kind: ToolKind) -> tuple[Tool, ...]:
        """Tools of one kind, by name."""
        return tuple(t for n, t in sorted(self._tools.items()) if t.kind is kind)

    def _wrap(self, tool: Tool) -> Tool:
        if tool.kind is ToolKind.EXECUTION:
            inner = tool.handler

            def guarded(*args: Any, **kwargs: Any) -> Any:
                found = self._recalled.leaks(list(args)) or self._recalled.leaks(kwargs)
                if found:
                    raise CaseTextLeak(
                        f"execution tool {tool.name!r} refused: its arguments carry {found}"
                    )
                return inner(*args, **kwargs)

            return Tool(tool.name, tool.kind, tool.description, guarded)
        if tool.name == RECALL_TOOL:
            inner_recall = tool.handler

            def remembering(*args: Any, **kwargs: Any) -> Any:
                result = inner_recall(*args, **kwargs)
                self._recalled.remember(result)
                return result

            return Tool(tool.name, tool.kind, tool.description, remembering)
        return tool


def build_registry(
    mode: MemoryMode,
    *,
    record_case: Callable[..., Any],
    recall: Callable[..., Any] | None = None,
    reflect: Callable[..., Any] | None = None,
    execution_tools: Mapping[str, Callable[..., Any]] | None = None,
) -> ToolRegistry:
    """The registry for a mode: shadow gets the store path only, active adds memory tools.

    ``recall`` and ``reflect`` are ignored in shadow (not wrapped, not reachable): the
    tools do not exist there at all.
    """
    tools = [
        Tool(STORE_TOOL, ToolKind.STORE, "record a candidate role case", record_case),
    ]
    if mode is MemoryMode.ACTIVE:
        if recall is None or reflect is None:
            raise ValueError("active mode needs both a recall and a reflect handler")
        tools.append(Tool(RECALL_TOOL, ToolKind.MEMORY, "recall reflected role cases", recall))
        tools.append(Tool(REFLECT_TOOL, ToolKind.MEMORY, "reflect on a case manually", reflect))
    for name, handler in (execution_tools or {}).items():
        tools.append(Tool(name, ToolKind.EXECUTION, "execution tool (no case text)", handler))
    return ToolRegistry(mode, tools)
