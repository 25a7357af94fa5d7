"""Structure G on the user's roles: the search finds a planted edge and none on a null stream."""

from __future__ import annotations

import numpy as np
import pytest

from reflexmem.structures.checks import static_checks
from reflexmem.structures.cost import TRADING, total
from reflexmem.structures.evaluate import count_episodes, replay
from reflexmem.structures.gain import Base, earns, net_values
from reflexmem.structures.operators import add_edge
from reflexmem.structures.search import SearchConfig, run_search
from reflexmem.structures.trading import subgoal
from reflexmem.structures.trading_search import (
    edge_evidence,
    isolated_root,
    pinned_checks,
    time_sets,
    verdict,
)
from tests.unit.structures.trading_stream import avoid_jnj, environment

CONFIG = SearchConfig(cost_model=TRADING, explore_edges=True)


def _search(planted: float, seed: int):  # type: ignore[no-untyped-def]
    env = environment(3000, planted, seed)
    root = isolated_root(env.roles_present(), pinned_checks([avoid_jnj()]), env.index_version)
    sets = time_sets(env)
    return env, root, sets, run_search(root, env, sets, CONFIG)


def test_the_isolated_root_is_the_roles_with_their_own_checks() -> None:
    env = environment(300, 0.0, 0)
    root = isolated_root(env.roles_present(), pinned_checks([avoid_jnj()]), env.index_version)
    assert static_checks(root, source="test") == []
    assert root.edges == ()
    assert root.handler_of == {subgoal("momentum"): "momentum", subgoal("valuation"): "valuation"}
    assert root.module_map["valuation"].skills == ("valuation-decide", "valuation_avoid_symbol_jnj")
    assert root.pins.versions["valuation_avoid_symbol_jnj"] == "valuation_avoid_symbol_jnj@1"
    # Replayed alone, valuation holds its own JNJ decisions and nothing of momentum's.
    ev = replay(root, env, env.tasks())
    held = {
        (r.family, env.ids.index(r.task_id) >= 0)
        for r in ev.results
        if r.answers[next(iter(r.answers))] == "hold"
    }
    assert held == {("valuation", True)}
    assert ev.solved == len(ev.results)


def test_sets_are_in_time_order_and_the_final_test_comes_strictly_after() -> None:
    env = environment(3000, 0.0, 1)
    sets = time_sets(env)
    assert max(t.period for t in sets.generation) < min(t.period for t in sets.selection)
    assert max(t.period for t in sets.selection) < min(t.period for t in sets.test)
    assert len(sets.generation) + len(sets.selection) + len(sets.test) == len(env.tasks())


def test_a_planted_cross_role_effect_is_found_and_its_edge_earns_its_place() -> None:
    env, root, sets, result = _search(0.02, 0)
    assert result.improved
    assert [e.id for e in result.winner.structure.edges] == ["valuation->momentum"]
    evidence = edge_evidence(result.winner.structure, env, sets.test, TRADING)
    (row,) = evidence
    assert row["earns_place"]
    assert row["low"] > 0
    assert row["n"] == len(sets.test)
    assert "valuation->momentum" in verdict(evidence)
    # The winner's realized value on the final test beats the parent's.
    win = net_values(TRADING, replay(result.winner.structure, env, sets.test)).sum()
    par = net_values(TRADING, replay(root, env, sets.test)).sum()
    assert win > par


@pytest.mark.parametrize("seed", range(10))
def test_a_null_stream_grows_no_edge_that_earns_its_place(seed: int) -> None:
    env, root, sets, result = _search(0.0, seed)
    # No chance gain on the selection set passes for a real one: the roles stay isolated.
    assert result.winner.structure.edges == ()
    assert not result.improved
    evidence = edge_evidence(result.winner.structure, env, sets.test, TRADING)
    assert not any(r["earns_place"] for r in evidence)
    assert verdict(evidence).startswith("no edge earns its place")
    # Forced on, the same edge cannot show a gain either: lending the check only costs.
    forced = add_edge(
        root, "valuation", "momentum", ["checks"], "v-to-m", contract_fields={"checks": "string"}
    ).child
    (row,) = edge_evidence(forced, env, sets.test, TRADING)
    assert row["changed"] > 0
    assert not row["earns_place"]


def test_net_values_price_each_episode_as_the_cost_model_does() -> None:
    env, root, sets, _ = _search(0.02, 0)
    ev = replay(root, env, sets.selection)
    one_by_one = [-total(TRADING, count_episodes((r,))) for r in ev.results]
    assert np.allclose(net_values(TRADING, ev), one_by_one)
    # A structure never beats itself; the planted edge beats the isolated roles.
    assert not earns(TRADING, ev, Base.of(TRADING, ev))
    lend = add_edge(
        root, "valuation", "momentum", ["checks"], "v-to-m", contract_fields={"checks": "string"}
    ).child
    assert earns(TRADING, replay(lend, env, sets.selection), Base.of(TRADING, ev, tries=3))


def test_an_unhandled_role_escalates_and_is_priced() -> None:
    env = environment(300, 0.0, 0)
    root = isolated_root(["valuation"], pinned_checks([avoid_jnj()]), env.index_version)
    ev = replay(root, env, env.tasks())
    momentum = [r for r in ev.results if r.family == "momentum"]
    assert momentum
    assert all(r.outcome == "hold" and r.escalated for r in momentum)
    assert all(r.value == 0.0 for r in momentum)
    costs = net_values(TRADING, ev)
    assert np.all(costs[[i for i, r in enumerate(ev.results) if r.family == "momentum"]] == -5.0)
