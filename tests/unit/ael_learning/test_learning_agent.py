from __future__ import annotations

import math

import numpy as np
import pytest

from reflexmem.ael.environment import MarketEnvironment
from reflexmem.ael.learning import (
    LEARNING_METHODS,
    OUTCOME_SCALE,
    LearningAgent,
    ToolCache,
    agent_session,
)
from reflexmem.ael.panel import PricePanel
from reflexmem.ael.splits import ChronoSplits
from reflexmem.ael.table import get_method, run_table
from reflexmem.memory.entries import FrozenError, MemoryEntry, Tier


def _run(agent: LearningAgent, panel: PricePanel, splits: ChronoSplits) -> dict[str, object]:
    env = MarketEnvironment(panel)
    out = {}
    for split in splits:
        episode = env.run(split, agent)
        agent.observe_episode(episode)
        out[split.name] = episode
    return out


def test_memory_and_posteriors_are_byte_identical_across_the_frozen_test_split(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    agent = LearningAgent(np.random.default_rng(0), "ael")
    env = MarketEnvironment(dfull)
    for split in (dfull_splits.train, dfull_splits.val):
        agent.observe_episode(env.run(split, agent))
    assert agent.loop.frozen
    assert agent.store.frozen
    store_before = agent.store.to_dict()
    bandit_before = agent.loop.bandit_state.to_json()
    snapshot_before = agent.loop.snapshot()
    learned = agent.loop.episode
    assert learned == dfull_splits.train.n_returns + dfull_splits.val.n_returns

    test = env.run(dfull_splits.test, agent)
    agent.observe_episode(test)

    assert agent.store.to_dict() == store_before
    assert agent.loop.bandit_state.to_json() == bandit_before
    assert agent.loop.snapshot() == snapshot_before
    (check,) = agent.frozen_checks
    assert check.split == "test"
    assert check.identical
    assert check.decisions == dfull_splits.test.n_returns
    # It kept deciding (and selecting policies) in test, from the frozen posterior.
    assert test.n_returns == 39
    assert set(agent.policy_frequencies()["test"]) <= set(agent.loop.bandit_state.arms)
    # Any write during test is refused before it changes anything.
    agent.loop.select_policy()
    with pytest.raises(FrozenError):
        agent.loop.record_episode("leak", 0.5, 0.9, ["x"])
    entry = MemoryEntry("epi:x:999", agent.loop.namespace, Tier.EPISODIC, "leak", quality=0.9)
    with pytest.raises(FrozenError):
        agent.store.put(entry)
    assert agent.fingerprint() == check.after_sha256


def test_the_dfull_snapshots_are_refused_and_the_refusal_is_in_the_output(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    agent = LearningAgent(np.random.default_rng(0), "ael")
    episode = _run(agent, dfull, dfull_splits)["test"]
    decision = episode.decisions[0]  # type: ignore[attr-defined]
    kinds = {r.source.split("/")[1] for r in decision.refusals}
    assert kinds == {"fundamentals", "analyst", "options", "earnings"}
    assert len(decision.refusals) == 40
    assert all(r.as_of > r.decision_time for r in decision.refusals)
    notes = "\n".join(decision.notes)
    assert "REFUSED snapshots/fundamentals/" in notes
    assert "point-in-time guard refused 40 items" in notes
    assert "valuation=abstains (fundamentals refused by point-in-time guard)" in notes
    assert "cycle_analysis=prices only (macro_calendar unavailable)" in notes


def test_outcomes_are_tanh_of_the_realised_bar_return(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    agent = LearningAgent(np.random.default_rng(3), "memory")
    episodes = _run(agent, dfull, dfull_splits)
    gross = np.concatenate([episodes[s].gross_returns for s in ("train", "val", "test")])  # type: ignore[attr-defined]
    np.testing.assert_allclose(agent.outcomes, np.tanh(gross / OUTCOME_SCALE), atol=1e-12)
    recorded = [r.outcome for r in agent.loop.history]
    n = dfull_splits.train.n_returns + dfull_splits.val.n_returns
    np.testing.assert_allclose(recorded, np.tanh(gross[:n] / OUTCOME_SCALE), atol=1e-12)
    rewards = [r.reward for r in agent.loop.history]
    np.testing.assert_allclose(rewards, np.clip((np.asarray(recorded) + 1) / 2, 0, 1))


def test_memory_variant_uses_one_fixed_policy_and_no_reflection(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    agent = LearningAgent(np.random.default_rng(0), "memory")
    _run(agent, dfull, dfull_splits)
    assert agent.loop.bandit_state.arms == ("full_detailed",)
    assert all(set(f) == {"full_detailed"} for f in agent.policy_frequencies().values())
    assert agent.reflections == []


def test_warm_up_freezes_the_posterior_for_15_episodes_and_the_ablation_does_not(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    warm = LearningAgent(np.random.default_rng(0), "ael")
    cold = LearningAgent(np.random.default_rng(0), "ael_no_warmup")
    for agent in (warm, cold):
        _run(agent, dfull, dfull_splits)
    _, warm_means = warm.posterior_trace()
    _, cold_means = cold.posterior_trace()
    # Means before decision i: nothing moves during the first 15 episodes with warm-up.
    np.testing.assert_array_equal(warm_means[:16], 0.5)
    assert not np.allclose(cold_means[1:16], 0.5)
    assert warm_means[16:].std() > 0
    assert [r.learned for r in warm.loop.history[:16]] == [False] * 15 + [True]
    first = warm.episodes["train"].decisions[0].notes  # type: ignore[attr-defined]
    assert any("warm-up, memory not applied" in n for n in first)


def test_reflection_runs_every_window_and_reaches_the_planner_only_in_ael(
    dfull: PricePanel, dfull_splits: ChronoSplits
) -> None:
    ael = LearningAgent(np.random.default_rng(1), "ael")
    ablated = LearningAgent(np.random.default_rng(1), "ael_no_reflection")
    eps = _run(ael, dfull, dfull_splits)
    _run(ablated, dfull, dfull_splits)
    # Windows of 10 settled episodes, the first after warm-up (20, 30, ...).
    assert [r.window_end for r in ael.reflections][:3] == [20, 30, 40]
    assert ablated.reflections == []
    notes = "\n".join(n for d in eps["test"].decisions for n in d.notes)  # type: ignore[attr-defined]
    assert "insight=" in notes
    assert "reflection " in notes


def _rows(method: str, panel: PricePanel, splits: ChronoSplits, seed: int) -> list[dict]:
    with agent_session():
        rows = run_table(panel, splits, [method], seeds=[seed])
    return [{k: v for k, v in r.items() if k != "timing"} for r in rows]


@pytest.mark.parametrize("method", LEARNING_METHODS)
def test_same_seed_same_rows_and_other_seeds_differ(method: str, synthetic: PricePanel) -> None:
    from reflexmem.ael.run import default_splits

    splits = default_splits(synthetic)
    assert get_method(method).seeded
    first = _rows(method, synthetic, splits, 0)
    again = _rows(method, synthetic, splits, 0)
    other = _rows(method, synthetic, splits, 1)
    assert first == again
    assert first != other


def test_decisions_do_not_depend_on_future_prices(dfull: PricePanel) -> None:
    from reflexmem.ael.splits import Split

    poisoned = dfull.closes.copy()
    poisoned[150:] *= np.linspace(0.5, 2.0, dfull.n_assets)[None, :]
    future = dfull.with_closes(poisoned)
    split = Split("train", 0, 150)
    a = MarketEnvironment(dfull).run(split, LearningAgent(np.random.default_rng(0), "ael"))
    b = MarketEnvironment(future).run(split, LearningAgent(np.random.default_rng(0), "ael"))
    # Decisions up to bar 148 see closes 0..148 only; their returns end at bar 149.
    np.testing.assert_array_equal(a.weights, b.weights)


def test_tool_cache_shares_reports_across_agents_but_keys_on_the_whole_history(
    dfull: PricePanel,
) -> None:
    cache = ToolCache()
    env = MarketEnvironment(dfull)
    view = env.view(40)
    first = cache.report(view, LearningAgent(np.random.default_rng(0), "ael").tools)
    assert (
        cache.report(
            env.view(40), first_config := LearningAgent(np.random.default_rng(1), "ael").tools
        )
        is first
    )
    assert (cache.hits, cache.misses) == (1, 1)
    changed = dfull.closes.copy()
    changed[3] *= 1.01
    other = MarketEnvironment(dfull.with_closes(changed)).view(40)
    assert cache.report(other, first_config) is not first
    assert not math.isnan(first.risk_score.portfolio)
