import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from reflexmem.ingest.load import ingest_files
from reflexmem.ledger.previews import PreviewAlreadyConsumed, PreviewNotFound, consume_preview
from reflexmem.synth import write_stream
from tests.integration.ledger_data import small_stream


def _unconsumed_preview(engine: sa.Engine, tmp_path: Path) -> tuple[str, str]:
    stream = small_stream(20)
    stream["previews"] = stream["previews"].with_columns(
        consumed_at=None, consumed_by_decision_id=None
    )
    paths = write_stream({k: stream[k] for k in ("decisions", "previews")}, tmp_path)
    with engine.begin() as conn:
        ingest_files(conn, paths)
    row = stream["previews"].row(0, named=True)
    return row["preview_id"], row["decision_id"]


def test_a_preview_is_consumed_exactly_once(engine: sa.Engine, tmp_path: Path) -> None:
    preview, decision = _unconsumed_preview(engine, tmp_path)
    with engine.begin() as conn:
        consume_preview(conn, preview, decision)
    with pytest.raises(PreviewAlreadyConsumed, match="already consumed"), engine.begin() as conn:
        consume_preview(conn, preview, decision)
    with engine.connect() as conn:
        count, owner = conn.execute(
            sa.text(
                "SELECT consume_count, consumed_by_decision_id FROM trade_previews "
                "WHERE preview_id = :p"
            ),
            {"p": preview},
        ).one()
    assert (count, owner) == (1, decision)


def test_an_unknown_preview_is_reported_as_missing(engine: sa.Engine) -> None:
    with pytest.raises(PreviewNotFound), engine.begin() as conn:
        consume_preview(conn, "nope", "nope")


def test_the_database_itself_refuses_a_second_consumption(
    engine: sa.Engine, tmp_path: Path
) -> None:
    preview, decision = _unconsumed_preview(engine, tmp_path)
    with engine.begin() as conn:
        consume_preview(conn, preview, decision)
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(
            sa.text(
                "UPDATE trade_previews SET consume_count = consume_count + 1 WHERE preview_id = :p"
            ),
            {"p": preview},
        )


@pytest.mark.postgres
def test_sixteen_concurrent_consumers_one_winner(pg_url: str, tmp_path: Path) -> None:
    from adapters.db import make_engine
    from tests.conftest import _truncate

    engine = make_engine(pg_url, poolclass=sa.pool.NullPool)  # 16 threads, 16 connections
    _truncate(engine)
    preview, decision = _unconsumed_preview(engine, tmp_path)
    barrier = threading.Barrier(16)
    wins: list[int] = []
    refusals: list[str] = []

    def consumer(i: int) -> None:
        with engine.connect() as conn:
            barrier.wait()
            try:
                with conn.begin():
                    consume_preview(conn, preview, decision, now=datetime.now(UTC))
                wins.append(i)
            except PreviewAlreadyConsumed as exc:
                refusals.append(str(exc))

    threads = [threading.Thread(target=consumer, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    engine.dispose()
    assert len(wins) == 1
    assert len(refusals) == 15
    assert all("already consumed" in r for r in refusals)
