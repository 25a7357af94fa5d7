"""Structure search on the user's own decisions: the isolated roles, time-ordered sets, evidence.

- `isolated_root`: the starting structure, today's behaviour: one module per role, each
  pinning its own decision skill and its role's usable checks, no edge.
- `time_sets`: generation, selection and final-test decisions in time order; every
  final-test decision was made strictly after every decision the search read.
- `edge_evidence`: whether each edge of a structure earns its place on realized returns:
  per final-test decision, the net value (realized return of what proceeded, in the
  cost model's units, minus what the episode cost) with the edge against without it,
  a paired mean with its 95 % Student-t interval. An edge earns its place when the
  interval lies above zero. The checks an edge lends were learned from their own
  role's outcomes; the decisions whose answer the edge changes are another role's, so
  this evidence comes from outcomes the lent checks were never learned from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from reflexmem.reflex.snapshot import PinnedSkill
from reflexmem.structures.cost import CostModel
from reflexmem.structures.evaluate import replay
from reflexmem.structures.gain import net_values, paired
from reflexmem.structures.model import (
    Lifecycle,
    Limits,
    Module,
    Pins,
    Structure,
    Verification,
)
from reflexmem.structures.office_tasks import TaskSets
from reflexmem.structures.operators import delete_edge
from reflexmem.structures.runtime import Task
from reflexmem.structures.trading import (
    SHARED_FIELD,
    TRUTH_NAMESPACE,
    VERIFIER,
    TradingEnvironment,
    decide_skill,
    module_id,
    namespace,
    skill_role,
    subgoal,
)

ROOT_ID = "trading-isolated"
FRACTIONS = (0.4, 0.3)
"""Shares of the settled decisions (in time order) for generation and selection; the
rest is the final test."""


def pinned_checks(skills: Sequence[PinnedSkill]) -> dict[str, list[PinnedSkill]]:
    """Role -> the newest usable version of each of its checks (one pin per skill ID)."""
    newest: dict[str, PinnedSkill] = {}
    for s in skills:
        sid = s.spec.skill_id
        if sid not in newest or s.spec.version > newest[sid].spec.version:
            newest[sid] = s
    out: dict[str, list[PinnedSkill]] = {}
    for s in newest.values():
        role = skill_role(s)
        if role is not None:
            out.setdefault(role, []).append(s)
    return {r: sorted(v, key=lambda s: s.spec.skill_id) for r, v in sorted(out.items())}


def isolated_root(
    roles: Sequence[str], checks: Mapping[str, Sequence[PinnedSkill]], index_version: str
) -> Structure:
    """One module per role with its own checks and memory, no edge (today's behaviour)."""
    modules, pins = [], {}
    for role in sorted(roles):
        own = [s.spec.skill_id for s in checks.get(role, ())]
        decide = decide_skill(role)
        pins[decide] = f"{decide}@1"
        pins |= {s.spec.skill_id: s.key for s in checks.get(role, ())}
        modules.append(
            Module(
                id=module_id(role),
                handles=(subgoal(role),),
                knowledge=(namespace(role),),
                skills=(decide, *own),
                effects=("read",),
                outputs=((SHARED_FIELD, "string"),),
                runtime="skill-module",
            )
        )
    return Structure(
        structure_id=ROOT_ID,
        parent_id=None,
        lifecycle=Lifecycle.CANDIDATE,
        modules=tuple(modules),
        edges=(),
        contracts=(),
        fallback="trade-review",
        verification=Verification(
            VERIFIER, TRUTH_NAMESPACE, tuple(m.id for m in modules), "errors"
        ),
        limits=Limits(max_cycle_modules=2, max_messages_per_episode=max(1, len(modules) - 1)),
        pins=Pins(tuple(sorted(pins.items())), index_version),
        description="The user's roles, each deciding alone with its own checks and memory.",
    )


def time_sets(env: TradingEnvironment, fractions: tuple[float, float] = FRACTIONS) -> TaskSets:
    """Generation, selection and final test in time order, split on decision days.

    A day is never split across two sets, so the final test starts strictly after the
    last decision the search read.
    """
    tasks = env.tasks()
    days = sorted({t.period for t in tasks})
    if len(days) < 3:
        raise ValueError(f"{len(tasks)} settled decisions on {len(days)} day(s): need 3 days")
    cut1 = max(1, int(len(days) * fractions[0]))
    cut2 = max(cut1 + 1, int(len(days) * (fractions[0] + fractions[1])))
    cut2 = min(cut2, len(days) - 1)
    first, second = days[cut1], days[cut2]
    gen = tuple(t for t in tasks if t.period < first)
    sel = tuple(t for t in tasks if first <= t.period < second)
    test = tuple(t for t in tasks if t.period >= second)
    return TaskSets(gen, sel, test)


def edge_evidence(
    structure: Structure, env: TradingEnvironment, tasks: Sequence[Task], model: CostModel
) -> list[dict[str, Any]]:
    """Per edge: net value per decision with it minus without it, with an interval."""
    base = net_values(model, replay(structure, env, tasks))
    out: list[dict[str, Any]] = []
    for e in structure.edges:
        without = delete_edge(structure, e.id).child
        row = paired(base, net_values(model, replay(without, env, tasks)))
        out.append({"edge": e.id, "fields": list(e.fields), **row, "earns_place": row["low"] > 0})
    return out


def verdict(evidence: Sequence[Mapping[str, Any]]) -> str:
    """One printed line: which edges earn their place, or that none does."""
    earning = [str(r["edge"]) for r in evidence if r.get("earns_place")]
    if earning:
        return "edges earning their place on realized returns: " + ", ".join(earning)
    if not evidence:
        return "no edge earns its place: the search kept the roles isolated"
    return "no edge earns its place: every edge's interval reaches zero or below"
