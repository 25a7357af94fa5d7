from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from reflexmem.ledger.enums import Tier
from reflexmem.recall import RecallConstraints, RecallHit, RecallResult
from reflexmem.runtime import (
    CaseTextLeak,
    PromptSection,
    ToolKind,
    ToolUnavailable,
    assemble_prompt,
    build_registry,
)
from reflexmem.runtime.tools import RECALL_TOOL, REFLECT_TOOL, STORE_TOOL, ToolRegistry
from reflexmem.settings import MemoryMode

LESSON = "Check the earnings calendar before sizing a breakout entry"


def _result() -> RecallResult:
    hit = RecallHit(
        kind="case",
        id="case-42",
        tier=Tier.EPISODIC,
        text=LESSON,
        role="equity_research",
        symbol="AAPL",
        scenario=None,
        outcome_class="missing_data",
        decided_at=datetime(2025, 1, 1, tzinfo=UTC),
        score=1.0,
        match=1.0,
        text_score=1.0,
        vector_score=None,
    )
    return RecallResult(RecallConstraints(role="equity_research"), "q", ("q",), (hit,), 1, "sqlite")


def _registry(mode: MemoryMode, orders: list[Any] | None = None) -> ToolRegistry:
    sink = orders if orders is not None else []

    def place_order(**kw: Any) -> str:
        sink.append(kw)
        return "ok"

    return build_registry(
        mode,
        record_case=lambda **kw: "recorded",
        recall=lambda *a, **kw: _result(),
        reflect=lambda *a, **kw: "reflected",
        execution_tools={"place_order": place_order},
    )


def test_shadow_registry_has_no_recall_tool() -> None:
    reg = _registry(MemoryMode.SHADOW)
    assert not reg.has(RECALL_TOOL)
    with pytest.raises(ToolUnavailable, match="shadow"):
        reg.get(RECALL_TOOL)


def test_shadow_registry_has_no_manual_reflect_tool() -> None:
    reg = _registry(MemoryMode.SHADOW)
    assert not reg.has(REFLECT_TOOL)
    with pytest.raises(ToolUnavailable):
        reg.call(REFLECT_TOOL, "case-1")
    assert reg.of_kind(ToolKind.MEMORY) == ()


def test_shadow_registry_keeps_only_the_store_path_for_candidate_cases() -> None:
    reg = _registry(MemoryMode.SHADOW)
    assert reg.names() == ("place_order", STORE_TOOL)
    assert reg.call(STORE_TOOL, case_id="c") == "recorded"


def test_active_registry_has_recall_and_reflect() -> None:
    reg = _registry(MemoryMode.ACTIVE)
    assert {RECALL_TOOL, REFLECT_TOOL, STORE_TOOL} <= set(reg.names())
    assert reg.call(REFLECT_TOOL, "c") == "reflected"


def test_registry_is_fixed_at_build_time() -> None:
    reg = _registry(MemoryMode.SHADOW)
    assert not hasattr(reg, "add")
    with pytest.raises(TypeError):
        # Deliberately writing to the read-only mapping: the runtime must refuse it too.
        reg._tools[RECALL_TOOL] = reg.get(STORE_TOOL)  # type: ignore[index]


def test_execution_tools_never_receive_recalled_case_text() -> None:
    orders: list[Any] = []
    reg = _registry(MemoryMode.ACTIVE, orders)
    recalled = reg.call(RECALL_TOOL, "earnings")
    with pytest.raises(CaseTextLeak):
        reg.call("place_order", symbol="AAPL", note=f"because: {LESSON.upper()}")
    with pytest.raises(CaseTextLeak):
        reg.call("place_order", symbol="AAPL", context=recalled.hits[0])
    with pytest.raises(CaseTextLeak):
        reg.call("place_order", symbol="AAPL", refs=["case-42"])
    assert orders == []
    assert reg.call("place_order", symbol="AAPL", qty=1) == "ok"
    assert orders == [{"symbol": "AAPL", "qty": 1}]


def test_prompt_precedence_rules_before_recalled_cases() -> None:
    prompt = assemble_prompt(
        MemoryMode.ACTIVE,
        identity=["You are the equity research role; never move funds."],
        permissions=["Orders need a consumed manual preview."],
        user_constraints=["No positions above 2% of equity."],
        recalled=[LESSON],
        task="Assess AAPL.",
    )
    assert prompt.order() == (
        PromptSection.IDENTITY,
        PromptSection.PERMISSIONS,
        PromptSection.USER_CONSTRAINTS,
        PromptSection.RECALLED_CASES,
        PromptSection.TASK,
    )
    text = prompt.text
    assert (
        text.index("never move funds")
        < text.index("consumed manual preview")
        < text.index("2% of equity")
        < text.index(LESSON)
    )


def test_prompt_in_shadow_cannot_receive_recalled_cases() -> None:
    with pytest.raises(PermissionError, match="shadow"):
        assemble_prompt(MemoryMode.SHADOW, identity=["rules"], recalled=[LESSON])
    prompt = assemble_prompt(MemoryMode.SHADOW, identity=["rules"], task="t")
    assert PromptSection.RECALLED_CASES not in prompt.order()


def test_prompt_requires_identity_rules() -> None:
    with pytest.raises(ValueError, match="identity"):
        assemble_prompt(MemoryMode.ACTIVE, identity=[], recalled=[LESSON])
