"""Conditions, L0/L1/L2 procedures and rollout buckets: one routed row = one frame row."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reflexmem.reflex import procedures
from reflexmem.reflex.conditions import (
    ConditionError,
    compile_all,
    holds,
    observations_frame,
    observations_from_json,
)
from reflexmem.reflex.filings import corpus
from reflexmem.reflex.procedures import decide_frame, decide_one
from reflexmem.reflex.rollout import rollout_bucket, rollout_buckets
from reflexmem.reflex.shadow import labelled_frame
from tests.unit.reflex.reflex_helpers import MakeSpec

OBS = {"n": 5, "when": "2026-01-05T00:00:00", "then": "2026-02-01T00:00:00",
       "title": "Raises Guidance", "flag": True}  # fmt: skip


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"field": "n", "equals": 5}, True),
        ({"field": "n", "gt": 10}, False),
        ({"field": "n", "gte": 5}, True),
        ({"field": "n", "lt": "10"}, True),  # numbers compare as numbers, not text
        ({"field": "flag", "equals": True}, True),
        ({"field": "title", "contains": "guidance"}, True),
        ({"field": "title", "contains_any": ["outlook", "RAISES"]}, True),
        ({"field": "title", "matches": "^Raises"}, True),
        ({"field": "title", "in": ["x", "Raises Guidance"]}, True),
        ({"field": "title", "not_in": ["Raises Guidance"]}, False),
        ({"field": "when", "lt_field": "then"}, True),  # ISO timestamps order as text
        ({"field": "when", "gt_field": "then"}, False),
        ({"field": "absent", "missing": True}, True),
        ({"field": "absent", "equals": "x"}, False),
        ({"field": "absent", "not_equals": "x"}, False),  # a missing field satisfies nothing
    ],
)
def test_conditions(condition: dict[str, object], expected: bool) -> None:
    assert holds([condition], OBS) is expected


def test_a_condition_needs_exactly_one_operator() -> None:
    with pytest.raises(ConditionError):
        compile_all([{"field": "n", "gt": 1, "lt": 9}])


def test_json_observations_give_the_same_frame_as_mappings() -> None:
    rows: list[dict[str, object]] = [{"a": "x", "n": 3, "b": True}, {"n": 4.5}]
    from_json = observations_from_json(
        pl.Series(['{"a": "x", "n": 3, "b": true}', '{"n": 4.5}']), ["a", "n", "b"]
    )
    assert from_json.equals(observations_frame(rows, ["a", "n", "b"]))


@pytest.mark.parametrize(
    "name", ["filing_kind_rules", "filing_kind_policy", "filing_kind_examples"]
)
def test_one_routed_row_decides_like_its_row_in_a_frame(make_spec: MakeSpec, name: str) -> None:
    spec = make_spec(name)
    items = corpus("replay", 30)
    frame = labelled_frame(items)
    batch = decide_frame(spec, frame).to_dicts()
    singles = [decide_one(spec, item["input"]) for item in items]
    assert [(b["choice"], round(b["confidence"], 12)) for b in batch] == [
        (c, round(conf, 12)) for c, conf, _ in singles
    ]


def test_rules_decide_with_certainty_or_not_at_all(make_spec: MakeSpec) -> None:
    spec = make_spec("filing_kind_rules")
    assert decide_one(spec, {"form_type": "10-K", "title": "x", "body": "y"}) == (
        "earnings_report",
        1.0,
        False,
    )
    assert decide_one(spec, {"form_type": "NOTE", "title": "x", "body": "y"}) == (None, 0.0, False)
    assert decide_one(spec, {"form_type": "10-K", "title": "x", "body": ""}) == (None, 0.0, True)


def test_the_policy_is_a_softmax_over_the_fixed_options(make_spec: MakeSpec) -> None:
    spec = make_spec("filing_kind_policy")
    choice, confidence, _ = decide_one(
        spec, {"form_type": "NOTE", "source": "broker", "body": "price target and rating"}
    )
    assert choice == "analyst_note"
    assert 0.9 < confidence < 1.0


def test_examples_with_no_similar_input_give_no_answer(make_spec: MakeSpec) -> None:
    spec = make_spec("filing_kind_examples")
    assert decide_one(spec, {"title": "zzz", "body": "qqq"}) == (None, 0.0, False)


def test_examples_decide_the_same_in_small_chunks(
    make_spec: MakeSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_spec("filing_kind_examples")
    frame = labelled_frame(corpus("shadow", 50))
    whole = decide_frame(spec, frame)
    monkeypatch.setattr(procedures, "CHUNK_ROWS", 7)
    assert decide_frame(spec, frame).equals(whole)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=12), st.text(min_size=1, max_size=6)),
        min_size=1,
        max_size=30,
    ),
    st.text(max_size=10),
)
def test_the_vectorized_bucket_equals_the_scalar_one(
    pairs: list[tuple[str, str]], salt: str
) -> None:
    frame = pl.DataFrame({"account": [a for a, _ in pairs], "symbol": [s for _, s in pairs]})
    assert rollout_buckets(frame, salt).to_list() == [rollout_bucket(a, s, salt) for a, s in pairs]
