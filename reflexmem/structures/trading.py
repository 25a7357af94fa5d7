"""The trading environment of structure G: the user's roles replayed on their own decisions.

Beside experiment B's office environment (`office.py`), this is the one a user's agents
live in. Its modules are the declared roles; each handles one sub-goal,
`decide_<role>`, and pins that role's usable pre-decision checks (real rows of
`skill_versions`, policy and learned) next to the role's own decision skill, which
proceeds unless a check stops it. Its knowledge scope is the role's memory namespace
(`memory/<role>`, the entries of `role:<role>` in the pinned index).

An **edge** `source -> target` carries a closed contract of the source's outputs to the
target *before* the target decides: when a target decision is at hand the deciding
module pulls from every edge whose trigger fires, the source is activated and sends one
message. The field that matters is `checks`: the target's decision then also goes
through the source's pinned checks (the risk role's "avoid this symbol" applied to a
momentum decision). A merged module runs every check it holds on every decision it
handles. An edge without `checks` in its fields carries nothing a check reads.

A task is one matured decision, replayed: its role's module decides proceed or hold
(an escalation the gate cannot settle holds too, as the production gate holds it with
no model); the independent verifier reads the realized return of the decision's own
position, which no module can read, and credits what proceeded with it (`value`).
A check applies only to decisions made inside its validity period, exactly as the
production gate applies it (`reflex.gate`), so no check judges a decision from before
it existed. The whole task set is replayed at once with numpy (`replay_batch`): the
stop masks of every check are computed once, with the production procedure
(`reflex.procedures.decide_frame`), when the environment is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from reflexmem.reflex.conditions import ROW, compile_all
from reflexmem.reflex.procedures import decide_frame
from reflexmem.reflex.snapshot import PinnedSkill
from reflexmem.reflex.trading import PROCEED
from reflexmem.structures.model import Structure, domain
from reflexmem.structures.refusals import Refusal
from reflexmem.structures.runtime import EpisodeResult, Task

VERIFIER = "trading-outcome-v1"
TRUTH_NAMESPACE = "realized-outcomes"
SHARED_FIELD = "checks"
"""The contract field that carries a module's pinned checks to the module it briefs."""
HOLD, PROCEED_ANSWER = "hold", PROCEED


def subgoal(role: str) -> str:
    """The sub-goal a role's decision is: `decide_<role>`."""
    return "decide_" + "".join(ch if ch.isalnum() else "_" for ch in role.lower())


def module_id(role: str) -> str:
    """A role's module ID (structure names are lower-case)."""
    return "".join(ch if ch.isalnum() or ch in "_-" else "-" for ch in role.lower())[:64]


def namespace(role: str) -> str:
    """A role's knowledge scope in a structure (its memory namespace `role:<role>`)."""
    return f"memory/{module_id(role)}"


def decide_skill(role: str) -> str:
    """The skill ID of a role's own decision (proceed unless a check stops it)."""
    return f"{module_id(role)}-decide"


def skill_role(skill: PinnedSkill) -> str | None:
    """The role a check belongs to: its trigger's `role_id` condition, else its owner."""
    for cond in skill.spec.trigger:
        if cond.get("field") == "role_id" and "equals" in cond:
            return str(cond["equals"])
    owner = skill.spec.raw.get("owner")
    return None if owner is None else str(owner)


def applied_checks(
    s: Structure, goal: str, versions: Mapping[str, str] | None = None
) -> tuple[list[str], dict[str, list[str]]]:
    """The versions a decision of sub-goal `goal` goes through under `s`.

    (the handling module's pinned versions, edge ID -> the versions its source lends);
    empty when no module handles the goal. The replay and the production gate
    (`trading_gate`) both read this, so a structure means the same in both.
    """
    pins = dict(versions or s.pins.versions)
    mid = s.handler_of.get(goal)
    if mid is None:
        return [], {}
    own = [pins[k] for k in s.module_map[mid].skills]
    lent = {
        e.id: [pins[k] for k in s.module_map[e.source].skills]
        for e in s.edges
        if e.target == mid and e.trigger.fires((goal,)) and SHARED_FIELD in e.fields
    }
    return own, lent


@dataclass(frozen=True)
class CheckMask:
    """What one check version says about every decision of the table."""

    key: str
    role: str
    stop: np.ndarray
    escalate: np.ndarray


def check_masks(text: pl.DataFrame, skills: Sequence[PinnedSkill]) -> dict[str, CheckMask]:
    """Each check's stop and escalation masks over `text` (the gate's text columns).

    The decision is judged as if it were the check's own role's (`role_id` replaced), so
    a check can be lent to another role over an edge; outside the check's validity
    period, its trigger or its rejection conditions it says nothing.
    """
    out: dict[str, CheckMask] = {}
    for skill in skills:
        role = skill_role(skill)
        if role is None:
            continue
        frame = text.with_columns(pl.lit(role).alias("role_id"))
        start, end = skill.spec.valid_period()
        period = pl.lit(True)
        if start is not None:
            period = period & (pl.col("decided_at") >= pl.lit(start.isoformat()))
        if end is not None:
            period = period & (pl.col("decided_at") < pl.lit(end.isoformat()))
        scope = frame.select((compile_all(skill.spec.trigger) & period).alias("s"))["s"]
        decided = decide_frame(skill.spec, frame).sort(ROW)
        choice = decided["choice"]
        usable = scope.fill_null(False).to_numpy() & ~decided["refused"].fill_null(False).to_numpy()
        chosen = choice.is_not_null().to_numpy()
        stop = usable & chosen & (choice.fill_null(PROCEED) != PROCEED).to_numpy()
        out[skill.key] = CheckMask(skill.key, role, stop, usable & ~chosen)
    return out


class TradingEnvironment:
    """Matured decisions, the checks' masks, the memory index and the verifier's returns."""

    name = "trading"
    verifier_id = VERIFIER

    def __init__(
        self,
        decisions: pl.DataFrame,
        masks: Mapping[str, CheckMask],
        *,
        index_version: str,
        entries: Mapping[str, int] | None = None,
    ) -> None:
        """`decisions`: `decision_id`, `role_id`, `decided_at_ts`, `realized_return` rows."""
        self.ids = decisions["decision_id"].cast(pl.String).to_list()
        self.roles = decisions["role_id"].cast(pl.String).to_numpy()
        self.decided_at = decisions["decided_at_ts"]
        self.returns = decisions["realized_return"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        self.row_of = {d: i for i, d in enumerate(self.ids)}
        self.masks = dict(masks)
        self.index_version = index_version
        self.entries = dict(entries or {})

    def roles_present(self) -> tuple[str, ...]:
        """Roles with at least one decision, sorted."""
        return tuple(sorted({str(r) for r in self.roles}))

    def tasks(self) -> tuple[Task, ...]:
        """One task per settled decision, in decision-time order (ties by ID)."""
        order = np.lexsort((np.array(self.ids, dtype=object), self.decided_at.to_numpy()))
        out = []
        for i in order:
            if not np.isfinite(self.returns[i]):
                continue
            role = str(self.roles[i])
            out.append(
                Task(
                    self.ids[i],
                    role,
                    frozenset({subgoal(role)}),
                    ((subgoal(role), self.ids[i]),),
                    str(self.decided_at[int(i)].date()),
                )
            )
        return tuple(out)

    def _context(self, module_knowledge: Sequence[str]) -> int:
        return sum(n for ns, n in self.entries.items() for k in module_knowledge if ns == k)

    def replay_batch(
        self,
        structure: Structure,
        tasks: Sequence[Task],
        *,
        skill_versions: Mapping[str, str] | None = None,
        index_version: str | None = None,
    ) -> tuple[tuple[EpisodeResult, ...], tuple[Refusal, ...]]:
        """Every task under `structure`, in the order given; no refusals can arise."""
        if index_version is not None and index_version != self.index_version:
            raise KeyError(f"index {index_version!r} is not the environment's {self.index_version}")
        versions = dict(skill_versions or structure.pins.versions)
        rows = np.array([self.row_of[t.task_id] for t in tasks], dtype=np.int64)
        goals = [next(iter(t.subgoals)) for t in tasks]
        results: list[EpisodeResult | None] = [None] * len(tasks)
        by_goal: dict[str, list[int]] = {}
        for i, g in enumerate(goals):
            by_goal.setdefault(g, []).append(i)
        for g, where in by_goal.items():
            at = np.array(where, dtype=np.int64)
            for i, res in zip(where, self._decide(structure, versions, g, rows[at]), strict=True):
                results[i] = res
        return tuple(r for r in results if r is not None), ()

    def _decide(
        self, s: Structure, versions: Mapping[str, str], goal: str, rows: np.ndarray
    ) -> list[EpisodeResult]:
        ret = self.returns[rows]
        ids = [self.ids[i] for i in rows]
        fams = [str(self.roles[i]) for i in rows]
        mid = s.handler_of.get(goal)
        if mid is None:
            reason = f"no module handles {goal!r}: sent to {s.fallback}"
            return [
                _result(d, f, goal, "hold", None, (), (), (), (), 0, {}, 0, True, 0.0, reason)
                for d, f in zip(ids, fams, strict=True)
            ]
        module = s.module_map[mid]
        edges = [e for e in s.edges if e.target == mid and e.trigger.fires((goal,))]
        sources = [s.module_map[e.source] for e in edges]
        mine, lends = applied_checks(s, goal, versions)
        own = [k for k in mine if k in self.masks]
        lent = {eid: [k for k in keys if k in self.masks] for eid, keys in lends.items()}
        n = len(rows)
        own_stop, esc = np.zeros(n, bool), np.zeros(n, bool)
        for key in own:
            own_stop |= self.masks[key].stop[rows]
            esc |= self.masks[key].escalate[rows]
        lent_stop = {}
        for eid, keys in lent.items():
            stop = np.zeros(n, bool)
            for key in keys:
                stop |= self.masks[key].stop[rows]
                esc |= self.masks[key].escalate[rows]
            lent_stop[eid] = stop
        stopped = own_stop.copy()
        for stop in lent_stop.values():
            stopped |= stop
        esc &= ~stopped
        held = stopped | esc
        verified = np.isfinite(ret)
        value = np.where(held | ~verified, 0.0, np.nan_to_num(ret))
        checks = len(own) + sum(len(v) for v in lent.values())
        activated = (mid, *(src.id for src in sources if src.id != mid))
        areas = {domain(k) for k in module.knowledge}
        unneeded = len({domain(k) for src in sources for k in src.knowledge} - areas)
        context = self._context(module.knowledge) + sum(
            self._context(src.knowledge) for src in sources
        )
        runs = {module.runtime: 1}
        if checks:
            runs["function"] = runs.get("function", 0) + checks
        fired = tuple(e.id for e in edges)
        messages = tuple(lent)
        reads = tuple((mid, k) for k in module.knowledge)
        out = []
        for j in range(n):
            used = tuple(eid for eid, stop in lent_stop.items() if stop[j] and not own_stop[j])
            outcome = "success" if verified[j] else "hold"
            out.append(
                _result(
                    ids[j],
                    fams[j],
                    goal,
                    outcome,
                    HOLD if held[j] else PROCEED_ANSWER,
                    activated,
                    fired,
                    messages,
                    used,
                    unneeded,
                    runs,
                    context,
                    bool(esc[j]) or not verified[j],
                    float(value[j]),
                    "",
                    reads,
                )
            )
        return out


def _result(
    task_id: str,
    family: str,
    goal: str,
    outcome: Any,
    answer: str | None,
    activated: tuple[str, ...],
    fired: tuple[str, ...],
    messages: tuple[str, ...],
    consumed: tuple[str, ...],
    unneeded: int,
    runs: Mapping[str, int],
    context: int,
    escalated: bool,
    value: float,
    reason: str,
    reads: tuple[tuple[str, str], ...] = (),
) -> EpisodeResult:
    answered = answer is not None
    failure = "verification" if answered else "execution"
    return EpisodeResult(
        task_id=task_id,
        family=family,
        subgoals=(goal,),
        outcome=outcome,
        failure_type=None if outcome == "success" else failure,
        answers={goal: answer} if answered else {},
        verdicts={goal: outcome == "success"} if answered else {},
        activated=activated,
        needed=activated[:1],
        fired=fired,
        messages=messages,
        consumed=consumed,
        holds=() if answered else (("", goal, reason, False),),
        reads=reads,
        contributed=reads,
        unneeded_areas=unneeded,
        runs=tuple(sorted(runs.items())),
        context_entries=context,
        refused_messages=0,
        tool_calls=0,
        escalated=escalated,
        value=value,
    )
