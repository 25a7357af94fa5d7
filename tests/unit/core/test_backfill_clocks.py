from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reflexmem.operations.backfill import BackfillParams, backfill_clocks, parse_every


def test_durations_in_days_hours_and_weeks() -> None:
    assert parse_every("7d") == timedelta(days=7)
    assert parse_every(" 30d ") == timedelta(days=30)
    assert parse_every("12h") == timedelta(hours=12)
    assert parse_every("2w") == timedelta(days=14)


@pytest.mark.parametrize("text", ["", "7", "d", "0d", "-3d", "7x", "1.5d", "7 days"])
def test_a_duration_that_is_not_a_positive_count_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="--every"):
        parse_every(text)


def test_clocks_step_from_the_start_and_end_on_the_last_clock() -> None:
    start = datetime(2024, 1, 1, tzinfo=UTC)
    end = datetime(2024, 1, 20, tzinfo=UTC)
    assert backfill_clocks(start, end, timedelta(days=7)) == [
        datetime(2024, 1, 1, tzinfo=UTC),
        datetime(2024, 1, 8, tzinfo=UTC),
        datetime(2024, 1, 15, tzinfo=UTC),
        datetime(2024, 1, 20, tzinfo=UTC),
    ]
    assert backfill_clocks(start, start + timedelta(days=14), timedelta(days=7))[-1] == datetime(
        2024, 1, 15, tzinfo=UTC
    )
    assert backfill_clocks(start, start, timedelta(days=1)) == [start]


def test_naive_times_are_utc_and_a_range_out_of_order_is_refused() -> None:
    naive = datetime(2024, 1, 1)
    assert backfill_clocks(naive, naive, timedelta(days=1)) == [datetime(2024, 1, 1, tzinfo=UTC)]
    with pytest.raises(ValueError, match="before it starts"):
        backfill_clocks(datetime(2024, 2, 1), datetime(2024, 1, 1), timedelta(days=1))


def test_the_key_names_the_range_the_step_and_the_scope() -> None:
    a = BackfillParams(datetime(2024, 1, 1), datetime(2024, 3, 1), timedelta(days=7))
    same = BackfillParams(
        datetime(2024, 1, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC), timedelta(weeks=1)
    )
    assert a.key == same.key
    assert a.key.startswith("bf-")
    assert len(a.key) == 35
    other_step = BackfillParams(a.start, a.end, timedelta(days=30))
    other_role = BackfillParams(a.start, a.end, a.every, roles=("momentum",))
    assert len({a.key, other_step.key, other_role.key}) == 3
