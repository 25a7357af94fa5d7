"""`bench structures --trading`: its JSON, its exhaustive single-edge floor, the planted edge."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from apps.bench.structures_stream import Planted, bench_roles, role_checks
from apps.cli import app
from reflexmem.registry import load_registry

N = 600


@pytest.fixture(scope="module")
def printed() -> dict[str, Any]:
    result = CliRunner().invoke(
        app, ["bench", "structures", "--trading", "--decisions", str(N), "--json"]
    )
    assert result.exit_code == 0, result.output
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data


def test_one_run_per_size_with_every_figure(printed: dict[str, Any]) -> None:
    assert (printed["benchmark"], printed["cost_model"]) == ("structures_trading", "trading")
    (run,) = printed["runs"]
    assert run["decisions"] == N
    assert sum(run["sets"].values()) == run["settled"] == N
    assert run["setup_s"] >= 0
    search = run["search"]
    for key in (
        "search_s",
        "candidates_generated",
        "candidates_refused",
        "candidates_evaluated",
        "evaluations_per_s",
        "search_s_per_candidate",
        "parent_selection_cost",
        "winner_selection_cost",
        "winner_edges",
    ):
        assert key in search
    assert search["candidates_evaluated"] > 0
    assert search["candidates_generated"] >= search["candidates_refused"]
    assert set(run["final_test"]) == {
        "winner",
        "parent",
        "control_random_same_edges",
        "control_best_of_n",
    }
    for row in run["final_test"].values():
        assert row["tasks"] == run["sets"]["final_test"]
        assert {"cost", "realized_return_per_decision", "net_value_per_decision"} <= set(row)
    assert run["final_test"]["parent"]["edges"] == []
    evidence = run["edge_evidence"]
    assert sorted(r["edge"] for r in evidence["edges"]) == search["winner_edges"]
    for row in evidence["edges"]:
        assert row["low"] <= row["mean"] <= row["high"]
        assert row["n"] == run["sets"]["final_test"]
    assert isinstance(evidence["verdict"], str)
    assert run["ratio_target"] == 3.0
    assert isinstance(run["within_target"], bool)
    assert isinstance(run["search_found_floor_best"], bool)


def test_the_floor_evaluates_every_ordered_role_pair(printed: dict[str, Any]) -> None:
    (run,) = printed["runs"]
    roles = bench_roles(load_registry())
    assert len(roles) == 4
    assert sorted(run["roles"]) == sorted(roles)
    assert run["checks"] == {r: f"avoid {s}" for r, s in role_checks(roles, Planted()).items()}
    floor = run["floor"]
    assert floor["ordered_role_pairs"] == len(roles) * (len(roles) - 1) == 12
    assert floor["floor_candidates"] == 12
    assert floor["floor_refused"] == 0
    assert floor["every_pair_evaluated"] is True
    assert floor["floor_s"] >= 0


def test_the_floor_finds_the_planted_edge(printed: dict[str, Any]) -> None:
    (run,) = printed["runs"]
    assert run["planted"]["edge"] == "valuation->momentum"
    assert run["floor"]["best_edge"] == ["valuation->momentum"]
    assert run["floor"]["best_beats_parent"] is True
    assert run["floor"]["best_selection_cost"] < run["search"]["parent_selection_cost"]


def test_decisions_without_trading_is_refused() -> None:
    result = CliRunner().invoke(app, ["bench", "structures", "--decisions", "600", "--json"])
    assert result.exit_code == 2
