from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import pytest

from reflexmem.ledger.enums import CaseState, Direction, OutcomeClass
from reflexmem.reflection.types import (
    EvidenceItem,
    EvidenceRef,
    Reflection,
    ReflectionInput,
    TokenUsage,
    parse_evidence,
)
from tests.unit.reflection.reflection_helpers import RoleOf

AT = datetime(2024, 3, 4, 15, 30, tzinfo=UTC)


def reflection(**overrides: Any) -> Reflection:
    values: dict[str, Any] = {
        "case_id": "c",
        "outcome_class": OutcomeClass.VARIANCE,
        "lesson": None,
        "evidence_used": (),
        "reasons": ("r",),
        "layer": "L1",
    }
    values.update(overrides)
    return Reflection(**values)


def test_decision_evidence_json_parses_with_utc_z_timestamps() -> None:
    items = parse_evidence(
        [
            {"kind": "price_history", "as_of": "2024-03-04T14:30:00Z", "value": [1, 2]},
            {"kind": "technicals", "as_of": "2024-03-04T14:00:00+01:00"},
        ]
    )
    assert [e.kind for e in items] == ["price_history", "technicals"]
    assert items[0].as_of == datetime(2024, 3, 4, 14, 30, tzinfo=UTC)
    assert items[0].value == [1, 2]
    assert str(items[1].ref) == "technicals@2024-03-04T14:00:00+01:00"
    assert parse_evidence(None) == ()


@pytest.mark.parametrize(
    "bad",
    [
        {"kind": "x"},
        {"kind": "x", "as_of": "yesterday"},
        {"kind": "x", "as_of": "2024-03-04T14:30:00"},  # naive: when was that?
        {"as_of": "2024-03-04T14:30:00Z"},
    ],
)
def test_unparseable_evidence_is_an_error_naming_its_position(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"evidence\[1\]"):
        parse_evidence([{"kind": "ok", "as_of": "2024-03-04T14:30:00Z"}, bad])


def test_reflection_input_rejects_naive_times_and_out_of_range_signals(role: RoleOf) -> None:
    policy = role("momentum")
    common: dict[str, Any] = {
        "case_id": "c",
        "role": policy,
        "direction": Direction.LONG,
        "evidence": (),
    }
    with pytest.raises(ValueError, match="timezone-aware"):
        ReflectionInput(decided_at=datetime(2024, 1, 1), realized_return=0.0, **common)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        ReflectionInput(decided_at=AT, realized_return=0.0, signal=1.5, **common)
    with pytest.raises(ValueError, match="finite"):
        ReflectionInput(decided_at=AT, realized_return=float("nan"), **common)
    ok = ReflectionInput(decided_at=AT, realized_return=0.0, **{**common, "evidence": []})
    assert ok.evidence == ()


def test_a_failed_reflection_can_carry_neither_class_nor_lesson() -> None:
    with pytest.raises(ValueError, match="neither class nor lesson"):
        reflection(failed=True, error="boom")
    with pytest.raises(ValueError, match="say why"):
        reflection(outcome_class=None, failed=True)
    failed = reflection(outcome_class=None, failed=True, error="timeout", layer="L3")
    assert failed.case_state is CaseState.REFLECTION_FAILED


@pytest.mark.parametrize("cls", [OutcomeClass.LOGIC_ERROR, OutcomeClass.MISSING_DATA])
def test_learnable_classes_require_a_short_lesson(cls: OutcomeClass) -> None:
    with pytest.raises(ValueError, match="needs a lesson"):
        reflection(outcome_class=cls)
    with pytest.raises(ValueError, match="300"):
        reflection(outcome_class=cls, lesson="x" * 301)
    assert reflection(outcome_class=cls, lesson="ok").case_state is CaseState.REFLECTED


@pytest.mark.parametrize("cls", [OutcomeClass.EXOGENOUS, OutcomeClass.VARIANCE])
def test_unlearnable_classes_refuse_a_lesson(cls: OutcomeClass) -> None:
    with pytest.raises(ValueError, match="must carry no lesson"):
        reflection(outcome_class=cls, lesson="something")


def test_reflection_serializes_to_plain_json_for_the_ledger() -> None:
    r = reflection(
        outcome_class=OutcomeClass.LOGIC_ERROR,
        lesson="Role x: y.",
        evidence_used=(EvidenceRef("price_history", AT),),
        layer="L3",
        model_calls=2,
        usage=TokenUsage(10, 5, 15),
    )
    data = json.loads(json.dumps(r.to_json()))
    assert data["class"] == "logic_error"
    assert data["evidence"] == ["price_history@2024-03-04T15:30:00+00:00"]
    assert data["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def test_evidence_items_compare_by_content() -> None:
    item = EvidenceItem("a", AT, 1)
    assert EvidenceItem("a", AT, 1) == item  # two instances, same content
    assert EvidenceItem("a", AT, 2) != item
    assert EvidenceItem("b", AT, 1) != item
    assert item.ref == EvidenceRef("a", AT)
    assert item.epoch == 1709566200.0  # 2024-03-04T15:30:00Z


def test_the_reflection_core_imports_no_orchestration_or_tracking_framework() -> None:
    code = (
        "import sys, reflexmem.reflection, reflexmem.executor;"
        "print(sorted(m for m in ('prefect', 'mlflow', 'great_expectations') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
