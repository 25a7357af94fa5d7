"""The experience contract refuses a record that would lie about what happened."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from reflexmem.reflex.experience import ExperienceRecord


def record(**kw: Any) -> ExperienceRecord:
    values: dict[str, Any] = {
        "episode_id": "e1",
        "agent_id": "a",
        "task_family": "classify_filing",
        "status": "success",
        "layer": "L0",
        "skill_id": "s",
        "skill_version": 1,
    }
    values.update(kw)
    return ExperienceRecord(**values)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"status": "failure"}, "failure_kind is set exactly when"),
        ({"failure_kind": "policy"}, "failure_kind is set exactly when"),
        ({"status": "hold"}, "needs a status_reason"),
        ({"status": "request", "status_reason": "missing_information"}, "lists what is missing"),
        ({"skill_version": None}, "set together"),
        ({"skill_id": None, "skill_version": None}, "decides only through a pinned skill"),
        ({"layer": "L3", "skill_id": None, "skill_version": None}, "needs the model version"),
        ({"tool": "file_filing"}, "records the effects"),
        ({"confidence": 1.5}, "less than or equal to 1"),
        ({"retries": -1}, "greater than or equal to 0"),
        ({"status": "guessed"}, "Input should be"),
        ({"failure_kind": "bad_luck", "status": "failure"}, "Input should be"),
    ],
)
def test_a_record_that_breaks_the_contract_is_refused(
    changes: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        record(**changes)


def test_holds_requests_and_typed_failures_are_accepted() -> None:
    assert (
        record(
            status="hold", status_reason="no_model", layer="L3", skill_id=None, skill_version=None
        ).status
        == "hold"
    )
    assert (
        record(
            status="request",
            status_reason="missing_information",
            result={"missing": ["body"]},
            layer=None,
        ).row()["status"]
        == "request"
    )
    row = record(status="failure", failure_kind="verification").row()
    assert (row["status"], row["failure_kind"], row["layer"]) == ("failure", "verification", "L0")
    assert record(layer="L3", skill_id=None, skill_version=None, model_version="m").layer == "L3"
