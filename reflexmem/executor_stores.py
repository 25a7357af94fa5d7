"""What the executor keeps beyond one call: idempotency claims and token buckets.

Two protocols with in-process implementations. An executor alone in one process uses
these; executors in several processes or machines share the ledger-backed ones in
`reflexmem.executor_ledger`, which satisfy the same protocols, so the executor's logic
is written once and a test of one store is a test of the contract.

Idempotency is a claim, not a lookup: the first caller of a key *claims* it before the
effect, so a concurrent second caller sees `busy` (and waits) rather than acting too.
After the handler returns, the claim is completed with the result; a handler that raised
releases it (`fail`), so a later call may try again; an effect whose post-condition
failed is pinned as `unverified`, because running it again could act twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from reflexmem.executor_types import TokenBucket

ClaimStatus = Literal["claimed", "replay", "unverified", "conflict", "busy"]


@dataclass(frozen=True)
class Claim:
    """The answer to "may I run this keyed call?": run it, replay a result, or refuse."""

    status: ClaimStatus
    value: object = None
    reason: str = ""
    attempts: int = 0


def arguments_digest(arguments: dict[str, Any]) -> str:
    """SHA-256 of the arguments as canonical JSON: equal arguments, equal digest."""
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class IdempotencyStore(Protocol):
    """Claims of idempotency keys, per tool."""

    def claim(self, tool: str, key: str, arguments: dict[str, Any], caller: str) -> Claim:
        """Claim `key` for a call with `arguments`, or say why the call must not run."""
        ...

    def complete(self, tool: str, key: str, value: object, attempts: int) -> None:
        """Store the result of a claimed call; later claims replay it."""
        ...

    def fail(self, tool: str, key: str, reason: str, attempts: int) -> None:
        """Release a claimed call whose handler raised; the key may be claimed again."""
        ...

    def unverified(self, tool: str, key: str, value: object, reason: str, attempts: int) -> None:
        """Pin a call whose effect happened but failed its post-condition."""
        ...


class RateStore(Protocol):
    """Token buckets by name."""

    def take(self, name: str, bucket: TokenBucket, now: float) -> float:
        """Take one token at time `now` (epoch seconds): 0.0 if granted, else seconds to wait."""
        ...


@dataclass
class _Entry:
    digest: str
    status: Literal["pending", "done", "failed", "unverified"]
    value: object = None
    reason: str = ""
    attempts: int = 0


class MemoryIdempotency:
    """Idempotency for one process: results are kept as the handler returned them."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str], _Entry] = {}

    def claim(self, tool: str, key: str, arguments: dict[str, Any], caller: str) -> Claim:
        """See `IdempotencyStore.claim`."""
        digest = arguments_digest(arguments)
        entry = self._entries.get((tool, key))
        if entry is None or entry.status == "failed":
            if entry is not None and entry.digest != digest:
                return Claim("conflict", reason="idempotency key reused with different arguments")
            self._entries[(tool, key)] = _Entry(digest, "pending")
            return Claim("claimed")
        if entry.digest != digest:
            return Claim("conflict", reason="idempotency key reused with different arguments")
        if entry.status == "done":
            return Claim("replay", entry.value, attempts=entry.attempts)
        if entry.status == "unverified":
            return Claim("unverified", entry.value, entry.reason, entry.attempts)
        return Claim("busy", reason="a call with this idempotency key is in progress")

    def complete(self, tool: str, key: str, value: object, attempts: int) -> None:
        """See `IdempotencyStore.complete`."""
        entry = self._entries[(tool, key)]
        entry.status, entry.value, entry.attempts = "done", value, attempts

    def fail(self, tool: str, key: str, reason: str, attempts: int) -> None:
        """See `IdempotencyStore.fail`."""
        entry = self._entries[(tool, key)]
        entry.status, entry.reason, entry.attempts = "failed", reason, attempts

    def unverified(self, tool: str, key: str, value: object, reason: str, attempts: int) -> None:
        """See `IdempotencyStore.unverified`."""
        entry = self._entries[(tool, key)]
        entry.status, entry.value, entry.reason = "unverified", value, reason
        entry.attempts = attempts


def refill(tokens: float, updated_at: float, bucket: TokenBucket, now: float) -> float:
    """Tokens in a bucket at `now`; a clock that went backwards refills nothing."""
    return min(bucket.capacity, tokens + max(0.0, now - updated_at) * bucket.refill_per_s)


def wait_for_token(tokens: float, bucket: TokenBucket) -> float:
    """Seconds until the bucket holds one whole token (infinite if it never refills)."""
    missing = 1.0 - tokens
    if missing <= 0:
        return 0.0
    return float("inf") if bucket.refill_per_s == 0 else missing / bucket.refill_per_s


class MemoryRateStore:
    """Token buckets for one process."""

    def __init__(self) -> None:
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, name: str, bucket: TokenBucket, now: float) -> float:
        """See `RateStore.take`."""
        tokens, updated = self._buckets.get(name, (bucket.capacity, now))
        tokens = refill(tokens, updated, bucket, now)
        if tokens >= 1.0:
            self._buckets[name] = (tokens - 1.0, now)
            return 0.0
        self._buckets[name] = (tokens, now)
        return wait_for_token(tokens, bucket)
