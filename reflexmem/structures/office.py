"""Experiment B's environment: document, image and schedule modules and their skills.

Nothing here is a table of answers. Inputs (document texts, receipt scans, meeting
requests) sit behind three read-only tools that the executor guards; the knowledge a
skill uses (classification rules, field-label aliases, busy calendar hours) sits in
namespaced memory that only the owning module's scope reaches; the ground truth is
written by the task generator into a namespace only the verifier's identity can read,
and the verifier compares answers with it. A document can be classified from its text
or, when the goal gives only a receipt image, from the fields the image module sends
over an edge; without that edge the document module has no input and holds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reflexmem.executor import Effect, Tool, ToolExecutor
from reflexmem.ledger.enums import Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.store import InMemoryStore
from reflexmem.structures.isolation import ModuleMemory
from reflexmem.structures.runtime import SkillAnswer, SkillContext, SkillFn, Task

VERIFIER = "office-result-v1"
TRUTH_NAMESPACE = "ground-truth"
INDEXES = ("office-index@1", "office-index@2")
WORK_HOURS = (9, 17)

RULES: dict[str, tuple[str, tuple[str, ...]]] = {
    "invoice": ("docs/common", ("invoice", "due", "bill", "payment", "terms")),
    "receipt": ("docs/common", ("receipt", "total", "paid", "merchant", "amount")),
    "letter": ("docs/common", ("dear", "sincerely", "regards", "letter")),
    "contract": ("docs/common", ("agreement", "party", "hereby", "clause")),
    "credit_note": ("docs/rare", ("credit", "refund", "credited", "note")),
}
"""Document type -> (namespace, keywords) of office-index@1; credit notes are rare.
office-index@2 adds `statement` to the invoice rule."""

LABELS: dict[str, tuple[str, ...]] = {
    "amount": ("TOTAL", "AMOUNT", "SUM"),
    "merchant": ("MERCHANT", "STORE"),
    "date": ("DATE",),
}
"""Receipt field -> the scan labels that carry it (namespace `images`)."""

AREAS = {"classify_document": "docs", "extract_fields": "images", "schedule_event": "calendar"}


class _RefArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    ref: str = Field(min_length=1)


def _index(version: str) -> InMemoryStore:
    store = InMemoryStore(cap=100_000)
    for doc_type, (namespace, words) in RULES.items():
        if version == "office-index@2" and doc_type == "invoice":
            words = (*words, "statement")
        store.put(MemoryEntry(f"rule:{doc_type}", namespace, Tier.PROCEDURAL, doc_type, words))
    for name, labels in LABELS.items():
        store.put(MemoryEntry(f"label:{name}", "images", Tier.PROCEDURAL, name, labels))
    return store


def _tokens(text: str) -> set[str]:
    return {w.strip(".,:;!?()").lower() for w in text.split()} - {""}


def _classify(min_hits: int) -> SkillFn:
    def skill(ctx: SkillContext) -> SkillAnswer:
        used: tuple[str, ...] = ()
        if ctx.ref is not None:
            res = ctx.call("read-text", {"ref": ctx.ref})
            if not res.ok:
                return SkillAnswer("hold", reason=f"read-text: {res.reason}")
            tokens = _tokens(str(res.value))
        elif ctx.inbox:
            tokens = set()
            for m in ctx.inbox:
                tokens |= {k.lower() for k in m.payload}
                tokens |= {w for v in m.payload.values() for w in _tokens(str(v))}
            used = tuple(dict.fromkeys(m.edge for m in ctx.inbox))
        else:
            return SkillAnswer("hold", reason="no document and no message", missing_input=True)
        scored = [
            (len(tokens & set(e.tags)), e.text, ns)
            for ns in ctx.memory.namespaces()
            for e in ctx.memory.entries(ns)
        ]
        scored.sort(key=lambda t: -t[0])
        if (
            not scored
            or scored[0][0] < min_hits
            or (len(scored) > 1 and scored[1][0] == scored[0][0])
        ):
            return SkillAnswer("hold", reason="no unique rule matches", used_edges=used)
        _, doc_type, ns = scored[0]
        ref = ctx.ref or str(ctx.inbox[0].payload.get("source_ref", ""))
        return SkillAnswer(
            "ok",
            doc_type,
            {"document_type": doc_type, "source_ref": ref},
            used_edges=used,
            used_namespaces=(ns,),
        )

    return skill


def _extract(ctx: SkillContext) -> SkillAnswer:
    if ctx.ref is None:
        return SkillAnswer("hold", reason="no image", missing_input=True)
    res = ctx.call("local-ocr", {"ref": ctx.ref})
    if not res.ok:
        return SkillAnswer("hold", reason=f"local-ocr: {res.reason}")
    regions = {str(label): str(value) for label, value in res.value}  # type: ignore[attr-defined]
    fields: dict[str, Any] = {}
    for entry in ctx.memory.entries("images"):
        for label in entry.tags:
            if label in regions:
                fields[entry.text] = regions[label]
                break
    if set(fields) != set(LABELS):
        return SkillAnswer("hold", reason=f"fields found: {sorted(fields)}")
    try:
        fields["amount"] = float(fields["amount"])
    except ValueError:
        return SkillAnswer("hold", reason=f"amount {fields['amount']!r} is not a number")
    return SkillAnswer(
        "ok", dict(fields), {**fields, "source_ref": ctx.ref}, used_namespaces=("images",)
    )


def _schedule(ctx: SkillContext) -> SkillAnswer:
    if ctx.ref is None:
        return SkillAnswer("hold", reason="no request", missing_input=True)
    res = ctx.call("read-request", {"ref": ctx.ref})
    if not res.ok:
        return SkillAnswer("hold", reason=f"read-request: {res.reason}")
    request: Mapping[str, Any] = res.value  # type: ignore[assignment]
    day, hours = str(request["day"]), int(request["hours"])
    busy = sorted(
        int(e.text[11:13]) for e in ctx.memory.entries("calendar") if e.text.startswith(day)
    )
    start = WORK_HOURS[0]
    for b in [*busy, WORK_HOURS[1]]:
        if b - start >= hours:
            slot = f"{day}T{start:02d}:00"
            return SkillAnswer(
                "ok", slot, {"slot": slot, "source_ref": ctx.ref}, used_namespaces=("calendar",)
            )
        start = max(start, b + 1)
    return SkillAnswer("hold", reason=f"no free {hours} h on {day}")


SKILLS: dict[str, tuple[str, SkillFn]] = {
    "classify-document@1": ("classify_document", _classify(1)),
    "classify-document@2": ("classify_document", _classify(2)),
    "extract-receipt@1": ("extract_fields", _extract),
    "schedule-event@1": ("schedule_event", _schedule),
}


@dataclass
class OfficeEnvironment:
    """Inputs behind tools, versioned knowledge indexes, and the verifier's ground truth."""

    name: str = "office"
    verifier_id: str = VERIFIER
    inputs: dict[str, Any] = field(default_factory=dict)
    indexes: dict[str, InMemoryStore] = field(
        default_factory=lambda: {v: _index(v) for v in INDEXES}
    )
    truth_store: InMemoryStore = field(default_factory=lambda: InMemoryStore(cap=1_000_000))
    booked: set[str] = field(default_factory=set)

    def skill(self, version: str) -> tuple[str, SkillFn]:
        """The sub-goal and function of a pinned skill version."""
        if version not in SKILLS:
            raise KeyError(f"unknown skill version {version!r}")
        return SKILLS[version]

    def knowledge(self, index_version: str) -> InMemoryStore:
        """One knowledge-index version."""
        return self.indexes[index_version]

    def truth(self) -> InMemoryStore:
        """Ground truth, one entry per task."""
        return self.truth_store

    def area(self, subgoal: str) -> str:
        """The knowledge area a sub-goal needs."""
        return AREAS[subgoal]

    def executor(self) -> ToolExecutor:
        """The three read-only input tools."""
        read = frozenset({Effect.READ})
        return ToolExecutor.with_tools(
            [
                Tool("read-text", read, _RefArgs, lambda a: self.inputs[a.ref]["text"]),
                Tool("local-ocr", read, _RefArgs, lambda a: self.inputs[a.ref]["regions"]),
                Tool("read-request", read, _RefArgs, lambda a: self.inputs[a.ref]["request"]),
            ]
        )

    def add_busy(self, day: str, hours: list[int]) -> None:
        """Record busy hours of a day in every index version's calendar."""
        for store in self.indexes.values():
            for h in hours:
                text = f"{day}T{h:02d}"
                store.put(MemoryEntry(f"busy:{text}", "calendar", Tier.EPISODIC, text, (day,)))

    def add_truth(self, task_id: str, answers: Mapping[str, Any]) -> None:
        """Write the ground truth of one task (only the verifier may read it)."""
        self.truth_store.put(
            MemoryEntry(
                f"truth:{task_id}",
                TRUTH_NAMESPACE,
                Tier.EPISODIC,
                json.dumps(dict(answers), sort_keys=True),
            )
        )

    def verify(
        self, task: Task, answers: Mapping[str, Any], truth: ModuleMemory
    ) -> dict[str, bool]:
        """Compare each answer with the ground truth (amounts to the cent)."""
        entry = truth.get(f"truth:{task.task_id}")
        if entry is None:
            return {}
        expected = json.loads(entry.text)
        out: dict[str, bool] = {}
        for g, value in answers.items():
            want = expected.get(g)
            if g == "extract_fields" and isinstance(value, dict) and isinstance(want, dict):
                out[g] = (
                    abs(float(value.get("amount", -1)) - float(want["amount"])) < 0.005
                    and value.get("merchant") == want["merchant"]
                    and value.get("date") == want["date"]
                )
            else:
                out[g] = value == want
        return out
