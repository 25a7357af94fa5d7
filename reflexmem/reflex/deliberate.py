"""Layer L3: model deliberation through the shared OpenAI-compatible transport.

The router reaches L3 when no skill applies or every applicable one was unsure. The
model is asked to choose one of the task family's fixed options (or, for an unknown
family, to name the decision) and to say how confident it is, why, and what would show
success. Its answer must be one strict JSON object; `reflexmem.reflection.chat` retries
a bounded number of times and never fills anything in. A reply asking for a tool or an
action goes to the common executor under the deliberator's identity, which may only
read: the request is refused and recorded in the executor's audit, and the attempt
fails. There is no "no model" deliberator: without a configured model the router
records a `hold`, never a simulated answer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from reflexmem.executor import Caller, Effect, ToolExecutor
from reflexmem.reflection.chat import ChatJSONClient, LLMConfig
from reflexmem.reflection.types import TokenUsage

DELIBERATOR = Caller("deliberator", frozenset(), frozenset({Effect.READ}))
"""L3's identity at the executor: it may read; every tool it asks for is refused."""


class DeliberationAnswer(BaseModel):
    """The only answer shape accepted from the model."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    choice: str = Field(min_length=1, max_length=64)
    confidence: float = Field(ge=0.0, le=1.0)
    rationale: str = Field(min_length=1, max_length=1000)
    success_condition: str = Field(default="", max_length=500)

    @field_validator("choice")
    @classmethod
    def _an_option(cls, choice: str, info: ValidationInfo) -> str:
        options = (info.context or {}).get("options")
        if options and choice not in options:
            raise ValueError(f"choice {choice!r} is not one of {list(options)}")
        return choice


@dataclass(frozen=True)
class Deliberation:
    """What L3 concluded: an answer, or why there is none, plus the calls it cost."""

    answer: DeliberationAnswer | None
    model_version: str
    attempts: int
    errors: tuple[str, ...]
    refused_requests: tuple[str, ...]
    usage: TokenUsage | None


class Deliberator(Protocol):
    """Anything that can deliberate on a task with a real model."""

    @property
    def model_version(self) -> str:
        """The model that answers."""
        ...

    def deliberate(
        self,
        task: Mapping[str, Any],
        options: Sequence[str] | None,
        trail: Sequence[Mapping[str, Any]],
    ) -> Deliberation:
        """Decide `task` (goal, observation, family, environment) or say why not."""
        ...


def system_prompt(family: str, options: Sequence[str] | None) -> str:
    """The answer contract for one task family."""
    choose = (
        f"Choose exactly one of: {', '.join(options)}."
        if options
        else "The task family is new: name the decision in a short snake_case word."
    )
    return (
        f"You decide one step of the task family '{family}' for a trading research agent. "
        f"{choose} Lower layers could not decide; their notes are in 'trail'. "
        "Give your confidence in [0, 1], a one-paragraph rationale citing the observation, "
        "and the observable condition that would show the decision succeeded. "
        "Do not request tools or actions. "
        'Answer with one JSON object and nothing else: {"choice": "...", "confidence": 0.0, '
        '"rationale": "...", "success_condition": "..."}.'
    )


class ModelDeliberator:
    """`Deliberator` over an OpenAI-compatible endpoint; tool requests go to `executor`."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        executor: ToolExecutor | None = None,
        caller: Caller = DELIBERATOR,
        chat: ChatJSONClient | None = None,
    ) -> None:
        self.config = config
        self.executor = executor if executor is not None else ToolExecutor()
        self.caller = caller
        self._chat = chat if chat is not None else ChatJSONClient(config)

    @property
    def model_version(self) -> str:
        """The configured model name."""
        return self.config.model

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        self._chat.close()

    def deliberate(
        self,
        task: Mapping[str, Any],
        options: Sequence[str] | None,
        trail: Sequence[Mapping[str, Any]],
    ) -> Deliberation:
        """Ask the model; a reply that never validates comes back without an answer."""
        refused: list[str] = []

        def to_executor(name: str, args: dict[str, Any]) -> str:
            result = self.executor.call(self.caller, name, args)
            refused.append(f"{name}: {result.outcome} ({result.reason})")
            return f"{name} -> {result.outcome} ({result.reason})"

        family = str(task.get("task_family", ""))
        payload = {**task, "options": list(options or []), "trail": list(trail)}
        messages = [
            {"role": "system", "content": system_prompt(family, options)},
            {"role": "user", "content": json.dumps(payload, default=str)},
        ]
        context = {"options": tuple(options or ())}
        reply = self._chat.ask(
            messages,
            lambda parsed: DeliberationAnswer.model_validate(parsed, context=context),
            on_tool_request=to_executor,
        )
        return Deliberation(
            reply.value,
            self.config.model,
            reply.attempts,
            reply.errors,
            tuple(refused),
            reply.usage,
        )
