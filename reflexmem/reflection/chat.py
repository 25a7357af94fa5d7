"""The OpenAI-compatible transport every model layer (L3) shares: strict JSON, bounded retries.

Reflection asks a model for a verdict on a case; the REFLEX router asks it for a decision
on a task. Both need the same discipline, so it lives here once: one `POST
{base_url}/chat/completions`, a JSON object as the only acceptable content, a caller-
supplied validator that decides whether that object is an answer, a bounded number of
attempts with exponential backoff, and token usage summed over attempts.

Every response is untrusted and bounded before it is parsed: it is read as a stream,
at most `max_response_bytes` (a declared `Content-Length` above it is refused before
reading, a body that grows past it is cut off) and within `timeout_s` of wall time for
the whole exchange (a watchdog closes a response still trickling in at the deadline),
so neither a huge nor a slow body can hold memory or a batch for long.

The client never makes an answer up. When no attempt validates, `ChatReply.value` is
`None` and `errors` says why each attempt failed. A reply that asks for a tool call or an
action is not executed here: every request is handed to the caller's `on_tool_request`
(the common executor, under the caller's identity) and the attempt counts as failed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import httpx
from pydantic import ValidationError

from reflexmem.redact import redact
from reflexmem.reflection.types import TokenUsage

T = TypeVar("T")

ACTION_FIELDS = ("action", "actions", "tool", "tool_call", "tool_calls", "function_call")
# Fields of a flat `{"action": ..., ...}` request that are not the tool's arguments.
_NOT_ARGUMENTS = frozenset({*ACTION_FIELDS, "arguments", "class", "lesson", "evidence"})


@dataclass(frozen=True)
class LLMConfig:
    """Where the model lives and how patiently to ask it; filled from settings elsewhere.

    `max_retries` counts attempts after the first, so a question costs at most
    `max_retries + 1` model calls; backoff doubles from `backoff_s` up to `max_backoff_s`.
    `timeout_s` bounds the whole exchange of one attempt (connect, headers and body) and
    `max_response_bytes` the decoded body.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0
    max_retries: int = 2
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    temperature: float = 0.0
    max_response_bytes: int = 262_144

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.timeout_s <= 0 or self.max_response_bytes <= 0:
            raise ValueError(f"invalid model config: {self!r}")


class AttemptError(Exception):
    """One attempt produced no usable answer; `retryable` says whether to ask again."""

    def __init__(
        self, message: str, *, retryable: bool = True, usage: TokenUsage | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.usage = usage


@dataclass(frozen=True)
class ChatReply(Generic[T]):
    """The validated answer (or `None`), with every attempt's error and the summed usage."""

    value: T | None
    attempts: int
    errors: tuple[str, ...]
    usage: TokenUsage | None

    @property
    def failed(self) -> bool:
        """Whether no attempt produced a valid answer."""
        return self.value is None


def usage_of(body: Mapping[str, Any]) -> TokenUsage | None:
    """The `usage` a completion reported, or None; negative or non-integer counts are zero."""
    raw = body.get("usage")
    if not isinstance(raw, Mapping):
        return None

    def count(name: str) -> int:
        value = raw.get(name)
        return value if isinstance(value, int) and value >= 0 else 0

    prompt, completion = count("prompt_tokens"), count("completion_tokens")
    return TokenUsage(prompt, completion, count("total_tokens") or prompt + completion)


def tool_requests(message: Mapping[str, Any], content: object) -> list[tuple[str, dict[str, Any]]]:
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
        for key in ACTION_FIELDS:
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


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "answer"
    return f"schema violation: {where}: {first['msg']}"


class ChatJSONClient:
    """Ask an OpenAI-compatible endpoint for one JSON object, validated by the caller."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.config = config
        self._client = client if client is not None else httpx.Client(timeout=config.timeout_s)
        self._owns_client = client is None
        self._sleep = sleep

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._owns_client:
            self._client.close()

    def ask(
        self,
        messages: Sequence[Mapping[str, str]],
        validate: Callable[[object], T],
        *,
        on_tool_request: Callable[[str, dict[str, Any]], str],
    ) -> ChatReply[T]:
        """Ask until `validate` accepts the parsed JSON content or the attempts run out.

        `validate` raises `ValueError` (pydantic's `ValidationError` included) to reject.
        """
        request = {
            "model": self.config.model,
            "temperature": self.config.temperature,
            "response_format": {"type": "json_object"},
            "messages": [dict(m) for m in messages],
        }
        errors: list[str] = []
        usage: TokenUsage | None = None
        attempts = 0
        while attempts <= self.config.max_retries:
            attempts += 1
            try:
                value, used = self._attempt(request, validate, on_tool_request)
            except AttemptError as exc:
                errors.append(redact(f"attempt {attempts}: {exc}"))
                if exc.usage is not None:
                    usage = exc.usage if usage is None else usage + exc.usage
                if not exc.retryable:
                    break
                if attempts <= self.config.max_retries:
                    self._sleep(self._backoff(attempts))
                continue
            except Exception as exc:  # a bug must fail this question visibly, not the batch
                errors.append(redact(f"attempt {attempts}: unexpected {type(exc).__name__}: {exc}"))
                break
            if used is not None:
                usage = used if usage is None else usage + used
            return ChatReply(value, attempts, tuple(errors), usage)
        return ChatReply(None, attempts, tuple(errors), usage)

    def _backoff(self, attempt: int) -> float:
        return float(min(self.config.backoff_s * 2 ** (attempt - 1), self.config.max_backoff_s))

    def _post(self, request: Mapping[str, Any]) -> tuple[int, bytes]:
        """POST and read the response within the byte and time limits: (status, body)."""
        headers = {"Content-Type": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        limit = self.config.max_response_bytes
        timeout = self.config.timeout_s
        expired = threading.Event()
        deadline = time.monotonic() + timeout
        try:
            with self._client.stream(
                "POST", url, json=request, headers=headers, timeout=timeout
            ) as response:

                def expire() -> None:
                    expired.set()
                    response.close()

                watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), expire)
                watchdog.daemon = True
                watchdog.start()
                try:
                    declared = response.headers.get("content-length", "")
                    if declared.isdigit() and int(declared) > limit:
                        raise AttemptError(
                            f"response declares {declared} bytes, over the {limit}-byte limit",
                            retryable=False,
                        )
                    body = bytearray()
                    for chunk in response.iter_bytes():
                        body += chunk
                        if len(body) > limit:
                            raise AttemptError(
                                f"response body exceeds the {limit}-byte limit", retryable=False
                            )
                    if expired.is_set():
                        raise AttemptError(f"timeout: response not complete within {timeout:g}s")
                    return response.status_code, bytes(body)
                finally:
                    watchdog.cancel()
        except httpx.TimeoutException as exc:
            raise AttemptError(f"timeout after {timeout:g}s: {exc}") from exc
        except (httpx.TransportError, httpx.StreamError) as exc:
            if expired.is_set():
                raise AttemptError(f"timeout: response not complete within {timeout:g}s") from exc
            raise AttemptError(f"connection error: {type(exc).__name__}: {exc}") from exc

    def _attempt(
        self,
        request: Mapping[str, Any],
        validate: Callable[[object], T],
        on_tool_request: Callable[[str, dict[str, Any]], str],
    ) -> tuple[T, TokenUsage | None]:
        status, raw = self._post(request)
        if status >= 500 or status == 429:
            raise AttemptError(f"HTTP {status}")
        if status >= 400:
            text = raw[:200].decode("utf-8", "replace")
            raise AttemptError(f"HTTP {status}: {text}", retryable=False)
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise AttemptError("response body is not JSON") from exc
        usage = usage_of(body) if isinstance(body, Mapping) else None
        try:
            message = body["choices"][0]["message"]
            if not isinstance(message, Mapping):
                raise TypeError("message is not an object")
        except (KeyError, IndexError, TypeError) as exc:
            raise AttemptError(f"no choices[0].message: {exc}", usage=usage) from exc
        content = message.get("content")
        parsed: object = None
        parse_error: str | None = None
        if isinstance(content, str):
            try:
                parsed = json.loads(content)
            except ValueError as exc:
                parse_error = f"malformed JSON answer: {exc}"
        requests = tool_requests(message, parsed)
        if requests:
            outcomes = [on_tool_request(name, args) for name, args in requests]
            raise AttemptError(
                "model requested tool call(s), handed to the executor: " + "; ".join(outcomes),
                usage=usage,
            )
        if parse_error is not None or content is None:
            raise AttemptError(parse_error or "answer has no content", usage=usage)
        try:
            return validate(parsed), usage
        except ValidationError as exc:
            raise AttemptError(_first_error(exc), usage=usage) from exc
        except ValueError as exc:
            raise AttemptError(f"schema violation: {exc}", usage=usage) from exc
