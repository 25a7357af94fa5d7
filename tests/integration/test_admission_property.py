"""No row that fails a condition is ever admitted, and conservation always holds.

Each example is a batch of staged rows as the staging query returns them (text columns),
built from independent choices of every attribute a condition reads. The batch goes
through the real derivation, the real Great Expectations suite and the real verdicts.
"""

from __future__ import annotations

import os

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from expectations.runner import validate_admission
from reflexmem.admission.decide import decide
from reflexmem.admission.stage import derive
from reflexmem.registry import load_registry

ROLES = load_registry().ids
MIN_POINTS = 3
ORIGINS = [
    "manual_agent",
    "manual_external",
    "autopilot",
    "strategy_studio",
    "xstrategy",
    "workflow",
    "unknown",
]
settings.register_profile(
    "ci", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "dev", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")

row = st.fixed_dictionaries(
    {
        "role_id": st.sampled_from([*ROLES, "sentiment", "generic", ""]),
        "origin": st.sampled_from(ORIGINS),
        "origin_verified": st.sampled_from(["true", "false", "1", "0", None]),
        "automation_markers": st.sampled_from([None, "[]", "null", '["bot=1"]', '{"job": 2}']),
        "instrument": st.sampled_from(["spot", "perp"]),
        "has_preview": st.booleans(),
        "consume_count": st.sampled_from(["0", "1"]),
        "preview_uses": st.sampled_from(["1", "2", "3"]),
        "preview_for_other": st.booleans(),
        "consumed_by_other": st.booleans(),
        "mismatch": st.sets(st.sampled_from(["symbol", "direction", "account", "market"])),
        "preview_mismatch": st.sets(st.sampled_from(["symbol", "direction", "account", "market"])),
        "settled": st.sampled_from(["1", "0", None]),
        "points": st.sampled_from(["0", "2", "3", "8", None]),
    }
)
BASE = {"symbol": "AAPL", "direction": "long", "account": "acct", "market": "US"}


def _staged(choices: list[dict[str, object]]) -> pl.DataFrame:
    rows = []
    for i, c in enumerate(choices):
        decision = f"d{i}"
        e = {k: (f"x{v}" if k in c["mismatch"] else v) for k, v in BASE.items()}  # type: ignore[operator]
        p = {k: (f"y{v}" if k in c["preview_mismatch"] else v) for k, v in BASE.items()}  # type: ignore[operator]
        has = bool(c["has_preview"])
        rows.append(
            {
                "execution_id": f"e{i}",
                "decision_id": decision,
                "preview_id": f"p{i}" if has else None,
                "e_account": e["account"],
                "e_market": e["market"],
                "e_symbol": e["symbol"],
                "e_direction": e["direction"],
                "instrument": c["instrument"],
                "origin": c["origin"],
                "origin_verified": c["origin_verified"],
                "automation_markers": c["automation_markers"],
                "role_id": c["role_id"],
                "d_account": BASE["account"],
                "d_market": BASE["market"],
                "d_symbol": BASE["symbol"],
                "d_direction": BASE["direction"],
                "scenario": None,
                "rationale": "",
                "decided_at": "2025-01-06 14:30:00",
                "p_id": f"p{i}" if has else None,
                "p_decision_id": (f"other{i}" if c["preview_for_other"] else decision)
                if has
                else None,
                "p_consumed_by": (
                    (f"other{i}" if c["consumed_by_other"] else decision)
                    if has and c["consume_count"] == "1"
                    else None
                ),
                "consume_count": c["consume_count"] if has else None,
                "p_account": p["account"] if has else None,
                "p_market": p["market"] if has else None,
                "p_symbol": p["symbol"] if has else None,
                "p_direction": p["direction"] if has else None,
                "preview_uses": c["preview_uses"] if has else None,
                "settled": c["settled"],
                "points": c["points"],
            }
        )
    return pl.DataFrame(rows, schema_overrides=dict.fromkeys(rows[0], pl.String))


def _eligible(c: dict[str, object]) -> bool:
    markers = c["automation_markers"] not in (None, "[]", "null")
    manual = c["origin"] == "manual_agent" or (
        c["origin"] == "manual_external" and c["origin_verified"] in ("true", "1")
    )
    return (
        c["role_id"] in ROLES
        and manual
        and not markers
        and bool(c["has_preview"])
        and c["consume_count"] == "1"
        and c["preview_uses"] == "1"
        and not c["preview_for_other"]
        and not c["consumed_by_other"]
        and not c["mismatch"]
        and not c["preview_mismatch"]
    )


@given(st.lists(row, min_size=1, max_size=12))
def test_only_rows_meeting_every_condition_become_cases(choices: list[dict[str, object]]) -> None:
    staged = derive(_staged(choices), min_points=MIN_POINTS)
    verdicts = decide(staged, validate_admission(staged, ROLES), batch_id="prop")
    cases = set(verdicts.cases["execution_id"].to_list())
    held = set(verdicts.quarantine["subject_id"].to_list())
    assert verdicts.admitted + verdicts.pending + verdicts.quarantined == len(choices)
    assert cases.isdisjoint(held)
    assert len(cases | held) == len(choices)
    for i, c in enumerate(choices):
        assert (f"e{i}" in cases) == _eligible(c), c
    settled = {
        f"e{i}"
        for i, c in enumerate(choices)
        if c["settled"] == "1" and c["points"] is not None and int(str(c["points"])) >= MIN_POINTS
    }
    eligible = set(verdicts.cases.filter(pl.col("state") == "eligible")["execution_id"].to_list())
    assert eligible == cases & settled
