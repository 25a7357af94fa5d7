from __future__ import annotations

import pytest

from reflexmem.ledger.enums import Tier
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.policies import default_policies
from reflexmem.structures.isolation import Broker, ScopedMemory
from reflexmem.structures.model import Limits, Structure
from reflexmem.structures.office import OfficeEnvironment
from reflexmem.structures.office_tasks import canonical_tasks
from reflexmem.structures.refusals import IsolationRefused, RefusalKind, RefusalLog
from reflexmem.structures.runtime import Runtime
from reflexmem.structures.schema import load_packaged
from reflexmem.structures.steps import module_copy

ROOT = load_packaged("office-all-shared")
COND = load_packaged("office-conditional", [ROOT])
COMPOSITE = frozenset({"classify_document", "extract_fields"})
FIELDS = {"amount": 12.5, "merchant": "cafe blue", "date": "2026-01-09", "source_ref": "img-1"}


def test_storage_and_retrieval_refuse_another_modules_namespace() -> None:
    env = OfficeEnvironment()
    log = RefusalLog()
    memory = ScopedMemory.for_structure(env.knowledge("office-index@1"), ROOT, log)
    doc = memory.view("document")
    assert set(doc.namespaces()) == {"docs/common", "docs/rare"}  # images is not even listed
    assert doc.entries("docs/common")
    with pytest.raises(IsolationRefused, match="may only reach"):
        doc.entries("images")
    with pytest.raises(IsolationRefused):
        doc.retrieve("calendar", default_policies()[0], "busy", now_episode=1)
    with pytest.raises(IsolationRefused):
        doc.get("label:amount")  # an image module entry, fetched by ID
    with pytest.raises(IsolationRefused):
        doc.put(MemoryEntry("x", "images", Tier.EPISODIC, "planted"))
    assert memory.view("image").retrieve("images", default_policies()[0], "TOTAL", now_episode=1)
    refusals = log.of_kind(RefusalKind.SCOPE)
    assert [r.field for r in refusals] == ["images", "calendar", "images", "images"]
    assert {r.source for r in refusals} == {"document"}
    assert env.knowledge("office-index@1").get("x") is None  # nothing was written


def test_nobody_but_the_verifier_reads_the_ground_truth() -> None:
    env = OfficeEnvironment()
    canonical_tasks(env, "composite")
    scoped = ScopedMemory.for_structure(env.truth(), ROOT)
    for m in ROOT.modules:
        with pytest.raises(IsolationRefused):
            scoped.view(m.id).get("truth:b-document")
    verifier = ScopedMemory(env.truth(), {"verifier": ("ground-truth",)}).view("verifier")
    assert verifier.get("truth:b-document") is not None


def test_broker_delivers_only_the_edge_fields_along_declared_edges() -> None:
    log = RefusalLog()
    channel = Broker(COND, log).open("ep-1", COMPOSITE)
    msg = channel.send("image", "document", {**FIELDS, "raw_text": "secret", "pixels": [1]})
    assert set(msg.payload) == {"amount", "merchant", "date", "source_ref"}
    assert msg.dropped == ("pixels", "raw_text")
    assert channel.inbox("document") == (msg,)
    with pytest.raises(IsolationRefused, match="no edge document->image"):
        channel.send("document", "image", {"document_type": "receipt", "source_ref": "x"})
    assert [r.check for r in log] == ["declared_edge"]


def test_broker_refuses_when_the_trigger_does_not_fire() -> None:
    channel = Broker(COND).open("ep-2", {"extract_fields"})
    with pytest.raises(IsolationRefused) as info:
        channel.send("image", "document", FIELDS)
    assert info.value.refusal.check == "edge_trigger"


def test_broker_refuses_a_message_that_violates_the_contract() -> None:
    channel = Broker(COND).open("ep-3", COMPOSITE)
    with pytest.raises(IsolationRefused) as missing:
        channel.send("image", "document", {k: v for k, v in FIELDS.items() if k != "amount"})
    assert (missing.value.refusal.field, missing.value.refusal.check) == (
        "image->document.amount",
        "message_schema",
    )
    with pytest.raises(IsolationRefused, match="must be number"):
        channel.send("image", "document", {**FIELDS, "amount": "12.50"})
    assert channel.delivered == []
    assert missing.value.refusal.kind == RefusalKind.MESSAGE


def test_edge_and_episode_message_budgets_are_enforced() -> None:
    channel = Broker(COND).open("ep-4", COMPOSITE)
    channel.send("image", "document", FIELDS)
    channel.send("image", "document", FIELDS)
    with pytest.raises(IsolationRefused) as edge:
        channel.send("image", "document", FIELDS)
    assert edge.value.refusal.check == "edge_budget"
    tight: Structure = COND.evolve(limits=Limits(0, 1))
    channel = Broker(tight).open("ep-5", COMPOSITE)
    channel.send("image", "document", FIELDS)
    with pytest.raises(IsolationRefused) as episode:
        channel.send("image", "document", FIELDS)
    assert episode.value.refusal.check == "episode_budget"


def test_the_executor_refuses_a_tool_the_module_was_not_granted() -> None:
    env = OfficeEnvironment()
    task = next(t for t in canonical_tasks(env, "composite") if t.family == "image")
    image = COND.module_map["image"]
    stripped = COND.evolve(
        modules=tuple(
            module_copy(m, None, tools=("read-text",)) if m.id == "image" else m
            for m in COND.modules
        )
    )
    assert image.tools == ("local-ocr",)
    runtime = Runtime(stripped, env)
    result = runtime.run(task)
    assert result.outcome == "hold"
    assert not result.solved
    assert result.tool_calls == 1
    assert "not on 'image'" in result.holds[0][2]
    assert [(a.caller, a.tool, a.outcome) for a in runtime.executor.audit] == [
        ("image", "local-ocr", "refused")
    ]
