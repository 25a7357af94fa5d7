"""A scope with two activated bundles, A then B, and episodes under B that drift (or not).

The way `test_structures_db.py` plants drift: B narrows the document module's knowledge
and repins a skill and the index; its baseline comes from a validation stream with no
rare document type, so it looks fine; the live stream then brings rare types every
fourth task and B's document success drops far below its baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from reflexmem.structures import operations as ops
from reflexmem.structures import rollout
from reflexmem.structures.bundle import Bundle
from reflexmem.structures.evaluate import replay
from reflexmem.structures.experiment_b import candidates
from reflexmem.structures.model import Structure
from reflexmem.structures.mutations import Step
from reflexmem.structures.office import OfficeEnvironment
from reflexmem.structures.office_tasks import stream, task_sets

SCOPE = "office"


@dataclass(frozen=True)
class TwoBundles:
    """The root bundle R, then A, then B (active), and the structures behind A and B."""

    env: OfficeEnvironment
    root: Bundle
    a: Bundle
    b: Bundle
    a_structure: Structure
    b_structure: Structure


def narrowed_and_repinned(engine: sa.Engine, parent_id: str) -> Structure:
    """B's structure: the document module narrowed to common docs, skill and index repinned."""
    narrowed = ops.mutate(
        engine,
        parent_id,
        Step("narrow_scope", {"module": "document", "knowledge": ["docs/common"]}),
    )
    return ops.mutate(
        engine,
        narrowed.child.structure_id,
        Step(
            "repin",
            {"skills": {"classify-document": "classify-document@2"}, "index": "office-index@2"},
        ),
    ).child


def two_bundles(engine: sa.Engine) -> TwoBundles:
    """Activate the root, then A (one edge fewer), then B (narrowed and repinned)."""
    env = OfficeEnvironment()
    sets = task_sets(env, "composite", 0)
    root = candidates()["all_shared"]
    ops.ensure_root(engine, SCOPE, root, replay(root, env, sets.selection))
    found = rollout.active(engine, SCOPE)
    assert found is not None
    a = ops.mutate(engine, root.structure_id, Step("delete_edge", {"edge": "document->schedule"}))
    bundle_a = rollout.activate(
        engine, SCOPE, a.child.structure_id, replay(a.child, env, sets.selection)
    )
    b = narrowed_and_repinned(engine, a.child.structure_id)
    validation = stream(env, "composite", 3, per_family=40)  # no rare type: it looks fine
    bundle_b = rollout.activate(engine, SCOPE, b.structure_id, replay(b, env, validation))
    return TwoBundles(env, found[0], bundle_a, bundle_b, a.child, b)


def drift_under_b(engine: sa.Engine, env: OfficeEnvironment) -> None:
    """Episodes under the active bundle with rare document types every fourth task."""
    rollout.run_active(engine, SCOPE, env, stream(env, "composite", 2, per_family=40, rare_every=4))


def steady_under_b(engine: sa.Engine, env: OfficeEnvironment) -> None:
    """Episodes under the active bundle like its validation stream: no drift."""
    rollout.run_active(engine, SCOPE, env, stream(env, "composite", 4, per_family=40))
