"""Reflection on settled role cases (docs/design.md §7): rule layers L0/L1, model layer L3, budget.

Everything here is pure domain code: it takes settled cases as values and returns
verdicts as values. Flows decide when to run it and write the results to the ledger.
"""

from reflexmem.reflection.budget import BudgetGate, BudgetLimits, Deferred
from reflexmem.reflection.llm import LLMConfig, OpenAIReflector
from reflexmem.reflection.rules import RuleConfig, RuleReflector, classify, pick_failure_mode
from reflexmem.reflection.types import (
    LEARNABLE,
    LESSON_MAX_CHARS,
    EvidenceItem,
    EvidenceRef,
    Reflection,
    ReflectionInput,
    Reflector,
    TokenUsage,
    parse_evidence,
)

__all__ = [
    "LEARNABLE",
    "LESSON_MAX_CHARS",
    "BudgetGate",
    "BudgetLimits",
    "Deferred",
    "EvidenceItem",
    "EvidenceRef",
    "LLMConfig",
    "OpenAIReflector",
    "Reflection",
    "ReflectionInput",
    "Reflector",
    "RuleConfig",
    "RuleReflector",
    "TokenUsage",
    "classify",
    "parse_evidence",
    "pick_failure_mode",
]
