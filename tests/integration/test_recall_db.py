"""Recall filters against both backends: constraints, as-of, query safety."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reflexmem.recall import RecallConstraints, RecallQueryError, recall
from tests.integration.recall_data import (
    ROLES,
    SCENARIOS,
    SYMBOLS,
    T0,
    WORDS,
    Case,
    clear,
    good,
    insert_cases,
)

lessons = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join)
states = st.sampled_from(["reflected", "reflected", "eligible", "pending", "reflection_failed"])


@st.composite
def stores(draw: st.DrawFn) -> list[Case]:
    n = draw(st.integers(1, 25))
    out = []
    for i in range(n):
        state = draw(states)
        klass = (
            draw(st.sampled_from(["logic_error", "missing_data", "exogenous", "variance"]))
            if state == "reflected"
            else None
        )
        out.append(
            Case(
                case_id=f"c{i}",
                role=draw(st.sampled_from(ROLES)),
                symbol=draw(st.sampled_from(SYMBOLS)),
                scenario=draw(st.sampled_from(SCENARIOS)),
                state=state,
                outcome_class=klass,
                lesson=draw(st.one_of(st.none(), lessons)),
                text=draw(lessons),
                origin=draw(st.sampled_from(["manual_agent", "manual_external", "autopilot"])),
                verified=draw(st.booleans()),
                quarantined=draw(st.booleans()) and draw(st.booleans()),
                decided=draw(st.integers(0, 50)),
                admitted=draw(st.integers(0, 50)),
                reflected=draw(st.integers(0, 50)),
                matured=draw(st.one_of(st.none(), st.integers(0, 50))),
            )
        )
    return out


constraints = st.builds(
    RecallConstraints,
    role=st.sampled_from(ROLES),
    symbol=st.one_of(st.none(), st.sampled_from(SYMBOLS)),
    scenario=st.one_of(st.none(), st.sampled_from(SCENARIOS[1:])),
    as_of=st.one_of(st.none(), st.integers(0, 60).map(lambda h: T0 + timedelta(hours=h))),
    known_at=st.one_of(st.none(), st.integers(0, 60).map(lambda h: T0 + timedelta(hours=h))),
)
queries = st.one_of(
    st.lists(
        st.sampled_from([*WORDS, "OR", "NOT", "*", '"', "'", ":", "NEAR(", ")", "--"]), max_size=5
    ).map(" ".join),
    st.text(max_size=40).map(lambda s: s.replace("\x00", "")),
)
EXAMPLES = int(os.environ.get("REFLEX_HYPOTHESIS_EXAMPLES", "100"))


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(store=stores(), c=constraints, query=queries)
def test_no_result_ever_violates_a_constraint(
    engine: sa.Engine, store: list[Case], c: RecallConstraints, query: str
) -> None:
    clear(engine)
    insert_cases(engine, store)
    by_id = {case.case_id: case for case in store}
    with engine.connect() as conn:
        result = recall(conn, c, query, k=50)
        everything = recall(conn, c, "", k=50)
    for hit in result.hits:
        assert by_id[hit.id].eligible(c), (hit.id, c)
    # An empty query ranks the whole constrained set: the filters are exact, not lax.
    assert set(everything.case_ids) == {x.case_id for x in store if x.eligible(c)}


def test_as_of_is_valid_time_and_known_at_is_recorded_time(engine: sa.Engine) -> None:
    insert_cases(
        engine,
        [
            good(1, decided=0, admitted=1, reflected=2, matured=2),
            good(2, decided=10, admitted=11, reflected=12, matured=12),
            # Back-filled: matured at hour 5, but admitted and reflected only at 40.
            good(3, decided=0, admitted=40, reflected=41, matured=5),
            good(4, decided=0, admitted=25, reflected=26),  # no stamp: valid when reflected
        ],
    )
    with engine.connect() as conn:

        def ids(as_of: int | None = None, known_at: int | None = None) -> set[str]:
            c = RecallConstraints(
                role="r1",
                as_of=None if as_of is None else T0 + timedelta(hours=as_of),
                known_at=None if known_at is None else T0 + timedelta(hours=known_at),
            )
            return set(recall(conn, c, "earnings", k=10).case_ids)

        assert ids(1) == set()
        assert ids(2) == {"c1"}
        assert ids(5) == {"c1", "c3"}
        assert ids(12) == {"c1", "c2", "c3"}
        assert ids(29) == {"c1", "c2", "c3", "c4"}
        assert ids(known_at=29) == {"c1", "c2", "c4"}
        assert ids(as_of=12, known_at=29) == {"c1", "c2"}
        assert ids() == {"c1", "c2", "c3", "c4"}


INJECTIONS = [
    "earnings' OR 1=1 --",
    '"; DROP TABLE role_cases; --',
    "earnings NOT guidance",
    'NEAR("earnings" "guidance", 2)',
    "lesson:* OR decision_text:momentum",
    "facets : x",
    "earn* ^lesson",
    "(((((",
    "'" * 50,
    "\\' \\\" %_ ;",
    "ünïcödé 価格 earnings",
    "",
    "   ",
    "or and not near",
    "the a of",
]


@pytest.mark.parametrize("query", INJECTIONS)
def test_query_text_is_data_never_sql(engine: sa.Engine, query: str) -> None:
    insert_cases(engine, [good(1), good(2, role="r2", lesson="secret other role earnings")])
    with engine.connect() as conn:
        result = recall(conn, RecallConstraints(role="r1"), query, k=10)
        assert set(result.case_ids) <= {"c1"}
        assert conn.execute(sa.text("SELECT count(*) FROM role_cases")).scalar() == 2


def test_overlong_or_nul_query_is_a_clear_error(engine: sa.Engine) -> None:
    with engine.connect() as conn, pytest.raises(RecallQueryError):
        recall(conn, RecallConstraints(role="r1"), "x" * 5000)
    with engine.connect() as conn, pytest.raises(RecallQueryError):
        recall(conn, RecallConstraints(role="r1"), "a\x00b")
