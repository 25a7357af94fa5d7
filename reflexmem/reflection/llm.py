"""Layer L3: reflection by a model behind any OpenAI-compatible chat-completions endpoint.

The model is an untrusted source of a verdict. Its answer must be one strict JSON object
that pydantic validates against the case: a class from the closed vocabulary, a short
lesson exactly when the class is learnable, and evidence references that exist in what
the model was shown. Anything else is retried a bounded number of times and then
reported as `failed`; the adapter never fills in a class or lesson of its own, because
a fabricated verdict would be learned as if the model had said it.

A model answer that asks for a tool call or an action is not executed here. It is
handed to the common `ToolExecutor` under the reflector's identity, which refuses it and
records the attempt in its audit list.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from reflexmem.executor import REFLECTOR, Caller, ToolExecutor
from reflexmem.ledger.enums import OutcomeClass
from reflexmem.reflection.types import (
    LEARNABLE,
    LESSON_MAX_CHARS,
    EvidenceItem,
    EvidenceRef,
    Reflection,
    ReflectionInput,
    TokenUsage,
)

_ACTION_FIELDS = ("action", "actions", "tool", "tool_call", "tool_calls", "function_call")
# Fields of a flat `{"action": ..., ...}` request that are not the tool's arguments.
_NOT_ARGUMENTS = frozenset({*_ACTION_FIELDS, "arguments", "class", "lesson", "evidence"})


@dataclass(frozen=True)
class LLMConfig:
    """Where the model lives and how patiently to ask it; filled from settings elsewhere.

    `max_retries` counts attempts after the first, so a case costs at most
    `max_retries + 1` model calls; backoff doubles from `backoff_s` up to `max_backoff_s`.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0
    max_retries: int = 2
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.timeout_s <= 0:
            raise ValueError(f"invalid model config: {self!r}")


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


class _AttemptError(Exception):
    """One attempt produced no usable answer; `retryable` says whether to ask again."""

    def __init__(
        self, message: str, *, retryable: bool = True, usage: TokenUsage | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.usage = usage


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
            "horizon_days": probe.horizon_days,
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


def _usage(body: Mapping[str, Any]) -> TokenUsage | None:
    raw = body.get("usage")
    if not isinstance(raw, Mapping):
        return None

    def count(name: str) -> int:
        value = raw.get(name)
        return value if isinstance(value, int) and value >= 0 else 0

    prompt, completion = count("prompt_tokens"), count("completion_tokens")
    return TokenUsage(prompt, completion, count("total_tokens") or prompt + completion)


def _tool_requests(message: Mapping[str, Any], content: object) -> list[tuple[str, dict[str, Any]]]:
    """Every tool call or action the answer asks for, as (tool name, arguments)."""
    requests: list[tuple[str, dict[str, Any]]] = []
    calls = message.get("tool_calls")
    legacy = message.get("function_call")
    entries = list(calls) if isinstance(calls, list) else []
    if isinstance(legacy, Mapping):
        entries.append({"function": legacy})
    for entry in entries:
        fn = entry.get("function", entry) if isinstance(entry, Mapping) else {}
        name = str(fn.get("name", "")) if isinstance(fn, Mapping) else ""
        raw_args = fn.get("arguments", {}) if isinstance(fn, Mapping) else {}
        requests.append((name or "<unnamed>", _arguments(raw_args)))
    if isinstance(content, Mapping):
        for key in _ACTION_FIELDS:
            if key not in content:
                continue
            value = content[key]
            if isinstance(value, str):
                rest = {k: v for k, v in content.items() if k not in _NOT_ARGUMENTS}
                requests.append((value, _arguments(content.get("arguments", rest))))
                continue
            many = value if isinstance(value, list) else [value]
            requests.extend(_named_request(key, one) for one in many)
    return requests


def _named_request(key: str, value: object) -> tuple[str, dict[str, Any]]:
    """Read `{"name"|"action"|"tool": ..., "arguments": ...}`; anything else keeps its field."""
    if isinstance(value, str):
        return value, {}
    if isinstance(value, Mapping):
        fn = value.get("function", value)
        if isinstance(fn, Mapping):
            name = fn.get("name") or fn.get("action") or fn.get("tool") or key
            args = fn.get("arguments")
            if args is None:
                args = {k: v for k, v in fn.items() if k not in {"name", "action", "tool"}}
            return str(name), _arguments(args)
    return key, {"value": value}


def _arguments(raw: object) -> dict[str, Any]:
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            return {"raw": raw}
    return {str(k): v for k, v in raw.items()} if isinstance(raw, Mapping) else {}


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
        self._client = client if client is not None else httpx.Client(timeout=config.timeout_s)
        self._owns_client = client is None
        self._sleep = sleep

    def close(self) -> None:
        """Close the HTTP client if this reflector created it."""
        if self._owns_client:
            self._client.close()

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
        request = {
            "model": self.config.model,
            "temperature": self.config.temperature,
            "response_format": {"type": "json_object"},
            "messages": [
                {"role": "system", "content": system_prompt(case)},
                {"role": "user", "content": user_prompt(case)},
            ],
        }
        errors: list[str] = []
        usage: TokenUsage | None = None
        attempts = 0
        while attempts <= self.config.max_retries:
            attempts += 1
            try:
                answer, used = self._attempt(case, request, refs)
            except _AttemptError as exc:
                errors.append(f"attempt {attempts}: {exc}")
                if exc.usage is not None:
                    usage = exc.usage if usage is None else usage + exc.usage
                if not exc.retryable:
                    break
                if attempts <= self.config.max_retries:
                    self._sleep(self._backoff(attempts))
                continue
            except Exception as exc:  # a bug must fail this case visibly, not the batch
                errors.append(f"attempt {attempts}: unexpected {type(exc).__name__}: {exc}")
                break
            if used is not None:
                usage = used if usage is None else usage + used
            return Reflection(
                case_id=case.case_id,
                outcome_class=answer.outcome_class,
                lesson=answer.lesson.strip() if answer.lesson is not None else None,
                evidence_used=tuple(refs[r] for r in dict.fromkeys(answer.evidence)),
                reasons=(f"classified by model {self.config.model}", *errors),
                layer="L3",
                model_calls=attempts,
                usage=usage,
            )
        return Reflection(
            case_id=case.case_id,
            outcome_class=None,
            lesson=None,
            evidence_used=(),
            reasons=tuple(errors),
            layer="L3",
            failed=True,
            error=errors[-1] if errors else "no attempt made",
            model_calls=attempts,
            usage=usage,
        )

    def _backoff(self, attempt: int) -> float:
        return float(min(self.config.backoff_s * 2 ** (attempt - 1), self.config.max_backoff_s))

    def _post(self, request: Mapping[str, Any]) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        try:
            return self._client.post(
                url, json=request, headers=headers, timeout=self.config.timeout_s
            )
        except httpx.TimeoutException as exc:
            raise _AttemptError(f"timeout after {self.config.timeout_s:g}s: {exc}") from exc
        except httpx.TransportError as exc:
            raise _AttemptError(f"connection error: {type(exc).__name__}: {exc}") from exc

    def _attempt(
        self, case: ReflectionInput, request: Mapping[str, Any], refs: Mapping[str, EvidenceRef]
    ) -> tuple[Answer, TokenUsage | None]:
        response = self._post(request)
        status = response.status_code
        if status >= 500 or status == 429:
            raise _AttemptError(f"HTTP {status}")
        if status >= 400:
            raise _AttemptError(f"HTTP {status}: {response.text[:200]}", retryable=False)
        try:
            body = response.json()
        except ValueError as exc:
            raise _AttemptError("response body is not JSON") from exc
        usage = _usage(body) if isinstance(body, Mapping) else None
        try:
            message = body["choices"][0]["message"]
            if not isinstance(message, Mapping):
                raise TypeError("message is not an object")
        except (KeyError, IndexError, TypeError) as exc:
            raise _AttemptError(f"no choices[0].message: {exc}", usage=usage) from exc
        content = message.get("content")
        parsed: object = None
        parse_error: str | None = None
        if isinstance(content, str):
            try:
                parsed = json.loads(content)
            except ValueError as exc:
                parse_error = f"malformed JSON answer: {exc}"
        requests = _tool_requests(message, parsed)
        if requests:
            outcomes = [self._to_executor(case, name, args) for name, args in requests]
            raise _AttemptError(
                "model requested tool call(s), handed to the executor: " + "; ".join(outcomes),
                usage=usage,
            )
        if parse_error is not None or content is None:
            raise _AttemptError(parse_error or "answer has no content", usage=usage)
        try:
            answer = Answer.model_validate(parsed, context={"refs": refs})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "answer"
            raise _AttemptError(f"schema violation: {where}: {first['msg']}", usage=usage) from exc
        return answer, usage

    def _to_executor(self, case: ReflectionInput, name: str, args: dict[str, Any]) -> str:
        """Never run a requested tool here; the executor judges it under our identity."""
        result = self.executor.call(self.caller, name, args)
        return f"{name} for case {case.case_id} -> {result.outcome} ({result.reason})"
