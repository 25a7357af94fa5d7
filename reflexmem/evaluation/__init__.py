"""Evaluation runs (docs/design.md §6): versioned per profile, replayed, explicitly promoted.

`profiles` names the recipes, `components` computes every factor with its own quality
flags, `runs` writes batches (and replays) as new rows, `promote` makes exactly one run
per decision and profile primary, and `stats` reads statistics from primary runs only.
"""

from reflexmem.evaluation.components import compute_components, long_components
from reflexmem.evaluation.profiles import (
    COMPONENTS,
    DEFAULT_PROFILE,
    PROFILES,
    BenchmarkProfile,
    get_profile,
)
from reflexmem.evaluation.promote import PromotionError, PromotionResult, promote
from reflexmem.evaluation.runs import (
    BatchInfo,
    EvaluationResult,
    RunOpener,
    batch_metrics,
    evaluate_matured,
    replay,
    tracking_table,
)
from reflexmem.evaluation.stats import role_statistics

__all__ = [
    "COMPONENTS",
    "DEFAULT_PROFILE",
    "PROFILES",
    "BatchInfo",
    "BenchmarkProfile",
    "EvaluationResult",
    "PromotionError",
    "PromotionResult",
    "RunOpener",
    "batch_metrics",
    "compute_components",
    "evaluate_matured",
    "get_profile",
    "long_components",
    "promote",
    "replay",
    "role_statistics",
    "tracking_table",
]
