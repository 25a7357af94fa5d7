"""The learning schedule's pure rules, one by one, on plain values."""

from __future__ import annotations

from typing import Any

import pytest

from reflexmem.memory.bandit import BanditState, CreditMode
from reflexmem.memory.schedule import (
    LearningSchedule,
    Played,
    Window,
    check_gate,
    closing_windows,
    credit_episode,
    credit_window,
    gate_rewards,
    gate_span,
    keep_from,
    learns,
    trim,
    window_closed_by,
)

SPEC = LearningSchedule()
ARMS = ("a", "b", "c")


def test_defaults_are_the_specification_values() -> None:
    assert (SPEC.window_size, SPEC.warmup_episodes) == (10, 15)
    assert (SPEC.gate_start_window, SPEC.gate_every_windows, SPEC.gate_threshold) == (10, 5, 0.4)
    assert SPEC.credit is CreditMode.UNIFORM
    assert SPEC.gate_span == 50


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window_size": 0}, "window"),
        ({"gate_every_windows": 0}, "window"),
        ({"gate_start_window": 0}, "window"),
        ({"warmup_episodes": -1}, "warmup"),
        ({"gate_threshold": 1.5}, "gate_threshold"),
        ({"gate_threshold": float("nan")}, "gate_threshold"),
    ],
)
def test_invalid_schedules_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LearningSchedule(**kwargs)


def test_credit_mode_accepts_its_string_value() -> None:
    # Deliberately the plain string a config file gives, which the annotation does not admit.
    fractional = LearningSchedule(credit="fractional")  # type: ignore[arg-type]
    assert fractional.credit is CreditMode.FRACTIONAL


def test_episodes_learn_from_the_end_of_warm_up() -> None:
    assert [learns(SPEC, i) for i in (0, 14, 15, 16)] == [False, False, True, True]
    assert learns(LearningSchedule(warmup_episodes=0), 0)


def test_closing_windows_of_an_episode_range() -> None:
    assert closing_windows(SPEC, 0, 9) == ()
    first, second = closing_windows(SPEC, 0, 25)
    assert first == Window(1, 0, 10, learned=False, gate=None)  # closes inside warm-up
    assert second == Window(2, 10, 20, learned=True, gate=None)
    assert [w.number for w in closing_windows(SPEC, 95, 20)] == [10, 11]
    assert closing_windows(SPEC, 99, 1)[0].gate == (50, 100)
    assert closing_windows(SPEC, 100, 0) == ()
    with pytest.raises(ValueError, match="non-negative"):
        closing_windows(SPEC, -1, 3)


def test_window_closed_by_matches_the_range_form() -> None:
    for episode in range(0, 260):
        closed = closing_windows(SPEC, episode, 1)
        assert window_closed_by(SPEC, episode) == (closed[0] if closed else None)
    assert window_closed_by(SPEC, 18) is None
    assert window_closed_by(SPEC, 19) == Window(2, 10, 20, True, None)


def test_gate_is_due_at_window_ten_then_every_five_over_the_last_five_windows() -> None:
    due = {w: gate_span(SPEC, w) for w in range(1, 31) if gate_span(SPEC, w) is not None}
    assert due == {10: (50, 100), 15: (100, 150), 20: (150, 200), 25: (200, 250), 30: (250, 300)}
    late = LearningSchedule(warmup_episodes=120)
    assert gate_span(late, 10) is None  # closes inside warm-up: nothing learned yet
    assert gate_span(late, 15) == (100, 150)
    early = LearningSchedule(gate_start_window=2, gate_every_windows=5)
    assert gate_span(early, 2) == (0, 20)  # the span starts at episode 0, never before


def test_gate_mean_uses_learning_played_episodes_of_the_span_only() -> None:
    played = [Played(i, "a", 0.1 if i < 60 else 0.9) for i in range(40, 110)]
    assert gate_rewards(played, 50, 100) == [0.1] * 10 + [0.9] * 40
    window = closing_windows(SPEC, 99, 1)[0]
    check = check_gate(SPEC, window, played)
    assert (check.since, check.end, check.episodes) == (50, 100, 50)
    assert check.mean_reward == pytest.approx(0.74)
    assert not check.fires
    low = [Played(i, "a", 0.39) for i in range(50, 100)]
    assert check_gate(SPEC, window, low).fires
    exactly = [Played(i, "a", 0.5) for i in range(50, 100)]
    assert not check_gate(LearningSchedule(gate_threshold=0.5), window, exactly).fires


def test_a_gate_without_evidence_or_not_due_does_not_fire() -> None:
    window = closing_windows(SPEC, 99, 1)[0]
    empty = check_gate(SPEC, window, [Played(10, "a", 0.0)])
    assert (empty.episodes, empty.mean_reward, empty.fires) == (0, None, False)
    not_due = check_gate(SPEC, closing_windows(SPEC, 89, 1)[0], [Played(85, "a", 0.0)])
    assert not not_due.fires


def test_uniform_credit_is_immediate_and_windows_add_nothing() -> None:
    state = BanditState.initial(ARMS)
    after, counts = credit_episode(SPEC, state, Played(20, "b", 0.25))
    assert after.alpha == (1.0, 1.25, 1.0)
    assert after.beta == (1.0, 1.75, 1.0)
    assert counts == {"b": 1}
    window = closing_windows(SPEC, 29, 1)[0]
    assert credit_window(SPEC, after, window, [Played(20, "b", 0.25)]) == (after, {})


def test_fcc_credit_waits_for_the_window_and_splits_its_mean_by_use() -> None:
    fcc = LearningSchedule(credit=CreditMode.FRACTIONAL)
    state = BanditState.initial(ARMS)
    assert credit_episode(fcc, state, Played(20, "b", 0.25)) == (state, {})
    played = [Played(18, "c", 1.0), Played(20, "a", 0.2), Played(21, "a", 0.4)]
    played += [Played(22, "b", 0.6), Played(30, "c", 1.0)]
    window = closing_windows(fcc, 29, 1)[0]
    after, counts = credit_window(fcc, state, window, played)
    mean = (0.2 + 0.4 + 0.6) / 3  # only episodes 20-29
    assert counts == {"a": 2, "b": 1}
    assert after.alpha == pytest.approx((1 + 2 * mean, 1 + mean, 1.0))
    assert after.beta == pytest.approx((1 + 2 * (1 - mean), 1 + (1 - mean), 1.0))
    assert credit_window(fcc, state, closing_windows(fcc, 39, 1)[0], []) == (state, {})


def test_trim_keeps_what_the_next_credit_and_gates_can_need() -> None:
    window = closing_windows(SPEC, 99, 1)[0]
    # a gate at any later window w' judges from w' * 10 - 50 >= 60 on
    assert keep_from(SPEC, window) == 60
    played = [Played(i, "a", 0.5) for i in range(40, 105)]
    kept = trim(SPEC, window, played)
    assert [p.episode for p in kept] == list(range(60, 105))
    # with a one-window gate span only the next window's episodes are needed
    every = LearningSchedule(gate_every_windows=1)
    assert keep_from(every, window) == 100
    assert gate_span(every, 11) == (100, 110)
