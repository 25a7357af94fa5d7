"""A new SQLite tracking store is created and migrated by one process at a time.

MLflow creates and migrates a SQLite store on its first use. Two processes doing that
at once (the Dask workers of one flow warming their trackers, or a worker and the
CLI) run the same Alembic steps twice, and one fails with `duplicate column name:
step` part-way: the Dask worker that hit it died and was restarted mid-run, which is
how `bench cycle --workers 2` failed. An exclusive lock on a file beside the store
makes the first use of a store in each process wait for any other process that is
creating it; MLflow caches the initialised store per URI for the rest of the process.
PostgreSQL stores are created by `db upgrade`-style set-up once and need no lock.
"""

from __future__ import annotations

import fcntl
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

C = TypeVar("C")
_READY: set[str] = set()


def sqlite_path(tracking_uri: str) -> Path | None:
    """The database file of a `sqlite:///` tracking URI; None for any other store."""
    if not tracking_uri.startswith("sqlite:///"):
        return None
    return Path(tracking_uri.removeprefix("sqlite:///"))


def initialised(make: Callable[[], C], tracking_uri: str) -> C:
    """`make()` a client and create and migrate its store now, one process at a time.

    The client is made under the lock too: MLflow may open the store as it is built.
    """
    path = sqlite_path(tracking_uri)
    if path is None or tracking_uri in _READY:
        return make()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".init-lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            client: Any = make()
            client.search_experiments(max_results=1)
            client.search_registered_models(max_results=1)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    _READY.add(tracking_uri)
    return client  # type: ignore[no-any-return]
