"""Migration 0018 drops the GIN index on `role_cases.search` (no recall plan used it).

Its downgrade restores the index; the stored `search` column that ranks recall stays.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from adapters import migrate
from adapters.db import make_engine


def _indexed(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                sa.text("SELECT COUNT(*) FROM pg_indexes WHERE indexname = 'ix_role_cases_search'")
            ).scalar_one()
        )


@pytest.mark.postgres
def test_the_unused_search_index_is_dropped_and_comes_back_on_downgrade(pg_url: str) -> None:
    engine = make_engine(pg_url)
    assert _indexed(engine) == 0
    migrate.downgrade(engine, "0017_entry_stats")
    try:
        assert _indexed(engine) == 1
    finally:
        migrate.upgrade(engine)
    assert _indexed(engine) == 0
    with engine.connect() as conn:
        kind = conn.execute(
            sa.text(
                "SELECT data_type FROM information_schema.columns "
                "WHERE table_name = 'role_cases' AND column_name = 'search'"
            )
        ).scalar_one()
    assert kind == "tsvector"
    engine.dispose()
