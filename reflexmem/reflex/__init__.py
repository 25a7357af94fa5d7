"""REFLEX skills (docs/design.md §10): experience records, versions, router, shadow evaluation.

Repeated experience becomes cheaper decision paths (L2 examples, L1 bounded choices,
L0 rules) only through evidence, and only the common executor touches the world. Pure
domain code: values, frames and a ledger connection in, typed reports out; the flows,
MLflow and the CLI call these functions (see `docs/skills.md`).
"""

from reflexmem.reflex.episode import EpisodeResult, act, record_episode, run_episode
from reflexmem.reflex.experience import ExperienceRecord, read_experience, write_experiences
from reflexmem.reflex.lifecycle import Evidence, EvidenceKind, LifecycleError, check_move
from reflexmem.reflex.monitor import drift_report, rollout_assign, rollout_report
from reflexmem.reflex.review import ReviewError, enqueue, list_reviews, resolve_review
from reflexmem.reflex.router import Routing, Task, route
from reflexmem.reflex.shadow import (
    evaluate_declared,
    evaluate_skill,
    held_apart,
    labelled_frame,
    live_choices,
    replay_skill,
    shadow_compare,
)
from reflexmem.reflex.skills import SkillLoadError, SkillSpec, load_skill_file, load_skill_files
from reflexmem.reflex.snapshot import PinnedSkill, SkillSnapshot, load_snapshot
from reflexmem.reflex.versions import register_skill, transition, transitions_of, version_info

__all__ = [
    "EpisodeResult",
    "Evidence",
    "EvidenceKind",
    "ExperienceRecord",
    "LifecycleError",
    "PinnedSkill",
    "ReviewError",
    "Routing",
    "SkillLoadError",
    "SkillSnapshot",
    "SkillSpec",
    "Task",
    "act",
    "check_move",
    "drift_report",
    "enqueue",
    "evaluate_declared",
    "evaluate_skill",
    "held_apart",
    "labelled_frame",
    "list_reviews",
    "live_choices",
    "load_skill_file",
    "load_skill_files",
    "load_snapshot",
    "read_experience",
    "record_episode",
    "register_skill",
    "replay_skill",
    "resolve_review",
    "rollout_assign",
    "rollout_report",
    "route",
    "run_episode",
    "shadow_compare",
    "transition",
    "transitions_of",
    "version_info",
    "write_experiences",
]
