"""The agent tools as an MCP server: `reflexmem mcp` over stdio, and in-process in active mode."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import anyio
import sqlalchemy as sa
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from adapters import migrate
from adapters.db import make_engine
from apps.service.mcp_server import build_mcp
from reflexmem.operations import reflection
from reflexmem.settings import MemoryMode
from tests.integration.test_agent_api import DECISION, PREVIEW
from tests.support import make_resources, mature_and_evaluate, scalar, seed_ledger

RECORDERS = {"record_decisions", "record_previews", "record_executions", "record_fills"}


def _text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_reflexmem_mcp_over_stdio_lists_and_calls_the_tools(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ledger = home / "ledger.sqlite"
    engine = make_engine(f"sqlite:///{ledger}")
    migrate.upgrade(engine)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REFLEX_", "ROLE_MEMORY"))}
    env |= {"REFLEX_HOME": str(home), "ROLE_MEMORY_MODE": "shadow"}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", "from apps.cli import main; main()", "mcp"],
        env=env,
        cwd=str(Path(__file__).resolve().parents[2]),
    )

    async def session() -> tuple[set[str], list[Any]]:
        with anyio.fail_after(120):
            async with Client(params) as client:
                listed = await client.list_tools()
                schemas.update({t.name: t.input_schema for t in listed.tools})
                versions.append(client.server_info.version if client.server_info else None)
                calls = [
                    await client.call_tool("record_decisions", {"rows": [DECISION]}),
                    await client.call_tool("record_previews", {"rows": [PREVIEW]}),
                    await client.call_tool(
                        "record_decisions", {"rows": [{**DECISION, "direction": "up"}]}
                    ),
                    await client.call_tool(
                        "consume_preview", {"preview_id": "api-p1", "decision_id": "api-d1"}
                    ),
                    await client.call_tool(
                        "consume_preview", {"preview_id": "api-p1", "decision_id": "api-d1"}
                    ),
                ]
                return {t.name for t in listed.tools}, calls

    schemas: dict[str, Any] = {}
    versions: list[str | None] = []
    names, calls = anyio.run(session)
    # Typed schemas: every column of the kind, its bounds and words, from the contract.
    row = schemas["record_decisions"]["$defs"]["DecisionsRow"]
    assert row["properties"]["direction"]["enum"] == ["long", "short"]
    assert row["properties"]["decision_id"]["maxLength"] == 64
    assert row["properties"]["decided_at"]["format"] == "date-time"
    assert {"decision_id", "direction", "decided_at"} <= set(row["required"])
    assert "scenario" not in row["required"]
    fill = schemas["record_fills"]["$defs"]["FillsRow"]["properties"]
    assert fill["price"].get("exclusiveMinimum") == 0
    assert versions == ["0.1.0"]
    # Shadow mode: the recall tool does not exist.
    assert names == {*RECORDERS, "consume_preview"}
    recorded, preview, bad, consumed, again = calls
    assert not recorded.is_error
    assert recorded.structured_content["added"] == 1
    assert preview.structured_content["added"] == 1
    assert bad.is_error
    assert _text(bad).startswith("422 invalid_row: 0.direction:")
    assert not consumed.is_error
    assert consumed.structured_content["consumed"] is True
    assert again.is_error
    assert _text(again).startswith("409 preview_double_consume")
    assert scalar(engine, "SELECT consume_count FROM trade_previews") == 1
    engine.dispose()


def test_in_active_mode_the_mcp_server_offers_recall(engine: sa.Engine, tmp_path: Path) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path, n=600)
    mature_and_evaluate(res)
    reflection.reflect(res, "momentum")
    server = build_mcp(res, MemoryMode.ACTIVE)

    async def session() -> tuple[set[str], Any, Any, Any, dict[str, Any]]:
        async with Client(server) as client:
            listed = await client.list_tools()
            hit = await client.call_tool(
                "recall",
                {"role": "momentum", "query": "breakout entry", "k": 3, "policy": "full_detailed"},
            )
            unknown = await client.call_tool("recall", {"role": "astrology", "query": "x"})
            too_many = await client.call_tool("recall", {"role": "momentum", "query": "x", "k": 0})
            schema = next(t for t in listed.tools if t.name == "recall").input_schema
            return {t.name for t in listed.tools}, hit, unknown, too_many, schema

    names, hit, unknown, too_many, schema = anyio.run(session)
    assert names == {*RECORDERS, "consume_preview", "recall"}
    assert not hit.is_error, _text(hit)
    body = hit.structured_content
    assert body["role"] == "momentum"
    assert body["policy"] == "full_detailed"
    assert 0 < len(body["hits"]) <= 3
    assert {h["role"] for h in body["hits"]} == {"momentum"}
    assert scalar(engine, "SELECT COUNT(*) FROM recall_log") == 1
    assert unknown.is_error
    assert "422 unknown_role: role:" in _text(unknown)
    # The recall tool's schema is the request model's: every field described, k bounded.
    props = schema["properties"]
    assert set(props) >= {"role", "query", "as_of", "known_at", "k", "policy"}
    assert all(p.get("description") for p in props.values())
    assert (props["k"]["anyOf"][0]["minimum"], props["k"]["anyOf"][0]["maximum"]) == (1, 100)
    assert schema["required"] == ["role", "query"]
    assert too_many.is_error
    assert _text(too_many) == "422 invalid: k: Input should be greater than or equal to 1"
    assert _text(unknown).startswith("422 unknown_role: ")
    for hit_row in body["hits"]:
        assert hit_row["valid_at"] is not None
        assert hit_row["recorded_at"] is not None
