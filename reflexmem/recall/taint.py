"""Memory entries that must not be recalled because a case they were made from was taken back.

A revoked case (a later admission batch found its preview reused, its position
ambiguous or its settlement self-contradictory) and a lesson held or rejected in review
must not reach a prompt, neither directly nor through what memory distilled from them.
Semantic patterns name the cases they merged (`memory_sources`), procedural rules name
their pattern, later versions name the version they extend: an entry is *tainted* when
any source, followed through that graph, is such a case. Recall drops tainted entries
whole (fail-closed: a pattern merged from ten cases, one of them revoked, is not
recalled; the next distillation window rebuilds patterns from what is still valid).

One recursive query, seeded from the (few) withdrawn cases, so recall pays nothing when
there are none.
"""

from __future__ import annotations

import sqlalchemy as sa

from reflexmem.ledger.enums import CaseState

WITHDRAWN = (CaseState.REVOKED.value, CaseState.HELD.value, CaseState.REJECTED.value)

TAINTED_SQL = sa.text(
    f"""
WITH RECURSIVE tainted(entry_id) AS (
    SELECT s.entry_id FROM memory_sources s
    JOIN role_cases rc ON rc.case_id = s.source_id
    WHERE rc.state IN ({", ".join(repr(w) for w in WITHDRAWN)})
    UNION
    SELECT s.entry_id FROM memory_sources s JOIN tainted t ON s.source_id = t.entry_id
)
SELECT t.entry_id FROM tainted t
JOIN memory_entries m ON m.entry_id = t.entry_id
WHERE m.namespace = :ns
"""
)


def tainted_entries(conn: sa.Connection, namespace: str) -> set[str]:
    """IDs of the namespace's memory entries made, at any remove, from a withdrawn case."""
    return {str(r[0]) for r in conn.execute(TAINTED_SQL, {"ns": namespace})}
