"""`reflexmem mcp`: the agent tools as an MCP server, for LLM agents (stdio transport).

The same tools as the HTTP API (`apps/service/agent_tools.py`, each one operation): record
decisions, previews, executions and fills, consume a preview exactly once, and, in
active mode only, recall. In shadow mode the `recall` tool is not registered at all, so
a model cannot even see it. A refused call is an MCP tool error whose text starts with
the HTTP status the API would answer and names the field at fault. Every record tool's
input schema names each column of its kind with type, bounds and description
(`row_schemas.py`); the server reports the package's version.

Over stdio the client launched this process, so the process boundary is the trust
boundary and no bearer token is asked for; the HTTP API is the networked surface.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from importlib.metadata import version
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from pydantic import BaseModel, ValidationError

from apps.service import agent_tools
from apps.service.agent_tools import RecallRequest, ToolFailure
from apps.service.row_schemas import as_rows, row_model
from reflexmem.ingest.rows import RECORD_KINDS
from reflexmem.operations.resources import Resources
from reflexmem.settings import MemoryMode

INSTRUCTIONS = (
    "Reflex Memory: record what you decided and did (decisions, then previews, "
    "executions, fills), consume a manual preview once for the decision that uses it, "
    "and (active mode only) recall lessons of your role before deciding. "
    "No tool places or cancels orders or moves funds."
)


def _tool_error(exc: ToolFailure) -> ToolError:
    return ToolError(f"{exc.status} {exc.code}: {exc}")


class _Server(MCPServer[Any]):
    """The MCP server whose errors read like the API's: status, code, then the detail.

    The framework validates a call's arguments against the tool's schema before the
    tool runs and would answer pydantic's own dump (with input values and URLs); it
    also prefixes a tool's own refusal with "Error executing tool <name>:".
    """

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError):
                raise
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(f"422 invalid: {_errors(cause)}") from cause
            # A refusal of ours already starts with its status and code: drop the prefix.
            text = str(exc).removeprefix(f"Error executing tool {name}: ")
            if text[:3].isdigit():
                raise ToolError(text) from cause
            raise


def _errors(exc: ValidationError) -> str:
    """Pydantic's errors as `field: message` pairs, without its URLs and input dumps."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
    )


def _signature_of(model: type[BaseModel]) -> inspect.Signature:
    """A tool signature with one keyword per field of `model`: its type, bounds, text.

    The tool's input schema is then the request model's own (descriptions, `k` in
    [1, 100], a non-empty role), written once in `agent_tools`.
    """
    params = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=Annotated[field.annotation, field],
            **({} if field.is_required() else {"default": field.default}),
        )
        for name, field in model.model_fields.items()
    ]
    return inspect.Signature(params, return_annotation=dict[str, Any])


def _recorder(res: Resources, kind: str) -> Callable[..., dict[str, Any]]:
    def record(rows: list[BaseModel]) -> dict[str, Any]:
        try:
            return agent_tools.record(res, kind, as_rows(rows))
        except ToolFailure as exc:
            raise _tool_error(exc) from exc

    # the input schema names every column of the kind (`row_schemas`)
    rows_type: Any = list[row_model(kind)]  # type: ignore[misc]
    record.__annotations__ = {"rows": rows_type, "return": dict[str, Any]}
    return record


def build_mcp(res: Resources, mode: MemoryMode) -> MCPServer[Any]:
    """An MCP server over `res` whose tools call the operations; recall only if active."""
    server: MCPServer[Any] = _Server(
        "reflexmem", instructions=INSTRUCTIONS, version=version("reflexmem")
    )
    for kind in RECORD_KINDS:
        server.add_tool(
            _recorder(res, kind),
            name=f"record_{kind}",
            description=agent_tools.describe(kind) + " `rows` is a list of objects.",
        )

    def consume_preview(preview_id: str, decision_id: str) -> dict[str, Any]:
        """Consume a manual preview for a decision exactly once (a second time is refused)."""
        try:
            return agent_tools.consume(res, preview_id, decision_id)
        except ToolFailure as exc:
            raise _tool_error(exc) from exc

    server.add_tool(consume_preview, name="consume_preview")
    if mode is not MemoryMode.ACTIVE:
        return server

    def recall(**arguments: Any) -> dict[str, Any]:
        """Recall lessons, patterns and rules of one role, under every constraint."""
        try:
            request = RecallRequest(**arguments)
            return agent_tools.recall(res, mode, request)
        except ValidationError as exc:
            raise ToolError(f"422 invalid: {_errors(exc)}") from exc
        except ToolFailure as exc:
            raise _tool_error(exc) from exc

    recall.__signature__ = _signature_of(RecallRequest)  # type: ignore[attr-defined]
    server.add_tool(recall, name="recall")
    return server
