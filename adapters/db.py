"""Engine and session factory: the only place that turns a URL into a connection pool.

SQLite gets foreign keys (off by default there), WAL and a busy timeout so that the
embedded store behaves like the server; `postgresql://` URLs go through psycopg 3.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker


def _normalise(url: str | URL) -> URL:
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.close()


def make_engine(url: str | URL, **options: Any) -> sa.Engine:
    """Build an engine for a ledger URL (SQLite file or PostgreSQL); `options` go to SQLAlchemy."""
    parsed = _normalise(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            from pathlib import Path

            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = sa.create_engine(parsed, connect_args={"timeout": 30}, **options)
        sa.event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    return sa.create_engine(parsed, pool_pre_ping=True, **options)


def session_factory(engine: sa.Engine) -> sessionmaker[Session]:
    """Sessions that keep loaded values after commit (callers often read them back)."""
    return sessionmaker(engine, expire_on_commit=False)


@contextmanager
def transaction(engine: sa.Engine) -> Iterator[Session]:
    """One unit of work: commit on success, roll back everything on any error."""
    with session_factory(engine)() as session, session.begin():
        yield session
