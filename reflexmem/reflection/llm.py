"""Layer L3: reflection by a model behind any OpenAI-compatible chat-completions endpoint.

The model is an untrusted source of a verdict. Its answer must be one strict JSON object
that pydantic validates against the case: a class from the closed vocabulary, a short
lesson exactly when the class is learnable, and evidence references that exist in what
the model was shown. Anything else is retried a bounded number of times and then
reported as `failed`; the adapter never fills in a class or lesson of its own, because
a fabricated verdict would be learned as if the model had said it.

A model answer that asks for a tool call or an action is not executed here. It is
handed to the common `ToolExecutor` under the reflector's identity, which refuses it and
records the attempt in its audit list. The transport (HTTP, JSON, retries, tool-request
detection) is `reflexmem.reflection.chat`, shared with the router's L3 deliberation.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from reflexmem.executor import REFLECTOR, Caller, ToolExecutor
from reflexmem.ledger.enums import OutcomeClass
from reflexmem.reflection.chat import ChatJSONClient, LLMConfig
from reflexmem.reflection.types import (
    LEARNABLE,
    LESSON_MAX_CHARS,
    EvidenceItem,
    Reflection,
    ReflectionInput,
)

__all__ = ["Answer", "LLMConfig", "OpenAIReflector", "system_prompt", "user_prompt"]


class Answer(BaseModel):
    """The only answer shape accepted from the model."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    outcome_class: OutcomeClass = Field(alias="class")
    lesson: str | None = Field(max_length=LESSON_MAX_CHARS)
    evidence: tuple[str, ...]

    @field_validator("evidence")
    @classmethod
    def _known_refs(cls, refs: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        known = (info.context or {}).get("refs")
        if known is None:
            raise ValueError("evidence cannot be checked without the case's references")
        invented = [r for r in refs if r not in known]
        if invented:
            raise ValueError(f"evidence reference(s) not in the input: {invented}")
        return refs

    @model_validator(mode="after")
    def _lesson_matches_class(self) -> Answer:
        if self.outcome_class in LEARNABLE:
            if self.lesson is None or not self.lesson.strip():
                raise ValueError(f"{self.outcome_class} requires a lesson")
        elif self.lesson is not None:
            raise ValueError(f"{self.outcome_class} must have lesson null")
        return self


def _split_evidence(case: ReflectionInput) -> tuple[list[EvidenceItem], list[EvidenceItem]]:
    decided = case.decided_at.timestamp()
    shown = [e for e in case.evidence if e.epoch <= decided]
    withheld = [e for e in case.evidence if e.epoch > decided]
    return shown, withheld


def system_prompt(case: ReflectionInput) -> str:
    """Role-specific instructions: the role's own reflection prompt plus the answer contract."""
    role = case.role
    modes = ", ".join(role.failure_modes)
    return (
        f"You reflect on one settled decision of the role '{role.id}' ({role.description}). "
        f"{role.reflection_prompt}\n"
        "Classify the case as exactly one of: logic_error (the decision contradicted "
        "evidence the role had), missing_data (required evidence was absent, stale or "
        "dated after the decision), exogenous (a market-wide shock unknowable at decision "
        "time explains the outcome), variance (the outcome is noise or teaches nothing).\n"
        f"For logic_error and missing_data give a one-sentence lesson of at most "
        f"{LESSON_MAX_CHARS} characters naming the role, one failure mode from [{modes}] and "
        "the evidence; for exogenous and variance the lesson must be null.\n"
        "Cite evidence only by the exact 'ref' strings given; never invent one. "
        "Do not request tools or actions.\n"
        'Answer with one JSON object and nothing else: {"class": "...", "lesson": "..." '
        'or null, "evidence": ["ref", ...]}.'
    )


def user_prompt(case: ReflectionInput) -> str:
    """Render the case as JSON; evidence dated after the decision is withheld, only named."""
    shown, withheld = _split_evidence(case)
    probe = case.role.outcome_probe
    payload = {
        "case_id": case.case_id,
        "direction": case.direction.value,
        "decided_at": case.decided_at.isoformat(),
        "outcome_probe": {
            "kind": probe.kind,
            "horizon_bars": probe.horizon_bars,
            "benchmark": probe.benchmark,
        },
        "required_evidence": [
            {"kind": r.kind, "max_age_days": r.max_age_days} for r in case.role.required_evidence
        ],
        "evidence": [
            {"ref": str(e.ref), "kind": e.kind, "as_of": e.as_of.isoformat(), "value": e.value}
            for e in shown
        ],
        "withheld_after_decision": [
            {"kind": e.kind, "as_of": e.as_of.isoformat()} for e in withheld
        ],
        "settled": {
            "realized_return": case.realized_return,
            "benchmark_return": case.benchmark_return,
            "realized_vol_daily": case.realized_vol,
            "market_shock_sigma": case.market_shock_sigma,
            "shock_observable_at_decision": case.shock_observable,
            "role_signal_at_decision": case.signal,
        },
    }
    return json.dumps(payload, default=str)


class OpenAIReflector:
    """`Reflector` over an OpenAI-compatible `POST {base_url}/chat/completions`."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        executor: ToolExecutor | None = None,
        caller: Caller = REFLECTOR,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self.executor = executor if executor is not None else ToolExecutor()
        self.caller = caller
        self._chat = ChatJSONClient(config, client=client, sleep=sleep)

    def close(self) -> None:
        """Close the HTTP client if this reflector created it."""
        self._chat.close()

    def __enter__(self) -> OpenAIReflector:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def reflect(self, batch: Sequence[ReflectionInput]) -> list[Reflection]:
        """Ask the model about each case in turn; a case that never validates comes back failed."""
        return [self.reflect_one(case) for case in batch]

    def reflect_one(self, case: ReflectionInput) -> Reflection:
        """One case, with bounded retries; never a class or lesson the model did not give."""
        shown, _ = _split_evidence(case)
        refs = {str(e.ref): e.ref for e in shown}
        messages = [
            {"role": "system", "content": system_prompt(case)},
            {"role": "user", "content": user_prompt(case)},
        ]
        reply = self._chat.ask(
            messages,
            lambda parsed: Answer.model_validate(parsed, context={"refs": refs}),
            on_tool_request=lambda name, args: self._to_executor(case, name, args),
        )
        answer = reply.value
        if answer is None:
            return Reflection(
                case_id=case.case_id,
                outcome_class=None,
                lesson=None,
                evidence_used=(),
                reasons=reply.errors,
                layer="L3",
                failed=True,
                error=reply.errors[-1] if reply.errors else "no attempt made",
                model_calls=reply.attempts,
                usage=reply.usage,
            )
        return Reflection(
            case_id=case.case_id,
            outcome_class=answer.outcome_class,
            lesson=answer.lesson.strip() if answer.lesson is not None else None,
            evidence_used=tuple(refs[r] for r in dict.fromkeys(answer.evidence)),
            reasons=(f"classified by model {self.config.model}", *reply.errors),
            layer="L3",
            model_calls=reply.attempts,
            usage=reply.usage,
        )

    def _to_executor(self, case: ReflectionInput, name: str, args: dict[str, Any]) -> str:
        """Never run a requested tool here; the executor judges it under our identity."""
        result = self.executor.call(self.caller, name, args)
        return f"{name} for case {case.case_id} -> {result.outcome} ({result.reason})"
