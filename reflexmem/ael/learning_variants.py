"""The learning methods of the table: one agent, `RuleAgent`, configured per row.

| method | retrieval policy | acts on | warm-up | episodes written |
| --- | --- | --- | --- | --- |
| `memory` | fixed `full_detailed`, no bandit | screened patterns | 15 | every rule |
| `ael` | Thompson bandit over the five default policies | confirmed rules | 15 | every rule |
| `ael_no_warmup` (paper "-warm-up") | bandit | confirmed rules | 0 | every rule |
| `ael_no_reflection` (paper "-reflection") | bandit | screened patterns | 15 | every rule |
| `ael_bandit_feedback` (ablation) | bandit | confirmed rules | 15 | only the rule held |

"Reflection" is the slow loop's output: rules confirmed on episodes they were not formed
from. Without it the agent acts on the screened patterns themselves. Warm-up counts
episodes of each regime's namespace. Every variant is frozen from the first test
decision; none adapts during test, so no row needs the `online` label.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    """What distinguishes one learning method from another."""

    name: str
    bandit: bool
    reflection: bool
    warmup: int
    full_information: bool = True


VARIANTS: dict[str, Variant] = {
    "memory": Variant("memory", bandit=False, reflection=False, warmup=15),
    "ael": Variant("ael", bandit=True, reflection=True, warmup=15),
    "ael_no_warmup": Variant("ael_no_warmup", bandit=True, reflection=True, warmup=0),
    "ael_no_reflection": Variant("ael_no_reflection", bandit=True, reflection=False, warmup=15),
    "ael_bandit_feedback": Variant(
        "ael_bandit_feedback", bandit=True, reflection=True, warmup=15, full_information=False
    ),
}
LEARNING_METHODS = tuple(VARIANTS)
