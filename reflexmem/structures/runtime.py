"""One episode under a structure: route, activate, run modules, broker, verify.

The router picks the module that handles each sub-goal of the goal, then follows every
edge whose trigger fires for that goal: what it reaches is activated (its knowledge
areas are loaded) whether or not it is needed, which is what makes an unconditional
edge expensive. Modules run their pinned skills through the common tool executor
under their own identity, read only their scoped memory, and talk only through the
broker; a module that lacks an input waits for a message and runs again when one
arrives. The independent verifier then checks every answer against ground truth only
it can read. A sub-goal nobody could answer goes to the structure's fallback (a hold,
escalated for review): it is never guessed and never counted as solved.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from reflexmem.executor import Caller, Effect, ToolExecutor, ToolResult
from reflexmem.structures.isolation import (
    Channel,
    Message,
    ModuleMemory,
    NamespacedStore,
    ScopedMemory,
)
from reflexmem.structures.model import Structure
from reflexmem.structures.refusals import IsolationRefused, RefusalLog

Outcome = Literal["success", "failure", "hold"]


@dataclass(frozen=True)
class Task:
    """One goal: its task family, sub-goals, the input reference of each, and its tags."""

    task_id: str
    family: str
    subgoals: frozenset[str]
    refs: tuple[tuple[str, str], ...] = ()
    period: str = ""
    tags: frozenset[str] = frozenset()

    def ref(self, subgoal: str) -> str | None:
        """The input reference for `subgoal`, or None if it must arrive by message."""
        return dict(self.refs).get(subgoal)

    def to_dict(self) -> dict[str, Any]:
        """Plain form (ledger rows, datasets)."""
        return {
            "task_id": self.task_id,
            "family": self.family,
            "subgoals": sorted(self.subgoals),
            "refs": dict(self.refs),
            "period": self.period,
            "tags": sorted(self.tags),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Task:
        """Rebuild a task from :meth:`to_dict` output."""
        return cls(
            str(data["task_id"]),
            str(data["family"]),
            frozenset(data["subgoals"]),
            tuple(sorted((str(k), str(v)) for k, v in data["refs"].items())),
            str(data.get("period", "")),
            frozenset(data.get("tags", ())),
        )


@dataclass(frozen=True)
class SkillAnswer:
    """What a skill returns: a value (and fields to emit), or a hold with its reason."""

    status: Literal["ok", "hold"]
    value: Any = None
    emit: Mapping[str, Any] = field(default_factory=dict)
    used_edges: tuple[str, ...] = ()
    used_namespaces: tuple[str, ...] = ()
    reason: str = ""
    missing_input: bool = False


@dataclass(frozen=True)
class SkillContext:
    """Everything a skill may touch: its input, its inbox, its memory, its tools."""

    module: str
    subgoal: str
    task: Task
    ref: str | None
    inbox: tuple[Message, ...]
    memory: ModuleMemory
    call: Callable[[str, Mapping[str, object]], ToolResult]


SkillFn = Callable[[SkillContext], SkillAnswer]


class Environment(Protocol):
    """What an environment supplies: skills, knowledge, tools, areas and the verifier."""

    name: str
    verifier_id: str

    def skill(self, version: str) -> tuple[str, SkillFn]:
        """The sub-goal a pinned skill version serves, and its function."""
        ...

    def knowledge(self, index_version: str) -> NamespacedStore:
        """The knowledge index of one version."""
        ...

    def truth(self) -> NamespacedStore:
        """The ground-truth store (only the verifier's identity may read it)."""
        ...

    def executor(self) -> ToolExecutor:
        """A tool executor with the environment's tools registered."""
        ...

    def area(self, subgoal: str) -> str:
        """The knowledge area a sub-goal needs."""
        ...

    def verify(
        self, task: Task, answers: Mapping[str, Any], truth: ModuleMemory
    ) -> dict[str, bool]:
        """Per sub-goal: is the answer right, judged from ground truth."""
        ...


@dataclass(frozen=True)
class EpisodeResult:
    """What happened in one episode: outcome, answers, path, and every cost counter."""

    task_id: str
    family: str
    subgoals: tuple[str, ...]
    outcome: Outcome
    failure_type: str | None
    answers: Mapping[str, Any]
    verdicts: Mapping[str, bool]
    activated: tuple[str, ...]
    needed: tuple[str, ...]
    fired: tuple[str, ...]
    messages: tuple[str, ...]
    consumed: tuple[str, ...]
    holds: tuple[tuple[str, str, str, bool], ...]
    reads: tuple[tuple[str, str], ...]
    contributed: tuple[tuple[str, str], ...]
    unneeded_areas: int
    runs: tuple[tuple[str, int], ...]
    context_entries: int
    refused_messages: int
    tool_calls: int
    escalated: bool
    value: float = 0.0
    """What the verifier credits beyond success (the trading environment's realized return)."""

    @property
    def solved(self) -> bool:
        """Verified success."""
        return self.outcome == "success"

    def signature(self) -> str:
        """Outcome and answers as canonical JSON: what a replay must reproduce."""
        return json.dumps(
            {"task": self.task_id, "outcome": self.outcome, "answers": dict(self.answers)},
            sort_keys=True,
            default=str,
        )


class Runtime:
    """A structure bound to an environment, skill versions and a knowledge index."""

    def __init__(
        self,
        structure: Structure,
        env: Environment,
        *,
        skill_versions: Mapping[str, str] | None = None,
        index_version: str | None = None,
        log: RefusalLog | None = None,
    ) -> None:
        self.structure = structure
        self.env = env
        self.log = log if log is not None else RefusalLog()
        versions = dict(skill_versions or structure.pins.versions)
        self.index_version = index_version or structure.pins.index
        store = env.knowledge(self.index_version)
        self.memory = ScopedMemory.for_structure(store, structure, self.log)
        self.truth = ScopedMemory(
            env.truth(), {"verifier": (structure.verification.namespace,)}, self.log
        ).view("verifier")
        self.executor = env.executor()
        self.callers = {
            m.id: Caller(m.id, frozenset(m.tools), frozenset(Effect(e) for e in m.effects))
            for m in structure.modules
        }
        self.skills: dict[str, dict[str, SkillFn]] = {}
        for m in structure.modules:
            table: dict[str, SkillFn] = {}
            for sid in m.skills:
                subgoal, fn = env.skill(versions[sid])
                table[subgoal] = fn
            self.skills[m.id] = table
        visible = {m.id: self.memory.view(m.id).namespaces() for m in structure.modules}
        self.context = {
            mid: sum(len(store.entries(n)) for n in names) for mid, names in visible.items()
        }

    def _caller(self, module: str) -> Callable[[str, Mapping[str, object]], ToolResult]:
        caller = self.callers[module]

        def call(name: str, args: Mapping[str, object]) -> ToolResult:
            return self.executor.call(caller, name, args)

        return call

    def route(self, task: Task) -> tuple[list[str], list[str], list[str]]:
        """(needed modules, activated modules in order, fired edge IDs) for a goal."""
        s = self.structure
        needed = sorted({s.handler_of[g] for g in task.subgoals if g in s.handler_of})
        active = list(needed)
        fired: list[str] = []
        queue = deque(needed)
        while queue:
            mid = queue.popleft()
            for e in s.outgoing(mid):
                if e.trigger.fires(task.subgoals):
                    fired.append(e.id)
                    if e.target not in active:
                        active.append(e.target)
                        queue.append(e.target)
        return needed, active, fired

    def run(self, task: Task) -> EpisodeResult:
        """Run one episode and verify it."""
        s = self.structure
        needed, active, fired = self.route(task)
        channel = Channel(s, task.task_id, task.subgoals, self.log)
        answers: dict[str, Any] = {}
        holds: dict[str, tuple[str, str, str, bool]] = {}
        consumed: list[str] = []
        reads: set[tuple[str, str]] = set()
        contributed: set[tuple[str, str]] = set()
        runs: dict[str, int] = {}
        refused = 0
        waiting: set[str] = set()
        views = {mid: self.memory.view(mid) for mid in active}
        queue = deque(active)
        calls_before = len(self.executor.audit)
        while queue:
            mid = queue.popleft()
            module = s.module_map[mid]
            todo = [g for g in module.handles if g in task.subgoals and g not in answers]
            emits: dict[str, Any] = {}
            for g in todo:
                fn = self.skills[mid].get(g)
                if fn is None:
                    holds[g] = (mid, g, "no skill pinned for this sub-goal", False)
                    continue
                ctx = SkillContext(
                    mid,
                    g,
                    task,
                    task.ref(g),
                    channel.inbox(mid),
                    views[mid],
                    self._caller(mid),
                )
                try:
                    ans = fn(ctx)
                except IsolationRefused as exc:  # already in the log; the module holds
                    ans = SkillAnswer("hold", reason=str(exc))
                runs[module.runtime] = runs.get(module.runtime, 0) + 1
                if ans.status == "ok":
                    answers[g] = ans.value
                    holds.pop(g, None)
                    emits.update(ans.emit)
                    consumed += [e for e in ans.used_edges if e not in consumed]
                    contributed.update((mid, n) for n in ans.used_namespaces)
                else:
                    holds[g] = (mid, g, ans.reason, ans.missing_input)
                    if ans.missing_input:
                        waiting.add(mid)
            reads.update((mid, n) for n in views[mid].reads)
            if not emits:
                continue
            for e in s.outgoing(mid):
                if not e.trigger.fires(task.subgoals):
                    continue
                try:
                    channel.send(mid, e.target, emits)
                except IsolationRefused:
                    refused += 1
                    continue
                if e.target in waiting:
                    waiting.discard(e.target)
                    queue.append(e.target)
        unrouted = [g for g in sorted(task.subgoals) if g not in s.handler_of]
        for g in unrouted:
            holds[g] = ("", g, f"no module handles {g!r}: sent to {s.fallback}", False)
        verdicts = self.env.verify(task, answers, self.truth) if answers else {}
        unanswered = [g for g in task.subgoals if g not in answers]
        outcome: Outcome
        failure: str | None = None
        if unanswered:
            outcome = "hold"
            missing = any(holds[g][3] for g in unanswered if g in holds)
            failure = "input_interpretation" if missing or unrouted else "execution"
        elif all(verdicts.get(g, False) for g in task.subgoals):
            outcome = "success"
        else:
            outcome = "failure"
            failure = "policy" if set(verdicts) >= task.subgoals else "verification"
        activated_areas = {a for mid in active for a in s.module_map[mid].areas()}
        needed_areas = {self.env.area(g) for g in task.subgoals}
        # Successful calls are counted and dropped (memory stays bounded over long
        # replays); refused and failed attempts stay in the executor's audit.
        recent = self.executor.audit[calls_before:]
        tool_calls = len(recent)
        self.executor.audit[calls_before:] = [x for x in recent if x.outcome != "ok"]
        return EpisodeResult(
            task_id=task.task_id,
            family=task.family,
            subgoals=tuple(sorted(task.subgoals)),
            outcome=outcome,
            failure_type=failure,
            answers=answers,
            verdicts=verdicts,
            activated=tuple(active),
            needed=tuple(needed),
            fired=tuple(fired),
            messages=tuple(m.edge for m in channel.delivered),
            consumed=tuple(consumed),
            holds=tuple(holds[g] for g in sorted(holds)),
            reads=tuple(sorted(reads)),
            contributed=tuple(sorted(contributed)),
            unneeded_areas=len(activated_areas - needed_areas),
            runs=tuple(sorted(runs.items())),
            context_entries=sum(self.context[mid] for mid in active),
            refused_messages=refused,
            tool_calls=tool_calls,
            escalated=outcome == "hold",
        )
