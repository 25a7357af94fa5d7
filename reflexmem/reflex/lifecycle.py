"""The skill lifecycle: which moves are legal and what evidence each move needs (pure).

```
candidate --evaluation ok--> validating --replay ok--> limited --shadow ok + rollout ok--> active
    |                            |                        |                                 |
    +--evaluation failed--> rejected <--replay failed--+  +--shadow/rollout failed--> rejected
                                                          +--drift/audit failed--> quarantined
active --drift/audit failed--> quarantined --evaluation ok--> validating (revalidation)
active --superseded--> retired          quarantined --review / superseded--> retired
```
A move is legal only if it is in `MOVES` and the evidence has every kind the move needs
with the verdict it needs (promotions need passing evidence, rejections and
quarantines failing evidence). Evidence of an evaluation or a replay must report no
overlap with the skill's source experiences: a skill is never judged on what it was
learned from. `check_move` explains a refusal: the legal moves from the current state
and, for a skip, the states skipped on the shortest legal path.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from reflexmem.ledger.reflex_enums import SkillState

S = SkillState


class EvidenceKind(StrEnum):
    """What was measured to justify a move."""

    EVALUATION = "evaluation"  # independent evaluation on held-apart labelled inputs
    REPLAY = "replay"  # replay of past inputs (episodes) not used to build the skill
    SHADOW = "shadow"  # outputs beside the active version, compared, never acted on
    ROLLOUT = "rollout"  # limited, sticky rollout: counts and outcomes per arm
    AUDIT = "audit"  # a sample audit of decisions against independent answers
    DRIFT = "drift"  # outcome / input distribution against the validation window
    OUTCOME = "outcome"  # realized returns of held-out decisions, let through vs held
    SUPERSEDED = "superseded"  # another version became active
    REVIEW = "review"  # a person's decision


@dataclass(frozen=True)
class Evidence:
    """One measurement: its kind, its verdict, its figures, and where the run is recorded."""

    kind: EvidenceKind
    passed: bool
    metrics: Mapping[str, float] = field(default_factory=dict)
    detail: Mapping[str, Any] = field(default_factory=dict)
    run_id: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The evidence as stored on the transition row."""
        return {
            "kind": str(self.kind),
            "passed": self.passed,
            "metrics": {k: float(v) for k, v in self.metrics.items()},
            "detail": dict(self.detail),
            "run_id": self.run_id,
        }


@dataclass(frozen=True)
class Need:
    """Evidence a move needs: every kind in `all_of` (and one of `any_of`) with `passed`.

    `instead`, when set, is a second complete set that satisfies the move on its own:
    a learned check becomes active on outcome evidence alone, a policy check on shadow
    and rollout (`reflexmem.operations.skill_lifecycle`); a check made from an outcome
    rule takes every step on outcomes (`reflexmem.reflex.rule_checks`). Passing outcome
    evidence is a gain; for `active` its interval must exclude zero.
    """

    passed: bool
    all_of: tuple[EvidenceKind, ...] = ()
    any_of: tuple[EvidenceKind, ...] = ()
    instead: tuple[EvidenceKind, ...] = ()


K = EvidenceKind
MOVES: Mapping[tuple[SkillState, SkillState], Need] = {
    (S.CANDIDATE, S.VALIDATING): Need(True, all_of=(K.EVALUATION,), instead=(K.OUTCOME,)),
    (S.CANDIDATE, S.REJECTED): Need(False, any_of=(K.EVALUATION, K.OUTCOME, K.REVIEW)),
    (S.VALIDATING, S.LIMITED): Need(True, all_of=(K.REPLAY,), instead=(K.OUTCOME,)),
    (S.VALIDATING, S.REJECTED): Need(False, any_of=(K.REPLAY, K.EVALUATION, K.OUTCOME, K.REVIEW)),
    (S.LIMITED, S.ACTIVE): Need(True, all_of=(K.SHADOW, K.ROLLOUT), instead=(K.OUTCOME,)),
    (S.LIMITED, S.REJECTED): Need(False, any_of=(K.SHADOW, K.ROLLOUT, K.OUTCOME, K.REVIEW)),
    (S.LIMITED, S.QUARANTINED): Need(False, any_of=(K.DRIFT, K.AUDIT, K.OUTCOME)),
    (S.ACTIVE, S.QUARANTINED): Need(False, any_of=(K.DRIFT, K.AUDIT, K.OUTCOME)),
    (S.ACTIVE, S.RETIRED): Need(True, any_of=(K.SUPERSEDED, K.REVIEW)),
    (S.QUARANTINED, S.VALIDATING): Need(True, all_of=(K.EVALUATION,)),
    (S.QUARANTINED, S.RETIRED): Need(True, any_of=(K.SUPERSEDED, K.REVIEW)),
}
"""Every legal move; anything else is refused."""

REQUIRED_METRICS: Mapping[EvidenceKind, tuple[str, ...]] = {
    K.EVALUATION: ("n", "accuracy", "source_overlap"),
    K.REPLAY: ("n", "accuracy", "source_overlap"),
    K.SHADOW: ("n", "agreement"),
    K.ROLLOUT: ("treated", "control"),
    K.DRIFT: ("n_recent",),
    K.OUTCOME: ("n_passed", "n_held", "effect"),
}
"""Figures a piece of evidence must carry for a promotion to rely on it (outcome evidence
carries `ci_low` and `ci_high` once its decisions span enough blocks for an interval)."""

USABLE_STATES = frozenset({S.LIMITED, S.ACTIVE})
"""States in which a version may decide routed inputs (limited: in its rollout only)."""


class LifecycleError(ValueError):
    """A move was refused; the message says why and what would be legal."""


def legal_targets(state: SkillState | None) -> tuple[SkillState, ...]:
    """States reachable in one move from `state` (None: not registered yet)."""
    if state is None:
        return (S.CANDIDATE,)
    return tuple(to for (frm, to) in MOVES if frm == state)


def shortest_path(start: SkillState, goal: SkillState) -> list[SkillState] | None:
    """The shortest chain of legal moves from `start` to `goal`, or None."""
    seen = {start: [start]}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        if here == goal:
            return seen[here]
        for nxt in legal_targets(here):
            if nxt not in seen:
                seen[nxt] = [*seen[here], nxt]
                queue.append(nxt)
    return None


def _illegal(name: str, frm: SkillState, to: SkillState) -> LifecycleError:
    targets = ", ".join(legal_targets(frm)) or "none (terminal state)"
    message = f"{name}: {frm} -> {to} is not a legal move (legal from {frm}: {targets})"
    path = shortest_path(frm, to)
    if path is not None and len(path) > 2:
        skipped = " -> ".join(path[1:-1])
        message += f"; it would skip {skipped}"
    return LifecycleError(message)


def check_move(
    name: str,
    frm: SkillState,
    to: SkillState,
    evidence: Sequence[Evidence],
    *,
    quality_floor: float,
) -> Need:
    """Raise `LifecycleError` unless `frm -> to` is legal with this evidence."""
    need = MOVES.get((frm, to))
    if need is None:
        raise _illegal(name, frm, to)
    matching = [e for e in evidence if e.passed == need.passed]
    kinds = {e.kind for e in matching}
    verdict = "passing" if need.passed else "failing"
    got = ", ".join(f"{e.kind}({'passed' if e.passed else 'failed'})" for e in evidence) or "none"
    missing = [k for k in need.all_of if k not in kinds]
    if missing and need.instead and all(k in kinds for k in need.instead):
        missing = []
    if missing or (need.any_of and not kinds & set(need.any_of)):
        wanted = " and ".join(need.all_of) if need.all_of else " or ".join(need.any_of)
        if need.instead:
            wanted += f" (or {' and '.join(need.instead)})"
        raise LifecycleError(f"{name}: {frm} -> {to} needs {verdict} {wanted} evidence; got {got}")
    for item in matching if need.passed else ():
        keys = REQUIRED_METRICS.get(item.kind, ())
        absent = [k for k in keys if k not in item.metrics]
        if absent:
            raise LifecycleError(f"{name}: {item.kind} evidence lacks metrics {absent}")
        if item.kind in (K.EVALUATION, K.REPLAY):
            if item.metrics["source_overlap"] > 0:
                raise LifecycleError(
                    f"{name}: {item.kind} evidence overlaps the skill's source experiences "
                    f"({item.metrics['source_overlap']:g} inputs); judge it on held-apart inputs"
                )
            if item.metrics["n"] <= 0:
                raise LifecycleError(f"{name}: {item.kind} evidence covers no inputs")
        if item.kind == K.EVALUATION and item.metrics["accuracy"] < quality_floor:
            raise LifecycleError(
                f"{name}: evaluation accuracy {item.metrics['accuracy']:.3f} is below the "
                f"quality floor {quality_floor:.3f}, so it cannot pass"
            )
        if item.kind == K.OUTCOME and not item.metrics["effect"] > 0:
            raise LifecycleError(
                f"{name}: outcome evidence passes only when the check's effect on realized "
                f"returns is a gain (effect {item.metrics['effect']:+.4f})"
            )
        low = item.metrics.get("ci_low")
        if item.kind == K.OUTCOME and to == S.ACTIVE and not (low is not None and low > 0):
            shown = "none" if low is None else f"{low:+.4f}"
            raise LifecycleError(
                f"{name}: outcome evidence makes a check active only when the interval of its "
                f"effect on realized returns excludes zero on the gaining side (low {shown})"
            )
        if item.kind == K.ROLLOUT and min(item.metrics["treated"], item.metrics["control"]) <= 0:
            raise LifecycleError(f"{name}: rollout evidence needs episodes in both arms")
    return need
