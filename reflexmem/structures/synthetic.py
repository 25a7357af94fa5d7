"""A synthetic structure of N modules for the benchmark: dense parent, a few needed edges.

Module `mXX` handles sub-goal `gXX` with knowledge area `aXX` (one entry: its factor).
A single task gives `gXX` an input value behind the `read-value` tool; the answer is
`(value * factor + XX) mod 997`. A composite task `c:i>j` gives only `gi` an input,
so `mj` can answer only from `mi`'s value sent over the edge `mi->mj`. The parent
joins every module to the next, the third and the seventh after it with unconditional
edges (3N edges, one strongly connected cycle), so most edges are dead weight and
every task activates every area. Truth is computed by the generator, not the skills.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from reflexmem.executor import Effect, Tool, ToolExecutor
from reflexmem.ledger.enums import Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.store import InMemoryStore
from reflexmem.structures.isolation import ModuleMemory
from reflexmem.structures.model import (
    Contract,
    Edge,
    Lifecycle,
    Limits,
    Module,
    Pins,
    Structure,
    Verification,
)
from reflexmem.structures.office_tasks import TaskSets
from reflexmem.structures.runtime import SkillAnswer, SkillContext, SkillFn, Task

OFFSETS = (1, 3, 7)
MOD = 997


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    ref: str


def _name(i: int) -> str:
    return f"m{i:02d}"


def _skill(i: int) -> SkillFn:
    def skill(ctx: SkillContext) -> SkillAnswer:
        used: tuple[str, ...] = ()
        if ctx.ref is not None:
            res = ctx.call("read-value", {"ref": ctx.ref})
            if not res.ok:
                return SkillAnswer("hold", reason=res.reason)
            value = int(res.value)  # type: ignore[call-overload]
        elif ctx.inbox:
            value = int(ctx.inbox[0].payload["value"])
            used = (ctx.inbox[0].edge,)
        else:
            return SkillAnswer("hold", reason="no input", missing_input=True)
        factor = int(ctx.memory.entries(f"a{i:02d}")[0].text)
        answer = (value * factor + i) % MOD
        return SkillAnswer(
            "ok",
            answer,
            {"value": answer, "source_ref": ctx.ref or ""},
            used_edges=used,
            used_namespaces=(f"a{i:02d}",),
        )

    return skill


@dataclass
class SyntheticEnvironment:
    """N generic modules behind one tool; ground truth for the verifier only."""

    n: int = 20
    name: str = "synthetic"
    verifier_id: str = "synthetic-result-v1"
    inputs: dict[str, int] = field(default_factory=dict)
    factors: dict[int, int] = field(default_factory=dict)
    store: InMemoryStore = field(default_factory=lambda: InMemoryStore(cap=10_000))
    truth_store: InMemoryStore = field(default_factory=lambda: InMemoryStore(cap=1_000_000))

    def __post_init__(self) -> None:
        rng = random.Random(self.n)
        for i in range(self.n):
            self.factors[i] = rng.randint(2, 50)
            self.store.put(
                MemoryEntry(f"factor:{i}", f"a{i:02d}", Tier.PROCEDURAL, str(self.factors[i]))
            )
        self._skills = {f"s{i:02d}@1": (f"g{i:02d}", _skill(i)) for i in range(self.n)}

    def skill(self, version: str) -> tuple[str, SkillFn]:
        """The sub-goal and function of a skill version."""
        return self._skills[version]

    def knowledge(self, index_version: str) -> InMemoryStore:
        """The one knowledge index."""
        del index_version
        return self.store

    def truth(self) -> InMemoryStore:
        """Ground truth, one entry per task."""
        return self.truth_store

    def area(self, subgoal: str) -> str:
        """`gXX` needs area `aXX`."""
        return "a" + subgoal[1:]

    def executor(self) -> ToolExecutor:
        """The `read-value` tool."""
        read = frozenset({Effect.READ})
        return ToolExecutor.with_tools(
            [Tool("read-value", read, _Args, lambda a: self.inputs[a.ref])]
        )

    def verify(
        self, task: Task, answers: Mapping[str, Any], truth: ModuleMemory
    ) -> dict[str, bool]:
        """Exact comparison with the generator's answers."""
        entry = truth.get(f"truth:{task.task_id}")
        expected = {} if entry is None else json.loads(entry.text)
        return {g: expected.get(g) == v for g, v in answers.items()}

    def answer(self, i: int, value: int) -> int:
        """What module i must answer for an input value."""
        return (value * self.factors[i] + i) % MOD


def parent_structure(n: int = 20) -> Structure:
    """The dense parent: edges to the next, third and seventh module, all unconditional."""
    outputs = (("source_ref", "string"), ("value", "number"))
    modules = tuple(
        Module(
            _name(i),
            (f"g{i:02d}",),
            (f"a{i:02d}",),
            (f"s{i:02d}",),
            ("read-value",),
            ("read",),
            outputs,
        )
        for i in range(n)
    )
    edges = tuple(
        Edge(_name(i), _name((i + d) % n), "value-v1", ("value", "source_ref"), max_messages=2)
        for i in range(n)
        for d in OFFSETS
    )
    return Structure(
        structure_id=f"synthetic-{n}",
        parent_id=None,
        lifecycle=Lifecycle.ACTIVE,
        modules=modules,
        edges=edges,
        contracts=(Contract("value-v1", outputs, closed=True),),
        fallback="integration-review",
        verification=Verification(
            "synthetic-result-v1", "ground-truth", tuple(m.id for m in modules), "errors"
        ),
        limits=Limits(max_cycle_modules=n, max_messages_per_episode=4 * n),
        pins=Pins(tuple((f"s{i:02d}", f"s{i:02d}@1") for i in range(n)), "synthetic-index@1"),
    )


def composite_pairs(n: int = 20) -> list[tuple[int, int]]:
    """The module pairs whose composite tasks need a message (about N/2.5 of them)."""
    return [(i, (i + 1) % n) for i in range(0, n, 3)] + [(i, (i + 7) % n) for i in (2, 10)]


def task_sets(env: SyntheticEnvironment, seed: int = 0) -> TaskSets:
    """Disjoint generation / selection / test sets over single and composite families."""
    rng = random.Random(seed)
    counter = [0]

    def make(family: str, i: int, j: int | None, tag: str) -> Task:
        counter[0] += 1
        tid = f"syn-{counter[0]:05d}"
        ref = f"val-{counter[0]:05d}"
        x = rng.randint(1, 500)
        env.inputs[ref] = x
        truth: dict[str, int] = {f"g{i:02d}": env.answer(i, x)}
        subgoals = {f"g{i:02d}"}
        if j is not None:
            subgoals.add(f"g{j:02d}")
            truth[f"g{j:02d}"] = env.answer(j, truth[f"g{i:02d}"])
        env.truth_store.put(
            MemoryEntry(f"truth:{tid}", "ground-truth", Tier.EPISODIC, json.dumps(truth))
        )
        return Task(tid, family, frozenset(subgoals), ((f"g{i:02d}", ref),), tag, frozenset({tag}))

    def batch(k_single: int, k_combo: int, tag: str) -> tuple[Task, ...]:
        out = [make(f"s:{i:02d}", i, None, tag) for i in range(env.n) for _ in range(k_single)]
        out += [
            make(f"c:{i:02d}>{j:02d}", i, j, tag)
            for i, j in composite_pairs(env.n)
            for _ in range(k_combo)
        ]
        return tuple(out)

    return TaskSets(batch(1, 2, "generation"), batch(2, 3, "selection"), batch(2, 3, "test"))
