"""The admission lock: one admission batch at a time, taken before anything is staged.

PostgreSQL: a transaction-scoped advisory lock (`pg_try_advisory_xact_lock`), polled
until a deadline, then the holder row is upserted for the doctor to see. SQLite: the
upsert of the `admission_locks` row is the first statement of the batch's transaction,
and that write takes the database's write lock, which SQLite holds until commit or
rollback. On both, a crashed batch releases its lock with its connection, so there is
nothing to clean up. A batch that cannot get the lock within its wait returns False and
the caller reports "another admission is running" (never a crash, never a duplicate).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import sqlalchemy as sa

LOCK_NAME = "admission"
LOCK_KEY = "reflexmem.admission"
DEFAULT_WAIT_S = 30.0
SQLITE_BUSY_MS = 30_000
"""The busy timeout `adapters/db.py` gives every SQLite connection (restored after the wait)."""

UPSERT = sa.text(
    "INSERT INTO admission_locks (name, holder, acquired_at) VALUES (:n, :h, :t) "
    "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, acquired_at = excluded.acquired_at"
)


def _busy(exc: sa.exc.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def acquire_admission_lock(conn: sa.Connection, holder: str, *, wait_s: float) -> bool:
    """Take the admission lock for the rest of `conn`'s transaction; False if it stayed busy."""
    deadline = time.monotonic() + max(wait_s, 0.0)
    pause = 0.05
    if conn.dialect.name == "postgresql":
        while not conn.execute(
            sa.text("SELECT pg_try_advisory_xact_lock(hashtext(:k))"), {"k": LOCK_KEY}
        ).scalar_one():
            if time.monotonic() >= deadline:
                return False
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
        conn.execute(UPSERT, {"n": LOCK_NAME, "h": holder, "t": datetime.now(UTC)})
        return True
    # SQLite waits inside the statement for its busy timeout: make that the bound.
    conn.exec_driver_sql(f"PRAGMA busy_timeout={int(max(wait_s, 0.0) * 1000)}")
    try:
        conn.execute(UPSERT, {"n": LOCK_NAME, "h": holder, "t": datetime.now(UTC)})
    except sa.exc.OperationalError as exc:
        if _busy(exc):
            return False
        raise
    finally:
        conn.exec_driver_sql(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    return True
