"""REFLEX vocabularies (docs/design.md §10): layers, episode states, failures, skill lifecycle.

Each becomes a CHECK constraint in migration 0006, so a row can never claim a layer,
a status or a lifecycle state the code does not know.
"""

from __future__ import annotations

from enum import StrEnum


class Layer(StrEnum):
    """Decision layers, cheapest first: the router escalates upward from L0 to L3."""

    L0 = "L0"  # verified code or rules
    L1 = "L1"  # bounded choice over a fixed option set
    L2 = "L2"  # skilled procedure: templates and examples
    L3 = "L3"  # model deliberation

    @property
    def rank(self) -> int:
        """0 for L0 ... 3 for L3."""
        return int(self.value[1])


SKILL_LAYERS = (Layer.L0, Layer.L1, Layer.L2)
"""Layers a skill can occupy; L3 is the model itself, never a skill."""


class EpisodeStatus(StrEnum):
    """What became of an episode; `hold` and `request` are answers, never guesses."""

    SUCCESS = "success"
    FAILURE = "failure"
    HOLD = "hold"  # nothing acted: no model, missing permission, review, low confidence
    REQUEST = "request"  # nothing acted: information is missing, named in the result


class FailureKind(StrEnum):
    """Why a failed episode failed, so causes can be counted apart."""

    INPUT_INTERPRETATION = "input_interpretation"  # the input was read or mapped wrongly
    POLICY = "policy"  # the decision was wrong against the independent answer
    EXECUTION = "execution"  # the tool failed
    VERIFICATION = "verification"  # the post-condition did not hold


class SkillState(StrEnum):
    """A skill version's lifecycle; see `reflexmem.reflex.lifecycle` for the legal moves."""

    CANDIDATE = "candidate"
    VALIDATING = "validating"
    LIMITED = "limited"
    ACTIVE = "active"
    QUARANTINED = "quarantined"
    REJECTED = "rejected"  # terminal: failed its evaluation
    RETIRED = "retired"  # terminal: superseded or withdrawn


class ReviewKind(StrEnum):
    """Why an input went to the review queue instead of being guessed at."""

    NEW_INPUT_FORMAT = "new_input_format"
    ENVIRONMENT_CHANGE = "environment_change"
    UNKNOWN_TASK_FAMILY = "unknown_task_family"


class ReviewStatus(StrEnum):
    """Open until a reviewer resolves it."""

    OPEN = "open"
    RESOLVED = "resolved"


class ReviewResolution(StrEnum):
    """A reviewer's verdict on a queued input."""

    ACCEPTED = "accepted"  # a legitimate new format / environment: a skill should follow
    REJECTED = "rejected"  # malformed or unwanted input
    DUPLICATE = "duplicate"  # already covered by another item


class ToolCallStatus(StrEnum):
    """State of one idempotency key in the `tool_calls` ledger."""

    PENDING = "pending"  # claimed, the effect may be under way
    DONE = "done"  # the effect happened and its result is stored
    FAILED = "failed"  # the handler raised; the key may be claimed again
    UNVERIFIED = "unverified"  # the effect happened but its post-condition failed
