"""Market bars: the price input settlement and evaluation read, stored in the ledger.

A user's trades settle against prices the user supplied, so prices are ledger rows like
any other input: ingested from files (kind `bars`), checked by their own expectation
suite, keyed by (symbol, bar stamp) and never rewritten. `ts` is the instant the bar's
close became known (UTC); a daily bar given as a bare date is stamped at the end of its
UTC day at ingestion, so a lookup "at or before t" never sees a close before its day
ended.
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.orm import Mapped, mapped_column

from reflexmem.ledger.lengths import CODE_CHARS
from reflexmem.ledger.models import Base


class MarketBar(Base):
    """One bar of one symbol; `close` is the price of record, the rest is optional."""

    __tablename__ = "market_bars"
    __table_args__ = (
        sa.CheckConstraint("close > 0", name="close_positive"),
        sa.Index("ix_market_bars_ts", "ts"),
    )

    symbol: Mapped[str] = mapped_column(sa.String(CODE_CHARS), primary_key=True)
    ts: Mapped[datetime] = mapped_column(primary_key=True)
    open: Mapped[float | None]
    high: Mapped[float | None]
    low: Mapped[float | None]
    close: Mapped[float]
    volume: Mapped[float | None]
    source_sha256: Mapped[str] = mapped_column(sa.String(64))
    ingested_at: Mapped[datetime]
