"""Closed vocabularies of the ledger; each becomes a CHECK constraint in the database."""

from __future__ import annotations

from enum import StrEnum


class Direction(StrEnum):
    """Side of a decision or execution."""

    LONG = "long"
    SHORT = "short"


class Instrument(StrEnum):
    """What was traded; perps of unknown origin are never learnable."""

    SPOT = "spot"
    PERP = "perp"
    OPTION = "option"


class Origin(StrEnum):
    """Who caused an execution; only manual ones can teach a role anything."""

    MANUAL_AGENT = "manual_agent"
    MANUAL_EXTERNAL = "manual_external"
    AUTOPILOT = "autopilot"
    STRATEGY_STUDIO = "strategy_studio"
    XSTRATEGY = "xstrategy"
    WORKFLOW = "workflow"
    UNKNOWN = "unknown"


AUTOMATED_ORIGINS = frozenset(
    {Origin.AUTOPILOT, Origin.STRATEGY_STUDIO, Origin.XSTRATEGY, Origin.WORKFLOW}
)


class PositionStatus(StrEnum):
    """Lifecycle of the position a decision opened."""

    OPEN = "open"
    SETTLED = "settled"


class CaseState(StrEnum):
    """Where a role case is on its way from admission to a lesson."""

    PENDING = "pending"
    ELIGIBLE = "eligible"
    REFLECTED = "reflected"
    REFLECTION_FAILED = "reflection_failed"
    HELD = "held"
    """Reflected, but its lesson addresses the system: held for review, never recalled."""
    REJECTED = "rejected"
    """A held lesson a reviewer rejected: kept for audit, never recalled or learned."""
    REVOKED = "revoked"
    """Admitted once, then revoked by a later admission batch (see `case_revocations`)."""


class PendingReason(StrEnum):
    """Why a case is not yet eligible for reflection."""

    UNSETTLED = "unsettled"
    INSUFFICIENT_DATA = "insufficient_data"
    NOT_DUE = "not_due"
    BUDGET_DEFERRED = "budget_deferred"
    NO_MARKET_DATA = "no_market_data"


class OutcomeClass(StrEnum):
    """Reflection's verdict on a matured case; only the first two are learnable."""

    LOGIC_ERROR = "logic_error"
    MISSING_DATA = "missing_data"
    EXOGENOUS = "exogenous"
    VARIANCE = "variance"


class QuarantineReason(StrEnum):
    """Fail-closed reason codes; the first failing condition in this order is the primary one."""

    UNKNOWN_ROLE = "unknown_role"
    AUTOMATED_ORIGIN = "automated_origin"
    MALFORMED_MARKERS = "malformed_markers"
    UNKNOWN_ORIGIN = "unknown_origin"
    UNVERIFIED_EXTERNAL = "unverified_external"
    PREVIEW_MISSING = "preview_missing"
    PREVIEW_UNCONSUMED = "preview_unconsumed"
    PREVIEW_REUSED = "preview_reused"
    PREVIEW_DOUBLE_CONSUME = "preview_double_consume"
    UNKNOWN_DECISION = "unknown_decision"
    IDENTITY_MISMATCH = "identity_mismatch"
    EXECUTED_BEFORE_DECISION = "executed_before_decision"
    PREVIEW_AFTER_EXECUTION = "preview_after_execution"
    CONSUMPTION_OUT_OF_ORDER = "consumption_out_of_order"
    POSITION_AMBIGUOUS = "position_ambiguous"
    SETTLED_BEFORE_OPEN = "settled_before_open"
    SETTLEMENT_RETURN_INVALID = "settlement_return_invalid"
    # Market bars (`expectations/bars.json`); each code is the `meta.name` of its expectation.
    BAR_CLOSE_MISSING = "bar_close_missing"
    BAR_CLOSE_INVALID = "bar_close_invalid"
    BAR_OPEN_INVALID = "bar_open_invalid"
    BAR_HIGH_INVALID = "bar_high_invalid"
    BAR_LOW_INVALID = "bar_low_invalid"
    BAR_VOLUME_INVALID = "bar_volume_invalid"
    BAR_HIGH_BELOW_LOW = "bar_high_below_low"
    BAR_IN_FUTURE = "bar_in_future"
    BAR_DUPLICATE = "bar_duplicate"
    BAR_NOT_INCREASING = "bar_not_increasing"
    BAR_CLOSE_CONFLICT = "bar_close_conflict"
    BAR_FIELDS_CONFLICT = "bar_fields_conflict"
    # Legacy migration (`reflexmem migrate legacy`): a legacy row naming an unregistered role.
    LEGACY_UNKNOWN_ROLE = "legacy_unknown_role"


class SubjectKind(StrEnum):
    """What a quarantine row holds back."""

    EXECUTION = "execution"
    PREVIEW_CONSUMPTION = "preview_consumption"
    BAR = "bar"
    LEGACY_ROW = "legacy_row"
    """A row of a legacy `role_memory` table (`reflexmem migrate legacy`)."""


class LessonReviewStatus(StrEnum):
    """Where a lesson that addresses the system is on its way through review."""

    HELD = "held"
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class Tier(StrEnum):
    """How far an entry has been abstracted away from a single episode."""

    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


class EntryState(StrEnum):
    """Whether an entry may influence an agent yet.

    Promoted rules start as ``CANDIDATE`` and only act once confirmed, as a new ``ACTIVE``
    version; ``RETIRED`` keeps a rejected candidate for audit without recall;
    ``SUPERSEDED`` marks an active version a newer one replaced: it is no longer
    recalled, but a recall "as of" a time before the replacement still sees it.
    """

    ACTIVE = "active"
    CANDIDATE = "candidate"
    RETIRED = "retired"
    SUPERSEDED = "superseded"
