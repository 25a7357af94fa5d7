"""Query text is data: it becomes a list of plain terms, never SQL or FTS syntax.

Every backend query is built from these terms alone, each one a run of letters and
digits, so FTS operators (`AND`, `NEAR`, `*`, `:`, `^`), quotes, parentheses and SQL
fragments in a query are just words or separators. Limits keep a pathological query
from turning into a pathological plan; exceeding them is a clear error.
"""

from __future__ import annotations

import re

MAX_QUERY_CHARS = 2000
MAX_TERMS = 32
MAX_TERM_CHARS = 64

_TERM = re.compile(r"[^\W_]+", re.UNICODE)


class RecallQueryError(ValueError):
    """The query text cannot be used (too long, not text, or a NUL character)."""


def query_terms(text: str) -> tuple[str, ...]:
    """Lower-cased, de-duplicated letter/digit runs of a query, in order of appearance."""
    if not isinstance(text, str):
        raise RecallQueryError(f"query must be text, got {type(text).__name__}")
    if len(text) > MAX_QUERY_CHARS:
        raise RecallQueryError(f"query is {len(text)} characters long; at most {MAX_QUERY_CHARS}")
    if "\x00" in text:
        raise RecallQueryError("query contains a NUL character")
    terms = dict.fromkeys(t[:MAX_TERM_CHARS] for t in _TERM.findall(text.lower()))
    return tuple(terms)[:MAX_TERMS]


def fts5_terms(terms: tuple[str, ...]) -> str:
    """FTS5 expression matching any term: each one a double-quoted string (a phrase)."""
    return " OR ".join(f'"{t}"' for t in terms)


def tsquery_terms(terms: tuple[str, ...]) -> str:
    """`to_tsquery` text matching any term; terms hold no tsquery operator characters."""
    return " | ".join(terms)
