"""Ledger-backed idempotency and token buckets: the executor's guarantees across processes.

`LedgerIdempotency` turns the primary key of `tool_calls` (tool, idempotency key) into
the claim of `reflexmem.executor_stores`: the process whose INSERT lands owns the call;
any other process finds the row and, depending on its status, replays the stored result
(`done`), reports the pinned failure (`unverified`), takes over a released key
(`failed`, by a compare-and-set UPDATE), or waits while the owner is still running
(`pending`) up to `wait_s`, then refuses with `in_progress`. A process that dies between
the claim and the result leaves its row `pending`: whether the effect happened is then
unknown, so the key is never run again automatically; a person inspects it.

`LedgerRateStore` keeps one token bucket per tool in `rate_buckets`. Refill and take are
one UPDATE statement guarded by "at least one token after refill", so two workers on the
same ledger can never both spend the last token. Time is each worker's wall clock
(seconds since the epoch); a clock behind the stored time refills nothing.

Each operation commits in its own short transaction on the store's engine, apart from
the caller's: the claim must be visible to other processes before the effect starts.
Stored results are JSON values (what the handler returned, through `json` with `str`
for anything else), so a replay in another process returns the JSON form.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, cast

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from reflexmem.executor_stores import Claim, arguments_digest, refill, wait_for_token
from reflexmem.executor_types import TokenBucket
from reflexmem.ledger.reflex_enums import ToolCallStatus
from reflexmem.ledger.reflex_models import RateBucket, ToolCall

CALLS = cast(sa.Table, ToolCall.__table__)
BUCKETS = cast(sa.Table, RateBucket.__table__)


def json_value(value: object) -> Any:
    """`value` as plain JSON data (what a replay in another process will see)."""
    return json.loads(json.dumps(value, default=str))


def _insert(conn: sa.Connection, table: sa.Table, row: dict[str, Any], keys: list[str]) -> bool:
    """INSERT unless a row with the same key exists; True if this call inserted it."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    stmt = (
        dialect.insert(table)
        .values(**row)
        .on_conflict_do_nothing(index_elements=keys)
        .returning(table.c[keys[0]])
    )
    return conn.execute(stmt).first() is not None


class LedgerIdempotency:
    """`IdempotencyStore` on the ledger's `tool_calls` table, shared by every process."""

    def __init__(
        self,
        engine: sa.Engine,
        *,
        wait_s: float = 30.0,
        poll_s: float = 0.05,
        owner: str | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.engine = engine
        self.wait_s = wait_s
        self.poll_s = poll_s
        self.owner = owner or f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self._now = now

    def _where(self, tool: str, key: str) -> sa.ColumnElement[bool]:
        return sa.and_(CALLS.c.tool == tool, CALLS.c.idempotency_key == key)

    def claim(self, tool: str, key: str, arguments: dict[str, Any], caller: str) -> Claim:
        """See `IdempotencyStore.claim`; waits while another process runs the same key."""
        digest = arguments_digest(arguments)
        deadline = time.monotonic() + self.wait_s
        while True:
            with self.engine.begin() as conn:
                row = {
                    "tool": tool,
                    "idempotency_key": key,
                    "arguments_sha256": digest,
                    "arguments": json_value(arguments),
                    "caller": caller,
                    "status": ToolCallStatus.PENDING.value,
                    "reason": "",
                    "attempts": 0,
                    "owner": self.owner,
                    "started_at": self._now(),
                }
                if _insert(conn, CALLS, row, ["tool", "idempotency_key"]):
                    return Claim("claimed")
                found = conn.execute(sa.select(CALLS).where(self._where(tool, key))).one()
                if found.arguments_sha256 != digest:
                    return Claim(
                        "conflict", reason="idempotency key reused with different arguments"
                    )
                status = ToolCallStatus(found.status)
                if status is ToolCallStatus.DONE:
                    return Claim("replay", found.result, attempts=found.attempts)
                if status is ToolCallStatus.UNVERIFIED:
                    return Claim("unverified", found.result, found.reason, found.attempts)
                if status is ToolCallStatus.FAILED:
                    taken = conn.execute(
                        CALLS.update()
                        .where(
                            self._where(tool, key), CALLS.c.status == ToolCallStatus.FAILED.value
                        )
                        .values(
                            status=ToolCallStatus.PENDING.value,
                            owner=self.owner,
                            caller=caller,
                            started_at=self._now(),
                            finished_at=None,
                        )
                    ).rowcount
                    if taken == 1:
                        return Claim("claimed")
                    continue
                holder, since = found.owner, found.started_at
            if time.monotonic() >= deadline:
                reason = (
                    "a call with this idempotency key is in progress "
                    f"(owner {holder} since {since}); its outcome is unknown until it finishes"
                )
                return Claim("busy", reason=reason)
            time.sleep(self.poll_s)

    def _finish(self, tool: str, key: str, status: ToolCallStatus, **values: Any) -> None:
        with self.engine.begin() as conn:
            changed = conn.execute(
                CALLS.update()
                .where(
                    self._where(tool, key),
                    CALLS.c.owner == self.owner,
                    CALLS.c.status == ToolCallStatus.PENDING.value,
                )
                .values(status=status.value, finished_at=self._now(), **values)
            ).rowcount
        if changed != 1:
            raise RuntimeError(f"tool call {tool}/{key} is not claimed by {self.owner}")

    def complete(self, tool: str, key: str, value: object, attempts: int) -> None:
        """See `IdempotencyStore.complete`."""
        self._finish(tool, key, ToolCallStatus.DONE, result=json_value(value), attempts=attempts)

    def fail(self, tool: str, key: str, reason: str, attempts: int) -> None:
        """See `IdempotencyStore.fail`."""
        self._finish(tool, key, ToolCallStatus.FAILED, reason=reason, attempts=attempts)

    def unverified(self, tool: str, key: str, value: object, reason: str, attempts: int) -> None:
        """See `IdempotencyStore.unverified`."""
        self._finish(
            tool,
            key,
            ToolCallStatus.UNVERIFIED,
            result=json_value(value),
            reason=reason,
            attempts=attempts,
        )


def _refilled() -> str:
    """SQL for the bucket's tokens at :now under the current shape, capped at :cap."""
    raw = "(tokens + (CASE WHEN :now > updated_at THEN :now - updated_at ELSE 0 END) * :refill)"
    return f"(CASE WHEN {raw} > :cap THEN :cap ELSE {raw} END)"


_TAKE = sa.text(
    f"UPDATE rate_buckets SET tokens = {_refilled()} - 1, "
    "updated_at = CASE WHEN :now > updated_at THEN :now ELSE updated_at END, "
    "capacity = :cap, refill_per_s = :refill "
    f"WHERE name = :name AND {_refilled()} >= 1"
).bindparams(
    sa.bindparam("now", type_=sa.Double()),
    sa.bindparam("cap", type_=sa.Double()),
    sa.bindparam("refill", type_=sa.Double()),
    sa.bindparam("name", type_=sa.String()),
)


class LedgerRateStore:
    """`RateStore` on the ledger's `rate_buckets` table, shared by every worker."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    def take(self, name: str, bucket: TokenBucket, now: float) -> float:
        """See `RateStore.take`: one atomic refill-and-take; the wait if no token is left."""
        with self.engine.begin() as conn:
            row = {
                "name": name,
                "capacity": bucket.capacity,
                "refill_per_s": bucket.refill_per_s,
                "tokens": bucket.capacity - 1.0,
                "updated_at": now,
            }
            if _insert(conn, BUCKETS, row, ["name"]):
                return 0.0
            params = {"now": now, "cap": bucket.capacity, "refill": bucket.refill_per_s}
            if conn.execute(_TAKE, {**params, "name": name}).rowcount == 1:
                return 0.0
            tokens, updated = conn.execute(
                sa.select(BUCKETS.c.tokens, BUCKETS.c.updated_at).where(BUCKETS.c.name == name)
            ).one()
        return wait_for_token(refill(float(tokens), float(updated), bucket, now), bucket)

    def tokens(self, name: str) -> float | None:
        """Tokens stored for `name` at its last take (None if it was never used)."""
        with self.engine.connect() as conn:
            value = conn.execute(
                sa.select(BUCKETS.c.tokens).where(BUCKETS.c.name == name)
            ).scalar_one_or_none()
        return None if value is None else float(value)
