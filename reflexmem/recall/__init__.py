"""Role-case recall (docs/design.md §9): constrained SQL filters first, then hybrid ranking.

The eligibility constraints are SQL predicates on the ledger (`constraints`), applied
by the database before any score is computed; full-text (`fts`) and embedding
(`embeddings`) scores only order what the constraints let through, and the tier
ranking (`reflexmem.memory.ranking.rank_scores`) makes the final order (`api`).
"""

from reflexmem.recall.api import RecallResult, recall
from reflexmem.recall.constraints import RecallConstraints, RecallUnavailable, require_active
from reflexmem.recall.embeddings import (
    Embedder,
    HashingEmbedder,
    NumpyVectorIndex,
    VectorIndex,
    embed_cases,
    make_vector_index,
)
from reflexmem.recall.hit import RecallHit
from reflexmem.recall.query import RecallQueryError, query_terms

__all__ = [
    "Embedder",
    "HashingEmbedder",
    "NumpyVectorIndex",
    "RecallConstraints",
    "RecallHit",
    "RecallQueryError",
    "RecallResult",
    "RecallUnavailable",
    "VectorIndex",
    "embed_cases",
    "make_vector_index",
    "query_terms",
    "recall",
    "require_active",
]
