"""The learning methods of the table: one agent, `RuleAgent`, configured per row.

| method | retrieval policy | reflection | warm-up | credit |
| --- | --- | --- | --- | --- |
| `memory` | fixed `full_detailed`, no bandit | no | 15 | full information |
| `ael` | Thompson bandit over the five default policies | yes | 15 | full information |
| `ael_no_warmup` (paper "-warm-up") | bandit | yes | 0 | full information |
| `ael_no_reflection` (paper "-reflection") | bandit | no | 15 | full information |
| `ael_bandit_feedback` (ablation) | bandit | yes | 15 | only the rule held |

Every variant is frozen from the first test decision; none adapts during test, so no
row needs the `online` label.
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
