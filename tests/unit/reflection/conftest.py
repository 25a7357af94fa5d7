from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reflexmem.ledger.enums import Direction
from reflexmem.reflection.types import EvidenceItem, ReflectionInput
from reflexmem.registry import RolePolicy, RoleRegistry, load_registry
from tests.unit.reflection.llm_server import LEAKED_AT, Serve, model_servers
from tests.unit.reflection.reflection_helpers import EvidenceFor, MakeCase, RoleOf

DECIDED_AT = datetime(2024, 3, 4, 15, 30, tzinfo=UTC)


@pytest.fixture(scope="session")
def registry() -> RoleRegistry:
    return load_registry()


@pytest.fixture(scope="session")
def role(registry: RoleRegistry) -> RoleOf:
    return lambda role_id: registry.get(role_id).policy


def fresh_evidence(policy: RolePolicy, decided_at: datetime = DECIDED_AT) -> list[EvidenceItem]:
    """One item per required kind, recorded an hour before the decision."""
    return [
        EvidenceItem(req.kind, decided_at - timedelta(hours=1), {"v": i})
        for i, req in enumerate(policy.required_evidence)
    ]


@pytest.fixture
def make_case(role: RoleOf) -> MakeCase:
    def build(
        role_id: str = "momentum",
        *,
        case_id: str = "case-1",
        direction: Direction = Direction.LONG,
        realized_return: float = 0.0,
        evidence: list[EvidenceItem] | None = None,
        **kwargs: Any,
    ) -> ReflectionInput:
        policy = role(role_id)
        return ReflectionInput(
            case_id=case_id,
            role=policy,
            direction=direction,
            decided_at=DECIDED_AT,
            evidence=tuple(fresh_evidence(policy) if evidence is None else evidence),
            realized_return=realized_return,
            **kwargs,
        )

    return build


@pytest.fixture
def evidence_for(role: RoleOf) -> EvidenceFor:
    return lambda role_id: fresh_evidence(role(role_id))


# The LLM reflector tests' scripted model and case (test_reflection_bounds.py overrides
# both with its own hostile server and a case without leaked evidence).
@pytest.fixture
def serve() -> Iterator[Serve]:
    with model_servers() as start:
        yield start


@pytest.fixture
def case(make_case: MakeCase, evidence_for: EvidenceFor) -> ReflectionInput:
    leaked = EvidenceItem("technicals", LEAKED_AT, {"rsi": 90})
    return make_case(
        evidence=[*evidence_for("momentum"), leaked], realized_return=-0.06, signal=-0.6
    )
