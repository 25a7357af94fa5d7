"""The router: which layer decides, when it escalates, and when it holds or requests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from reflexmem.executor import ToolExecutor, order_tools
from reflexmem.ledger.reflex_enums import EpisodeStatus, Layer, ReviewKind, SkillState
from reflexmem.reflection.chat import LLMConfig
from reflexmem.reflex.deliberate import ModelDeliberator
from reflexmem.reflex.rollout import rollout_bucket
from reflexmem.reflex.router import Task, route
from reflexmem.reflex.snapshot import SkillSnapshot
from tests.unit.reflex.reflex_helpers import ChatServer, MakeSpec, completion, snapshot_of

A = SkillState.ACTIVE
TEN_Q = {
    "doc_id": "d1",
    "form_type": "10-Q",
    "title": "Quarterly report",
    "body": "Revenue for the quarter rose and earnings per share grew.",
    "source": "sec",
}
NOTE = {
    "doc_id": "d2",
    "form_type": "NOTE",
    "title": "Upgrade to overweight",
    "body": "We upgrade and raise our price target.",
    "source": "broker",
}
CEO = {
    "doc_id": "d3",
    "form_type": "8-K",
    "title": "Chief executive transition",
    "body": "The board appointed a new chief executive.",
    "source": "company",
}


def task(observation: dict[str, Any], **kw: Any) -> Task:
    values: dict[str, Any] = {
        "episode_id": "ep-1",
        "task_family": "classify_filing",
        "environment_version": "filings-v1",
        "observation": observation,
        "at": datetime(2026, 1, 5, tzinfo=UTC),
    }
    values.update(kw)
    return Task(**values)


def decided_by(t: Task, snapshot: SkillSnapshot) -> str:
    """The key of the skill version that decided `t` (the test expects one to decide)."""
    skill = route(t, snapshot).skill
    assert skill is not None
    return skill.key


@pytest.fixture
def all_active(make_spec: MakeSpec) -> SkillSnapshot:
    return snapshot_of(
        *(
            (make_spec(n), A, None)
            for n in ("filing_kind_rules", "filing_kind_policy", "filing_kind_examples")
        )
    )


def test_the_cheapest_confident_layer_decides(all_active: SkillSnapshot) -> None:
    r = route(task(TEN_Q), all_active)
    assert (r.layer, r.skill.key if r.skill else None, r.choice, r.status) == (
        Layer.L0,
        "filing_kind_rules@1",
        "earnings_report",
        None,
    )
    assert r.tool == "file_filing"
    assert r.arguments == {"doc_id": "d1", "kind": "earnings_report", "content": TEN_Q["body"]}
    assert r.idempotency_key == "file_filing:ep-1"


def test_no_rule_escalates_to_the_bounded_choice(all_active: SkillSnapshot) -> None:
    r = route(task(NOTE), all_active)
    assert r.layer == Layer.L1
    assert r.choice == "analyst_note"
    assert [(s.layer, s.outcome) for s in r.trail] == [
        (Layer.L0, "escalated"),
        (Layer.L1, "decided"),
    ]
    assert r.trail[0].reason == "no answer for this input"


def test_low_confidence_escalates_through_every_layer_and_holds_without_a_model(
    all_active: SkillSnapshot,
) -> None:
    r = route(task(CEO), all_active)
    assert (r.layer, r.status, r.status_reason) == (Layer.L3, EpisodeStatus.HOLD, "no_model")
    assert r.choice is None
    outcomes = [(s.layer, s.outcome) for s in r.trail]
    assert outcomes == [
        (Layer.L0, "escalated"),
        (Layer.L1, "escalated"),
        (Layer.L2, "escalated"),
        (Layer.L3, "hold"),
    ]
    assert "below floor 0.70" in r.trail[1].reason


def test_an_escalation_target_skips_the_layers_below_it(make_spec: MakeSpec) -> None:
    rules = make_spec(edit=lambda r: r["fallback"].update(escalation_target="L3"))
    snap = snapshot_of((rules, A, None), (make_spec("filing_kind_policy"), A, None))
    r = route(task(NOTE), snap)
    assert [(s.layer, s.outcome) for s in r.trail][:2] == [
        (Layer.L0, "escalated"),
        (Layer.L1, "skipped"),
    ]
    assert r.status == EpisodeStatus.HOLD


def test_missing_information_is_a_request_naming_the_fields(all_active: SkillSnapshot) -> None:
    r = route(task({"doc_id": "d", "form_type": "10-Q", "title": "Quarterly report"}), all_active)
    assert (r.status, r.status_reason, r.missing) == (
        EpisodeStatus.REQUEST,
        "missing_information",
        ("body",),
    )
    assert r.reviews == ()
    assert r.layer is None


def test_a_new_input_format_goes_to_review_and_holds(all_active: SkillSnapshot) -> None:
    r = route(task({"id": "x", "form": "10-Q", "facts": {"Revenues": 1}}), all_active)
    assert (r.status, r.status_reason) == (EpisodeStatus.HOLD, "no_model")
    (review,) = r.reviews
    assert review.kind == ReviewKind.NEW_INPUT_FORMAT
    assert review.detail["shape"] == [("facts", "dict"), ("form", "str"), ("id", "str")]
    assert any("Additional properties" in p for p in review.detail["problems"])
    again = route(task({"id": "y", "form": "10-K", "facts": {}}), all_active)
    assert again.reviews[0].fingerprint == review.fingerprint  # same format, same cause


def test_an_environment_change_goes_to_review_and_never_uses_old_skills(
    all_active: SkillSnapshot,
) -> None:
    r = route(task(TEN_Q, environment_version="filings-v2"), all_active)
    assert r.status == EpisodeStatus.HOLD
    (review,) = r.reviews
    assert (review.kind, review.environment_version) == (
        ReviewKind.ENVIRONMENT_CHANGE,
        "filings-v2",
    )
    assert review.detail["known"] == ["filings-v1"]
    assert all(s.skill is None for s in r.trail)


def test_an_unknown_task_family_goes_to_review(all_active: SkillSnapshot) -> None:
    r = route(task(TEN_Q, task_family="classify_image"), all_active)
    assert [x.kind for x in r.reviews] == [ReviewKind.UNKNOWN_TASK_FAMILY]
    assert r.status == EpisodeStatus.HOLD


def test_candidates_and_quarantined_versions_never_decide(make_spec: MakeSpec) -> None:
    snap = snapshot_of(
        (make_spec(), SkillState.CANDIDATE, None),
        (make_spec("filing_kind_policy"), SkillState.QUARANTINED, None),
    )
    r = route(task(TEN_Q), snap)
    assert (r.layer, r.status) == (Layer.L3, EpisodeStatus.HOLD)
    assert r.reviews == ()  # the format and environment are known: nothing to review


def test_a_skill_outside_its_validity_period_does_not_decide(make_spec: MakeSpec) -> None:
    late = make_spec(
        edit=lambda r: r["applicability"].update(valid_from="2027-01-01T00:00:00+00:00")
    )
    r = route(task(TEN_Q), snapshot_of((late, A, None)))
    assert r.status == EpisodeStatus.HOLD


def test_a_limited_version_decides_only_its_sticky_rollout(make_spec: MakeSpec) -> None:
    old = make_spec("filing_kind_policy")
    new = make_spec(
        "filing_kind_policy",
        lambda r: r["fallback"].update(previous_version=1),
        version=2,
    )
    snap = snapshot_of((old, A, None), (new, SkillState.LIMITED, 0.5))
    pairs = [(f"acct-{i}", "AAPL") for i in range(40)]
    chosen = {p: decided_by(task(NOTE, account=p[0], symbol=p[1]), snap) for p in pairs}
    inside = {p for p in pairs if rollout_bucket(p[0], p[1], "filing_kind_policy@2") < 0.5}
    assert 5 < len(inside) < 35
    assert {p for p, key in chosen.items() if key == "filing_kind_policy@2"} == inside
    again = {p: decided_by(task(NOTE, account=p[0], symbol=p[1]), snap) for p in pairs}
    assert again == chosen  # sticky: the same pair gets the same version every time
    assert decided_by(task(NOTE), snap) == "filing_kind_policy@1"  # no pair, no rollout


Chat = Callable[..., ChatServer]


@pytest.fixture
def chat() -> Iterator[Chat]:
    servers: list[ChatServer] = []

    def start(*bodies: dict[str, object]) -> ChatServer:
        servers.append(ChatServer(*bodies))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def deliberator(server: ChatServer, executor: ToolExecutor | None = None) -> ModelDeliberator:
    cfg = LLMConfig(base_url=server.url, model="m-test", max_retries=1, backoff_s=0.001)
    return ModelDeliberator(cfg, executor=executor)


def test_a_configured_model_decides_what_the_skills_could_not(
    all_active: SkillSnapshot, chat: Chat
) -> None:
    server = chat(
        completion(
            {
                "choice": "guidance_update",
                "confidence": 0.8,
                "rationale": "A CEO change often precedes new guidance.",
                "success_condition": "filed under guidance",
            }
        )
    )
    r = route(task(CEO), all_active, deliberator=deliberator(server))
    assert (r.layer, r.status, r.choice, r.confidence) == (Layer.L3, None, "guidance_update", 0.8)
    assert r.deliberation is not None
    assert r.deliberation.model_version == "m-test"
    sent = server.requests[0]["messages"][1]["content"]
    assert "Chief executive transition" in sent
    assert "below floor" in sent  # the lower layers' trail is shown to the model


def test_an_unsure_or_invalid_model_answer_is_a_hold(all_active: SkillSnapshot, chat: Chat) -> None:
    unsure = chat(completion({"choice": "analyst_note", "confidence": 0.4, "rationale": "unsure"}))
    r = route(task(CEO), all_active, deliberator=deliberator(unsure))
    assert (r.status, r.status_reason) == (EpisodeStatus.HOLD, "low_confidence")
    invented = chat(completion({"choice": "buy_it", "confidence": 0.9, "rationale": "x"}))
    r = route(task(CEO), all_active, deliberator=deliberator(invented))
    assert (r.status, r.status_reason) == (EpisodeStatus.HOLD, "model_failed")
    assert "not one of" in r.rationale
    assert len(invented.requests) == 2  # bounded: one retry, then hold


def test_a_model_asking_for_a_fund_moving_tool_is_refused_recorded_and_held(
    all_active: SkillSnapshot, chat: Chat
) -> None:
    broker_calls: list[str] = []
    executor = ToolExecutor.with_tools(
        order_tools(
            place=lambda a: broker_calls.append("place"),
            modify=lambda a: broker_calls.append("modify"),
            cancel=lambda a: broker_calls.append("cancel"),
        )
    )
    call = {
        "id": "c1",
        "type": "function",
        "function": {
            "name": "place_order",
            "arguments": '{"symbol": "AAPL", "side": "long", "quantity": 100}',
        },
    }
    server = chat(completion(None, tool_calls=[call]))
    r = route(task(CEO), all_active, deliberator=deliberator(server, executor))
    assert (r.status, r.status_reason) == (EpisodeStatus.HOLD, "missing_permission")
    assert broker_calls == []
    assert [(a.caller, a.tool, a.outcome) for a in executor.audit] == [
        ("deliberator", "place_order", "refused"),
        ("deliberator", "place_order", "refused"),
    ]
    assert "move_funds" in executor.audit[0].reason or "allow-list" in executor.audit[0].reason
    assert r.deliberation is not None
    assert len(r.deliberation.refused_requests) == 2
