"""AEL memory learning: tiered memory, ranked recall, policy bandit, learning loop.

Pure domain code: no orchestration, tracking or validation framework is imported here,
so the in-process benchmark and the ledger-backed services share one implementation.
"""

from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.bandit import (
    BanditState,
    CreditMode,
    ThompsonBandit,
    reward_from_outcome,
)
from reflexmem.memory.cycle import EpisodeInput, EvolutionEvent, LearningState, settle_episode
from reflexmem.memory.distill import DistillConfig, DistillReport, Pattern, distill_window
from reflexmem.memory.entries import TIER_BOOST, FrozenError, MemoryEntry
from reflexmem.memory.loop import EpisodeReport, LearningLoop
from reflexmem.memory.policies import (
    RenderFormat,
    Retrieval,
    RetrievalPolicy,
    count_tokens,
    default_policies,
    retrieve,
)
from reflexmem.memory.ranking import MatchFn, RankedEntry, TokenOverlapMatcher, rank
from reflexmem.memory.schedule import LearningSchedule
from reflexmem.memory.store import InMemoryStore, MemoryStore, WriteResult

__all__ = [
    "TIER_BOOST",
    "BanditState",
    "CreditMode",
    "DistillConfig",
    "DistillReport",
    "EntryState",
    "EpisodeInput",
    "EpisodeReport",
    "EvolutionEvent",
    "FrozenError",
    "InMemoryStore",
    "LearningLoop",
    "LearningSchedule",
    "LearningState",
    "MatchFn",
    "MemoryEntry",
    "MemoryStore",
    "Pattern",
    "RankedEntry",
    "RenderFormat",
    "Retrieval",
    "RetrievalPolicy",
    "ThompsonBandit",
    "Tier",
    "TokenOverlapMatcher",
    "WriteResult",
    "count_tokens",
    "default_policies",
    "distill_window",
    "rank",
    "retrieve",
    "reward_from_outcome",
    "settle_episode",
]
