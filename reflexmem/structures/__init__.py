"""REFLEX structures (docs/design.md §11): structure G, checks, operators, isolation, selection.

Pure domain code: no orchestration, tracking or validation framework is imported here.
The flow (`flows/structure_search.py`), the MLflow registry adapter
(`adapters/tracking/structures.py`) and the CLI call these functions.
"""

from reflexmem.structures.archive import Archive, ArchiveEntry
from reflexmem.structures.bundle import Bundle, DriftReport, bundle_for, detect_drift
from reflexmem.structures.checks import require_valid, static_checks
from reflexmem.structures.controls import Controls, final_test, run_controls
from reflexmem.structures.cost import DEFAULT, EXPERIMENT_B, CostModel
from reflexmem.structures.evaluate import Evaluation, replay
from reflexmem.structures.experiment_b import run_experiment_b
from reflexmem.structures.isolation import Broker, Message, ModuleMemory, ScopedMemory
from reflexmem.structures.model import Edge, Lifecycle, Module, Structure, Trigger
from reflexmem.structures.mutations import (
    OPERATORS,
    Mutation,
    MutationRefused,
    Step,
    apply_step,
    checked,
    replay_steps,
)
from reflexmem.structures.refusals import IsolationRefused, Refusal, RefusalKind, StructureRefused
from reflexmem.structures.runtime import EpisodeResult, Runtime, Task
from reflexmem.structures.schema import load_packaged, load_structure, parse_structure
from reflexmem.structures.search import SearchConfig, SearchResult, run_search
from reflexmem.structures.winner import rebuild_winner

__all__ = [
    "DEFAULT",
    "EXPERIMENT_B",
    "OPERATORS",
    "Archive",
    "ArchiveEntry",
    "Broker",
    "Bundle",
    "Controls",
    "CostModel",
    "DriftReport",
    "Edge",
    "EpisodeResult",
    "Evaluation",
    "IsolationRefused",
    "Lifecycle",
    "Message",
    "Module",
    "ModuleMemory",
    "Mutation",
    "MutationRefused",
    "Refusal",
    "RefusalKind",
    "Runtime",
    "ScopedMemory",
    "SearchConfig",
    "SearchResult",
    "Step",
    "Structure",
    "StructureRefused",
    "Task",
    "Trigger",
    "apply_step",
    "bundle_for",
    "checked",
    "detect_drift",
    "final_test",
    "load_packaged",
    "load_structure",
    "parse_structure",
    "rebuild_winner",
    "replay",
    "replay_steps",
    "require_valid",
    "run_controls",
    "run_experiment_b",
    "run_search",
    "static_checks",
]
