"""Which mutations to try, from a frozen structure's own records (the design's evidence).

The design gives each operator the evidence that calls for it; this module reads that
evidence from episode results on the generation set only (never the selection or the
test set), and proposes operator arguments:

- delete edge: every edge. Whether an edge matters is settled by the removal
  experiment itself (the replay), not by how often it was used.
- conditionalize edge: an edge whose messages were consumed in solved episodes but
  that also fired where nobody used it; the trigger is the sub-goals common to the
  episodes that used it.
- add edge: a module that held for lack of input while another active module
  produced output in the same episode; the edge opens on that goal's sub-goals.
- narrow scope: namespaces a module read but that never contributed to a solved
  answer, when it did solve something.
- merge: two modules that messaged each other both ways in one episode (round trips).
- split: a module handling several sub-goals with policy failures in one task family.
- specialize: a module handling several sub-goals where one family repeatedly needs
  only one of them.
- recombine: another frozen candidate that solves a task family more often; take the
  modules serving that family from it.
- explore edges (only when the search asks, as the trading search does): every ordered
  pair of modules without an edge, the source's outputs as a closed contract, opening
  on the target's sub-goals. In the trading environment no module ever lacks input, so
  the evidence above never calls for an edge; whether lending a role's knowledge to
  another earns its place is settled, like a removal, by the replay itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reflexmem.structures.evaluate import Evaluation
from reflexmem.structures.model import Structure


@dataclass(frozen=True)
class Proposal:
    """An operator with arguments, and the evidence that suggested it."""

    operator: str
    args: dict[str, Any] = field(hash=False)
    evidence: str
    other: Structure | None = None


def _edges(s: Structure, ev: Evaluation) -> list[Proposal]:
    out = [Proposal("delete_edge", {"edge": e.id}, "removal experiment") for e in s.edges]
    for e in s.edges:
        fired = [r for r in ev.results if e.id in r.fired]
        used = [r for r in fired if r.solved and e.id in r.consumed]
        if not used or len(used) == len(fired):
            continue
        cond = frozenset.intersection(*(frozenset(r.subgoals) for r in used)) | e.trigger.all_of
        if cond == e.trigger.all_of or all(cond <= frozenset(r.subgoals) for r in fired):
            continue
        out.append(
            Proposal(
                "conditionalize_edge",
                {"edge": e.id, "all_of": sorted(cond)},
                f"used in {len(used)} of {len(fired)} episodes where it fired",
            )
        )
    return out


def _add_edges(s: Structure, ev: Evaluation) -> list[Proposal]:
    wanted: dict[tuple[str, str], frozenset[str]] = {}
    for r in ev.results:
        waiting = {h[0] for h in r.holds if h[3] and h[0]}
        producers = {s.handler_of[g] for g in r.answers if g in s.handler_of}
        for m in waiting:
            for p in sorted(producers - {m}):
                if f"{p}->{m}" in s.edge_map:
                    continue
                key = (p, m)
                sub = frozenset(r.subgoals)
                wanted[key] = wanted[key] & sub if key in wanted else sub
    out = []
    for (p, m), cond in sorted(wanted.items()):
        outputs = dict(s.module_map[p].outputs)
        out.append(
            Proposal(
                "add_edge",
                {
                    "source": p,
                    "target": m,
                    "fields": sorted(outputs),
                    "contract": f"{p}-to-{m}-v1",
                    "all_of": sorted(cond),
                    "max_messages": 1,
                    "contract_fields": outputs,
                },
                f"{m} held for lack of input while {p} produced output",
            )
        )
    return out


def _scopes(s: Structure, ev: Evaluation) -> list[Proposal]:
    out = []
    for m in s.modules:
        read = {n for mid, n in (x for r in ev.results for x in r.reads) if mid == m.id}
        useful = {n for r in ev.results if r.solved for mid, n in r.contributed if mid == m.id}
        if useful and read - useful:
            out.append(
                Proposal(
                    "narrow_scope",
                    {"module": m.id, "knowledge": sorted(useful)},
                    f"{sorted(read - useful)} read by {m.id} but never contributed",
                )
            )
    return out


def _modules(s: Structure, ev: Evaluation) -> list[Proposal]:
    out = []
    pairs = set()
    for r in ev.results:
        sent = {tuple(e.split("->")) for e in r.messages}
        pairs |= {tuple(sorted(p)) for p in sent if (p[1], p[0]) in sent}
    for a, b in sorted(pairs):
        out.append(Proposal("merge", {"modules": [a, b], "new_id": f"{a}-{b}"}, "round trips"))
    for m in s.modules:
        if len(m.handles) < 2:
            continue
        policy = {
            r.family
            for r in ev.results
            if r.failure_type == "policy" and set(r.subgoals) & set(m.handles)
        }
        if policy:
            parts = {f"{m.id}-{g.replace('_', '-')}": {"handles": [g]} for g in m.handles}
            out.append(
                Proposal("split", {"module": m.id, "parts": parts}, f"policy failures {policy}")
            )
        for g in m.handles:
            alone = [r for r in ev.results if set(r.subgoals) & set(m.handles) == {g}]
            if len(alone) >= 3:
                out.append(
                    Proposal(
                        "specialize",
                        {"module": m.id, "subgoal": g, "new_id": f"{m.id}-{g.replace('_', '-')}"},
                        f"{len(alone)} episodes need only {g}",
                    )
                )
    return out


def _recombine(
    s: Structure, ev: Evaluation, others: Sequence[tuple[Structure, Evaluation]]
) -> list[Proposal]:
    mine = ev.success_by_family()
    out = []
    for other, oev in others:
        if other.fingerprint() == s.fingerprint():
            continue
        theirs = oev.success_by_family()
        for fam in sorted(theirs):
            if theirs[fam] <= mine.get(fam, 0.0):
                continue
            subgoals = {g for r in oev.results if r.family == fam for g in r.subgoals}
            take = sorted({other.handler_of[g] for g in subgoals if g in other.handler_of})
            if take:
                out.append(
                    Proposal(
                        "recombine",
                        {"other": other.structure_id, "modules": take},
                        f"{other.structure_id} solves {fam} more often",
                        other=other,
                    )
                )
    return out


def _explore_edges(s: Structure) -> list[Proposal]:
    out = []
    for p in s.modules:
        outputs = dict(p.outputs)
        if not outputs:
            continue
        for m in s.modules:
            if m.id == p.id or f"{p.id}->{m.id}" in s.edge_map or not m.handles:
                continue
            out.append(
                Proposal(
                    "add_edge",
                    {
                        "source": p.id,
                        "target": m.id,
                        "fields": sorted(outputs),
                        "contract": f"{p.id}-to-{m.id}-v1",
                        "all_of": [],
                        "max_messages": 1,
                        "contract_fields": outputs,
                    },
                    f"explore: {p.id} briefs {m.id} before it decides",
                )
            )
    return out


def propose(
    structure: Structure,
    records: Evaluation,
    others: Sequence[tuple[Structure, Evaluation]] = (),
    *,
    explore_edges: bool = False,
) -> list[Proposal]:
    """Every proposal the generation-set records of `structure` support."""
    return [
        *_edges(structure, records),
        *_add_edges(structure, records),
        *(_explore_edges(structure) if explore_edges else []),
        *_scopes(structure, records),
        *_modules(structure, records),
        *_recombine(structure, records, others),
    ]
