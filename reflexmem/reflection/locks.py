"""The per-role reflection lock, held for a whole batch without holding a transaction.

docs/design.md §7 serialises reflection per role, so the lock spans the batch, model calls
included. It must not be a transaction-scoped database lock: a batch waits on the model
for as long as its response limits allow, and a transaction open that long holds a
PostgreSQL snapshot and, on SQLite, the database's only write lock, which would stop
admission, ingestion and every other role while the model answers. So:

* PostgreSQL: a *session* advisory lock (`pg_try_advisory_lock`) on a dedicated
  autocommit connection that stays idle, outside any transaction, until the batch ends;
  the server drops it with the connection if the process dies.
* SQLite: an exclusive `flock` on a file beside the database (`<ledger>.reflect-<role>.lock`);
  the kernel drops it if the process dies. An in-memory database uses a process lock.

The batch then reads its inputs in one short transaction, calls the model with no
transaction open, and writes its results in another short one (`reflexmem.reflection.batch`).
The holder is recorded in `reflection_role_locks` for the doctor to show.
"""

from __future__ import annotations

import fcntl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

LOCK_PREFIX = "reflexmem.reflection:"
DEFAULT_TIMEOUT_S = 600.0
_PROCESS_LOCKS: dict[str, threading.Lock] = {}
_GUARD = threading.Lock()

HOLDER_UPSERT = sa.text(
    "INSERT INTO reflection_role_locks (role_id, holder, acquired_at) "
    "VALUES (:r, :h, :t) ON CONFLICT (role_id) DO UPDATE "
    "SET holder = excluded.holder, acquired_at = excluded.acquired_at"
)


class RoleBusy(TimeoutError):
    """Another batch of the role held the lock for the whole wait."""


def _wait(try_once: Callable[[], bool], role_id: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    pause = 0.02
    while not try_once():
        if time.monotonic() >= deadline:
            raise RoleBusy(f"reflection of role {role_id!r} stayed locked for {timeout_s:g}s")
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def _lock_file(engine: sa.Engine, role_id: str) -> Path | None:
    database = engine.url.database
    if not database or database == ":memory:":
        return None
    return Path(f"{database}.reflect-{role_id.encode().hex()}.lock")


@contextmanager
def role_lock(
    engine: sa.Engine, role_id: str, *, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Iterator[None]:
    """Hold `role_id`'s reflection lock while the block runs (no transaction is held)."""
    if engine.dialect.name == "postgresql":
        key = {"k": LOCK_PREFIX + role_id}
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            take = sa.text("SELECT pg_try_advisory_lock(hashtext(:k))")
            _wait(lambda: bool(conn.execute(take, key).scalar_one()), role_id, timeout_s)
            try:
                yield
            finally:
                conn.execute(sa.text("SELECT pg_advisory_unlock(hashtext(:k))"), key)
        return
    path = _lock_file(engine, role_id)
    if path is None:
        with _GUARD:
            lock = _PROCESS_LOCKS.setdefault(role_id, threading.Lock())
        _wait(lambda: lock.acquire(blocking=False), role_id, timeout_s)
        try:
            yield
        finally:
            lock.release()
        return
    with path.open("a+") as handle:

        def take_file() -> bool:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            return True

        _wait(take_file, role_id, timeout_s)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def record_holder(conn: sa.Connection, role_id: str, holder: str) -> None:
    """Name the batch holding the role's lock (on SQLite this write takes the write lock)."""
    conn.execute(HOLDER_UPSERT, {"r": role_id, "h": holder, "t": datetime.now(UTC)})
