"""The four-layer router: the cheapest layer that may and can decide, else upward, else hold.

For one task and one pinned snapshot of skill versions:

1. **Task family.** No version of the family is registered: a review item
   (`unknown_task_family`) and L3.
2. **Environment.** No version was made for the task's environment version: a review
   item (`environment_change`) and L3; a skill validated in another environment is
   never applied to this one.
3. **Input contract.** The observation is checked against the JSON Schema of every
   known version of the family in this environment. If it satisfies none and the only
   problems are absent required fields, the episode is a `request` naming them (no
   layer guesses around missing information). Any other mismatch is a new input
   format: a review item and L3.
4. **Skills, L0 -> L1 -> L2.** Usable versions (active; limited ones only for
   account/symbol pairs inside their sticky rollout, where they stand in for the
   active version of the same skill) whose contract, trigger and validity period fit
   decide in layer order. A skill with no answer, a rejection condition that holds or a
   confidence below its floor escalates; its `escalation_target` skips lower layers.
5. **L3.** With no model configured the episode is a `hold` (`no_model`); a model
   answer below `l3_floor`, one that never validates, or one that asked for tools
   (refused by the executor) is a `hold` too. Nothing is simulated.

`route` decides only; `reflexmem.reflex.episode.act` runs the chosen action through the
common executor and builds the experience record.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jsonschema import Draft202012Validator

from reflexmem.ledger.reflex_enums import EpisodeStatus, Layer, ReviewKind, SkillState
from reflexmem.reflex.deliberate import Deliberation, Deliberator
from reflexmem.reflex.procedures import decide_one
from reflexmem.reflex.rollout import in_rollout
from reflexmem.reflex.skills import DEFAULT_CONFIDENCE_FLOOR
from reflexmem.reflex.snapshot import PinnedSkill, SkillSnapshot

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_WHOLE = re.compile(r"^\{([A-Za-z_][A-Za-z0-9_]*)\}$")


@dataclass(frozen=True)
class Task:
    """One routed input: what is asked, in which family and environment, for whom."""

    episode_id: str
    task_family: str
    environment_version: str
    observation: Mapping[str, Any]
    goal: str = ""
    agent_id: str = "reflex-router"
    parent_id: str | None = None
    root_id: str | None = None
    decision_id: str | None = None
    account: str | None = None
    symbol: str | None = None
    source_ref: str | None = None
    structure_id: str | None = None
    structure_version: int | None = None
    module_id: str | None = None
    edge_id: str | None = None
    expected: str | None = None
    """The independent answer, when known at routing time (feedback, never an input)."""
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


@dataclass(frozen=True)
class Step:
    """One layer's turn: decided, escalated or skipped, and why."""

    layer: Layer
    skill: str | None
    outcome: str
    reason: str
    choice: str | None = None
    confidence: float | None = None

    def as_json(self) -> dict[str, Any]:
        """The step as stored in `episodes.escalations`."""
        return {
            "layer": str(self.layer),
            "skill": self.skill,
            "outcome": self.outcome,
            "reason": self.reason,
            "choice": self.choice,
            "confidence": self.confidence,
        }


@dataclass(frozen=True)
class ReviewRequest:
    """A cause for the review queue, as the router found it."""

    kind: ReviewKind
    task_family: str
    fingerprint: str
    environment_version: str
    detail: Mapping[str, Any]


@dataclass(frozen=True)
class Routing:
    """What the router concluded for one task (before anything was executed)."""

    task: Task
    layer: Layer | None
    status: EpisodeStatus | None
    """None when a choice was made and is to be acted on; else `hold` or `request`."""
    status_reason: str | None = None
    skill: PinnedSkill | None = None
    choice: str | None = None
    confidence: float | None = None
    rationale: str = ""
    tool: str | None = None
    arguments: dict[str, Any] | None = None
    idempotency_key: str | None = None
    missing: tuple[str, ...] = ()
    trail: tuple[Step, ...] = ()
    reviews: tuple[ReviewRequest, ...] = ()
    deliberation: Deliberation | None = None


def fingerprint(*parts: object) -> str:
    """A stable SHA-256 name for a review cause."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def input_shape(observation: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The observation's fields and JSON types: what "input format" means here."""
    return sorted((str(k), type(v).__name__) for k, v in observation.items())


def contract_problems(schema: Mapping[str, Any], observation: Mapping[str, Any]) -> list[str]:
    """Every way `observation` breaks `schema`, as `path: message`, in path order."""
    errors = sorted(
        Draft202012Validator(schema).iter_errors(dict(observation)), key=lambda e: list(e.path)
    )
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in errors]


def missing_required(schema: Mapping[str, Any], observation: Mapping[str, Any]) -> list[str]:
    """Top-level required fields absent from `observation`, if those are the only problems."""
    errors = list(Draft202012Validator(schema).iter_errors(dict(observation)))
    if not errors or any(e.validator != "required" or list(e.path) for e in errors):
        return []
    return [str(name) for name in schema.get("required", []) if name not in observation]


def fill(template: object, values: Mapping[str, Any], missing: set[str]) -> Any:
    """Fill `{name}` placeholders; a whole-string placeholder keeps the value's type."""
    if isinstance(template, Mapping):
        return {k: fill(v, values, missing) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, values, missing) for v in template]
    if not isinstance(template, str):
        return template
    whole = _WHOLE.match(template)
    if whole:
        name = whole.group(1)
        if values.get(name) is None:
            missing.add(name)
        return values.get(name)

    def one(match: re.Match[str]) -> str:
        value = values.get(match.group(1))
        if value is None:
            missing.add(match.group(1))
            return ""
        return str(value)

    return _PLACEHOLDER.sub(one, template)


def _in_period(skill: PinnedSkill, at: datetime) -> bool:
    start, end = skill.spec.valid_period()
    return (start is None or at >= start) and (end is None or at < end)


def _deciders(pool: Sequence[PinnedSkill], task: Task) -> list[PinnedSkill]:
    """Per skill ID the version that decides this task, ordered by layer then skill ID.

    A limited version inside its rollout stands in for the active one.
    """
    chosen: dict[str, PinnedSkill] = {}
    for skill in pool:
        sid = skill.spec.skill_id
        if skill.state == SkillState.LIMITED:
            fraction = skill.rollout_fraction or 0.0
            if in_rollout(task.account, task.symbol, skill.key, fraction):
                chosen[sid] = skill
        elif skill.state == SkillState.ACTIVE and chosen.get(sid) is None:
            chosen[sid] = skill
    return sorted(chosen.values(), key=lambda s: (s.spec.layer.rank, s.spec.skill_id))


@dataclass
class _Walk:
    task: Task
    trail: list[Step] = field(default_factory=list)
    reviews: list[ReviewRequest] = field(default_factory=list)

    def review(self, kind: ReviewKind, print_: str, **detail: Any) -> None:
        task = self.task
        self.reviews.append(
            ReviewRequest(kind, task.task_family, print_, task.environment_version, detail)
        )

    def done(self, **kwargs: Any) -> Routing:
        return Routing(
            task=self.task, trail=tuple(self.trail), reviews=tuple(self.reviews), **kwargs
        )


def route(
    task: Task,
    snapshot: SkillSnapshot,
    *,
    deliberator: Deliberator | None = None,
    l3_floor: float = DEFAULT_CONFIDENCE_FLOOR[Layer.L3],
) -> Routing:
    """Decide `task` against `snapshot` (see the module docstring for the order)."""
    walk = _Walk(task)
    known = [s for s in snapshot.family(task.task_family) if s.state != SkillState.REJECTED]
    options = sorted({o for s in known for o in s.spec.options}) or None
    if not known:
        walk.review(ReviewKind.UNKNOWN_TASK_FAMILY, fingerprint(task.task_family))
        return _l3(walk, deliberator, None, l3_floor, "no skill knows this task family")
    here = [s for s in known if s.spec.environment_version == task.environment_version]
    if not here:
        seen = sorted({s.spec.environment_version for s in known})
        walk.review(
            ReviewKind.ENVIRONMENT_CHANGE, fingerprint(task.environment_version), known=seen
        )
        return _l3(walk, deliberator, options, l3_floor, f"environment not in {seen}")
    fits = [s for s in here if not contract_problems(s.spec.input_contract, task.observation)]
    if not fits:
        gaps = [missing_required(s.spec.input_contract, task.observation) for s in here]
        gaps = [g for g in gaps if g]
        if gaps:
            need = min(gaps, key=len)
            walk.trail.append(Step(Layer.L0, None, "request", f"missing fields {need}"))
            return walk.done(
                layer=None,
                status=EpisodeStatus.REQUEST,
                status_reason="missing_information",
                missing=tuple(need),
                rationale=f"the input lacks required fields {need}",
            )
        shape = input_shape(task.observation)
        problems = contract_problems(here[0].spec.input_contract, task.observation)[:5]
        walk.review(ReviewKind.NEW_INPUT_FORMAT, fingerprint(shape), shape=shape, problems=problems)
        return _l3(walk, deliberator, options, l3_floor, "input matches no known contract")
    floor_rank = 0
    for skill in _deciders([s for s in fits if _in_period(s, task.at)], task):
        spec = skill.spec
        if spec.layer.rank < floor_rank:
            walk.trail.append(Step(spec.layer, skill.key, "skipped", "below escalation target"))
            continue
        choice, confidence, refused = decide_one(spec, task.observation)
        reason = ""
        if refused:
            reason = "a rejection condition holds"
        elif choice is None:
            reason = "no answer for this input"
        elif confidence < spec.confidence_floor:
            reason = f"confidence {confidence:.2f} below floor {spec.confidence_floor:.2f}"
        if reason:
            walk.trail.append(Step(spec.layer, skill.key, "escalated", reason, choice, confidence))
            floor_rank = max(floor_rank, spec.escalation_target.rank)
            continue
        walk.trail.append(Step(spec.layer, skill.key, "decided", "confident", choice, confidence))
        return _act_plan(walk, skill, str(choice), confidence)
    return _l3(walk, deliberator, options, l3_floor, "no skill decided")


def _act_plan(walk: _Walk, skill: PinnedSkill, choice: str, confidence: float) -> Routing:
    spec, task = skill.spec, walk.task
    common = {"layer": spec.layer, "skill": skill, "choice": choice, "confidence": confidence}
    rationale = f"{skill.key} chose {choice} with confidence {confidence:.2f}"
    verdict = spec.verdicts.get(choice)
    if verdict is not None:  # the skill's answer is to stop: hold, or ask for what is missing
        note = fill(verdict.get("note", ""), task.observation, set())
        return walk.done(
            status=EpisodeStatus(verdict["status"]),
            status_reason=str(verdict["reason"]),
            missing=tuple(verdict.get("missing", ())),
            rationale=f"{rationale}: {note}" if note else rationale,
            **common,
        )
    action = spec.action
    if action is None:
        return walk.done(status=None, rationale=rationale, **common)
    values = {
        **task.observation,
        "choice": choice,
        "episode_id": task.episode_id,
        "skill_id": spec.skill_id,
        "version": spec.version,
    }
    missing: set[str] = set()
    arguments = fill(action["arguments"], values, missing)
    template = spec.idempotency_template
    key = fill(template, values, missing) if template else f"{spec.skill_id}:{task.episode_id}"
    if missing:
        return walk.done(
            status=EpisodeStatus.REQUEST,
            status_reason="missing_information",
            missing=tuple(sorted(missing)),
            rationale=f"{rationale}; arguments lack {sorted(missing)}",
            **common,
        )
    return walk.done(
        status=None,
        rationale=rationale,
        tool=str(action["tool"]),
        arguments=arguments,
        idempotency_key=str(key),
        **common,
    )


def _l3(
    walk: _Walk,
    deliberator: Deliberator | None,
    options: Sequence[str] | None,
    floor: float,
    why: str,
) -> Routing:
    task = walk.task
    if deliberator is None:
        walk.trail.append(Step(Layer.L3, None, "hold", f"{why}; no model is configured"))
        return walk.done(
            layer=Layer.L3,
            status=EpisodeStatus.HOLD,
            status_reason="no_model",
            rationale=f"{why}; no model is configured, so nothing is decided",
        )
    asked = {
        "task_family": task.task_family,
        "environment_version": task.environment_version,
        "goal": task.goal,
        "observation": dict(task.observation),
    }
    result = deliberator.deliberate(asked, options, [s.as_json() for s in walk.trail])
    answer = result.answer
    if answer is None:
        reason = "missing_permission" if result.refused_requests else "model_failed"
        detail = result.errors[-1] if result.errors else "no answer"
        walk.trail.append(Step(Layer.L3, None, "hold", detail))
        return walk.done(
            layer=Layer.L3,
            status=EpisodeStatus.HOLD,
            status_reason=reason,
            rationale=f"{why}; the model gave no usable answer: {detail}",
            deliberation=result,
        )
    if answer.confidence < floor:
        note = f"model confidence {answer.confidence:.2f} below floor {floor:.2f}"
        walk.trail.append(Step(Layer.L3, None, "hold", note, answer.choice, answer.confidence))
        return walk.done(
            layer=Layer.L3,
            status=EpisodeStatus.HOLD,
            status_reason="low_confidence",
            choice=answer.choice,
            confidence=answer.confidence,
            rationale=answer.rationale,
            deliberation=result,
        )
    walk.trail.append(Step(Layer.L3, None, "decided", "model", answer.choice, answer.confidence))
    return walk.done(
        layer=Layer.L3,
        status=None,
        choice=answer.choice,
        confidence=answer.confidence,
        rationale=answer.rationale,
        deliberation=result,
    )
