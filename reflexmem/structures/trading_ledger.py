"""The trading environment read from the ledger: settled decisions, usable checks, the index.

Every stage of a trading structure search rebuilds the environment from the ledger
(as the office stages rebuild theirs from a seed): the reflected `trade_decision`
episodes with the realized return of each decision's own position
(`reflex.trading.read_episodes`), the usable trading skill versions as an episode
pins them (`reflex.snapshot`), and the memory index: the set of active pattern and
rule versions in the roles' namespaces, named by a hash of their entry IDs, with the
entry count of each namespace (what loading a module's knowledge costs).
"""

from __future__ import annotations

import hashlib

import polars as pl
import sqlalchemy as sa

from reflexmem.reflex.lifecycle import USABLE_STATES
from reflexmem.reflex.snapshot import PinnedSkill, load_snapshot
from reflexmem.reflex.trading import TRADE_ENVIRONMENT, TRADE_FAMILY, judged_frame, read_episodes
from reflexmem.registry import RoleRegistry
from reflexmem.structures.model import Structure
from reflexmem.structures.office_tasks import TaskSets
from reflexmem.structures.trading import TradingEnvironment, check_masks, namespace
from reflexmem.structures.trading_search import isolated_root, pinned_checks, time_sets

INDEX_PREFIX = "trading-index@"
_INDEX_SQL = sa.text(
    "SELECT entry_id, namespace FROM memory_entries "
    "WHERE state = 'active' AND namespace LIKE 'role:%' ORDER BY entry_id"
)


def usable_checks(conn: sa.Connection) -> list[PinnedSkill]:
    """Trading skill versions that may decide now (the production gate's deciders)."""
    snapshot = load_snapshot(conn, task_family=TRADE_FAMILY)
    return [
        s
        for s in snapshot.skills
        if s.state in USABLE_STATES and s.spec.environment_version == TRADE_ENVIRONMENT
    ]


def memory_index(conn: sa.Connection) -> tuple[str, dict[str, int]]:
    """(index version, entries per structure namespace) of the roles' active memory."""
    digest = hashlib.sha256()
    counts: dict[str, int] = {}
    for entry_id, ns in conn.execute(_INDEX_SQL):
        digest.update(f"{entry_id}\n".encode())
        key = namespace(str(ns).split(":", 1)[1])
        counts[key] = counts.get(key, 0) + 1
    return INDEX_PREFIX + digest.hexdigest()[:12], counts


def load_environment(
    conn: sa.Connection, registry: RoleRegistry
) -> tuple[TradingEnvironment, list[PinnedSkill]]:
    """The environment over every settled decision of the ledger, and the checks it pins."""
    frame = read_episodes(conn, registry)
    judged = judged_frame(frame, registry).unique("decision_id", keep="first", maintain_order=True)
    judged = judged.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).alias("_row"))
    skills = usable_checks(conn)
    index, counts = memory_index(conn)
    decisions = judged.select("decision_id", "role_id", "decided_at_ts", "realized_return")
    env = TradingEnvironment(
        decisions, check_masks(judged, skills), index_version=index, entries=counts
    )
    return env, skills


def trading_setup(
    conn: sa.Connection, registry: RoleRegistry
) -> tuple[TradingEnvironment, TaskSets, Structure]:
    """The environment, its time-ordered task sets and the isolated root structure."""
    env, skills = load_environment(conn, registry)
    if not env.tasks():
        raise ValueError("no settled trade decision in the ledger: run a cycle first")
    root = isolated_root(env.roles_present(), pinned_checks(skills), env.index_version)
    return env, time_sets(env), root
