"""SQLite triggers of `role_cases`: the FTS5 index and the reflection stamp (migrations 0002, 0022).

Kept in one module because SQLite loses a table's triggers whenever a migration has to
recreate the table (its only way to change a CHECK constraint): such a migration calls
`create_triggers` again afterwards and re-indexes, so the SQL is written once.
"""

from __future__ import annotations

from collections.abc import Callable

TRIGGERS = (
    "role_cases_fts_ai",
    "role_cases_fts_ad",
    "role_cases_fts_au",
    "role_cases_reflected_ai",
    "role_cases_reflected_au",
)


def _facets(row: str) -> str:
    """SQLite expression of the facet tokens of `row` (NEW or OLD); see recall.fts."""
    us = "char(31)"
    base = f"{row}.role_id || {us} || {row}.state"
    sym = f"{base} || {us} || 's' || {us} || {row}.symbol"
    scen = f"{us} || 'c' || {us} || {row}.scenario"
    return (
        f"'f' || hex({base}) || ' f' || hex({sym})"
        f" || CASE WHEN {row}.scenario IS NULL THEN '' ELSE"
        f" ' f' || hex({base} || {scen}) || ' f' || hex({sym} || {scen}) END"
    )


FTS_COLUMNS = "decision_text, lesson, symbol, scenario, facets"


def _fts_values(row: str) -> str:
    return (
        f"{row}.rowid, {row}.decision_text, {row}.lesson, {row}.symbol, {row}.scenario, "
        f"{_facets(row)}"
    )


def create_fts_table(execute: Callable[[str], object]) -> None:
    """The contentless FTS5 table over role cases."""
    execute(
        "CREATE VIRTUAL TABLE role_cases_fts USING fts5("
        f"{FTS_COLUMNS}, content='', tokenize='unicode61 remove_diacritics 2')"
    )


def _reflected(row: str, only_reflected: bool) -> str:
    return f"{row}.state = 'reflected'" if only_reflected else "1"


def create_triggers(execute: Callable[[str], object], *, only_reflected: bool = True) -> None:
    """The FTS and reflection-stamp triggers of role_cases.

    The FTS index holds reflected cases only (migration 0022): recall reads no other, and
    tokenising every decision text at admission was most of admission's case insert.
    `only_reflected=False` gives the earlier triggers, which indexed every case.
    """
    new, old = _reflected("NEW", only_reflected), _reflected("OLD", only_reflected)
    execute(
        f"CREATE TRIGGER role_cases_fts_ai AFTER INSERT ON role_cases WHEN {new} BEGIN "
        f"INSERT INTO role_cases_fts(rowid, {FTS_COLUMNS}) VALUES ({_fts_values('NEW')}); END"
    )
    execute(
        f"CREATE TRIGGER role_cases_fts_ad AFTER DELETE ON role_cases WHEN {old} BEGIN "
        f"INSERT INTO role_cases_fts(role_cases_fts, rowid, {FTS_COLUMNS}) "
        f"VALUES ('delete', {_fts_values('OLD')}); END"
    )
    execute(
        "CREATE TRIGGER role_cases_fts_au AFTER UPDATE OF "
        "decision_text, lesson, symbol, scenario, role_id, state ON role_cases "
        f"WHEN {old} OR {new} BEGIN "
        f"INSERT INTO role_cases_fts(role_cases_fts, rowid, {FTS_COLUMNS}) "
        f"SELECT 'delete', {_fts_values('OLD')} WHERE {old}; "
        f"INSERT INTO role_cases_fts(rowid, {FTS_COLUMNS}) "
        f"SELECT {_fts_values('NEW')} WHERE {new}; END"
    )
    stamp = "strftime('%Y-%m-%d %H:%M:%f000', 'now')"
    execute(
        "CREATE TRIGGER role_cases_reflected_ai AFTER INSERT ON role_cases "
        "WHEN NEW.state = 'reflected' BEGIN "
        "INSERT OR REPLACE INTO case_reflections(case_id, reflected_at) "
        f"VALUES (NEW.case_id, {stamp}); END"
    )
    execute(
        "CREATE TRIGGER role_cases_reflected_au AFTER UPDATE OF state ON role_cases "
        "WHEN NEW.state = 'reflected' AND OLD.state IS NOT 'reflected' BEGIN "
        "INSERT OR REPLACE INTO case_reflections(case_id, reflected_at) "
        f"VALUES (NEW.case_id, {stamp}); END"
    )


def backfill(execute: Callable[[str], object], *, only_reflected: bool = True) -> None:
    """Index the role cases already stored (the reflected ones, as the triggers do)."""
    execute(
        f"INSERT INTO role_cases_fts(rowid, {FTS_COLUMNS}) "
        f"SELECT {_fts_values('role_cases').replace('role_cases.rowid', 'rowid')} "
        f"FROM role_cases WHERE {_reflected('role_cases', only_reflected)}"
    )
