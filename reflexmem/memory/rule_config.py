"""Which tags are conditions, and the thresholds of outcome-tested patterns and rules.

Kept apart from `outcome_rules` (which applies them) so that every learner that forms
rules, the cycle's and the AEL agent's, reads the same numbers from one place.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RuleConfig:
    """Which tags are conditions, and the thresholds of patterns and rules (one place).

    ``min_support`` 10 (fewer episodes on a side give no usable variance),
    ``screen_p`` 0.01 (a condition is looked at every window, so screening is strict
    enough that a null condition is rarely formed at all), ``confirm_support`` 60
    later carriers (half a standard deviation is then found about four times in five
    at the first test's level), ``block`` 10 episodes per block of a contrast for
    episodes that carry no ``block:<k>`` tag (no decision time: one distillation
    window; a role's cases carry two weeks of their decision time, see
    `role_stream.BLOCK_SECONDS`), ``q`` 0.05 (the error rate of active rules),
    ``retire_p`` 0.05.
    """

    prefixes: tuple[str, ...] = (
        "missing:",
        "against:",
        "direction:",
        "symbol:",
        "scenario:",
        "regime:",
        "arm:",
    )
    min_support: int = 10
    screen_p: float = 0.01
    confirm_support: int = 60
    block: int = 10
    q: float = 0.05
    retire_p: float = 0.05

    def is_condition(self, tag: str) -> bool:
        """Whether the tag was known before the outcome (and so may be a condition)."""
        return tag.startswith(self.prefixes)
