"""The demo's own embedded ledger: made fresh for every `make demo`, never someone else's.

`make demo` starts from an empty store, so it deletes the previous one first. It may
delete only a ledger a demo made: `reflexmem demo`, started on an embedded SQLite ledger
that holds no decisions, leaves a marker beside it (`<ledger file>.demo`), and
`reflexmem db drop-demo` deletes the ledger file (and its WAL and SHM files) only when
that marker is there. A PostgreSQL ledger (the stack's) is never deleted; a SQLite
ledger without the marker is someone's data, and is refused with the way out.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa

from reflexmem.settings import Settings

MARK_SUFFIX = ".demo"
SIDE_FILES = ("", "-wal", "-shm", MARK_SUFFIX)


class NotDemoLedger(RuntimeError):
    """The ledger in the way was not made by a demo; the message says what to do."""


def ledger_file(settings: Settings) -> Path | None:
    """The SQLite file of the ledger, or None for a server database."""
    url = sa.make_url(settings.resolved_database_url)
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database).resolve()


def mark_if_new(settings: Settings, engine: sa.Engine) -> bool:
    """Mark an embedded ledger with no decisions as the demo's (True when marked)."""
    path = ledger_file(settings)
    if path is None:
        return False
    with engine.connect() as conn:
        count = conn.execute(sa.text("SELECT COUNT(*) FROM trading_decisions")).scalar_one()
    if count:
        return Path(f"{path}{MARK_SUFFIX}").exists()
    Path(f"{path}{MARK_SUFFIX}").write_text("made by `reflexmem demo`; `make demo` may delete it\n")
    return True


def drop_demo_ledger(settings: Settings) -> str:
    """Delete the embedded ledger a previous demo made; what was done, in words.

    Raises `NotDemoLedger` for a SQLite ledger without the demo's marker.
    """
    path = ledger_file(settings)
    if path is None:
        return "the ledger is a database server's (not embedded): left alone"
    if not path.exists():
        return f"no ledger at {path}: nothing to delete"
    if not Path(f"{path}{MARK_SUFFIX}").exists():
        raise NotDemoLedger(
            f"{path} was not made by the demo, so the demo will not delete it: move it, "
            "or run the demo in another home (REFLEX_HOME=...)"
        )
    for suffix in SIDE_FILES:
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return f"deleted the previous demo's ledger {path}"
