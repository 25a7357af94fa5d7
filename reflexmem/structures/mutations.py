"""Mutation operators: pure functions from a parent structure to a recorded child.

Each operator (in `operators`) returns a :class:`Mutation`: the child (lifecycle
`candidate`, its parent named, an ID derived from its fingerprint), the parent(s) and
the step (operator and arguments, JSON-able) that made it, so any child can be rebuilt
from its lineage with :func:`replay_steps`. An operator refuses arguments that do not
make sense (an unknown module, an edge that is not there) with
:class:`MutationRefused`; whether a child is *allowed* is not its business:
:func:`checked` runs the static checks on it, and a widening child is refused there,
with the operator named as the source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from reflexmem.structures.checks import static_checks
from reflexmem.structures.model import Structure
from reflexmem.structures.operators import (
    add_edge,
    conditionalize_edge,
    delete_edge,
    merge,
    narrow_scope,
    recombine,
    repin,
    specialize,
    split,
)
from reflexmem.structures.refusals import RefusalKind, StructureRefused
from reflexmem.structures.steps import (
    Mutation,
    MutationRefused,
    Step,
    finish_child,
    module_copy,
)

__all__ = [
    "OPERATORS",
    "Mutation",
    "MutationRefused",
    "Step",
    "add_edge",
    "apply_step",
    "checked",
    "conditionalize_edge",
    "delete_edge",
    "merge",
    "narrow_scope",
    "recombine",
    "repin",
    "replay_steps",
    "specialize",
    "split",
]


OPERATORS: dict[str, Callable[..., Mutation]] = {
    "split": split,
    "merge": merge,
    "narrow_scope": narrow_scope,
    "delete_edge": delete_edge,
    "add_edge": add_edge,
    "conditionalize_edge": conditionalize_edge,
    "specialize": specialize,
    "recombine": recombine,
}
"""The eight search operators of docs/design.md §11 by name (`repin` is a bundle change)."""


def apply_step(
    parent: Structure, step: Step, resolve: Callable[[str], Structure] | None = None
) -> Mutation:
    """Apply one recorded step; `resolve` finds a recombination's other parent by ID."""
    if step.operator == "repin":
        return repin(parent, **step.args)
    fn = OPERATORS.get(step.operator)
    if fn is None:
        raise MutationRefused(step.operator, "operator", "unknown operator")
    args = dict(step.args)
    if step.operator == "recombine":
        if resolve is None:
            raise MutationRefused("recombine", "other", "no resolver for the other parent")
        return recombine(parent, resolve(str(args.pop("other"))), **args)
    return fn(parent, **args)


def replay_steps(
    parent: Structure,
    steps: Sequence[Step],
    resolve: Callable[[str], Structure] | None = None,
) -> Mutation:
    """Apply steps in order; one child of `parent` that records every step.

    Each step's `derived_from` points at the intermediate structure; they are composed
    so that the child's modules name their origins in `parent`, which is what the
    static checks compare against.
    """
    current = parent
    parents: tuple[Structure, ...] = (parent,)
    origin: dict[str, tuple[str, ...]] = {m.id: (m.id,) for m in parent.modules}
    done: list[Step] = []
    for i, step in enumerate(steps):
        m = apply_step(current, step, resolve)
        if i == 0:
            parents = m.parents
        elif len(m.parents) > 1:
            parents = (*parents, *m.parents[1:])
        origin = {
            x.id: tuple(dict.fromkeys(o for d in x.derived_from for o in origin.get(d, (d,))))
            for x in m.child.modules
        }
        current, done = m.child, [*done, *m.steps]
    mods = tuple(module_copy(x, origin[x.id]) for x in current.modules)
    return finish_child(current.evolve(modules=mods), done, parents)


def checked(mutation: Mutation) -> Mutation:
    """The mutation if its child passes the static checks against its parents, else raise."""
    found = static_checks(
        mutation.child,
        mutation.parents,
        source=mutation.operator,
        kind=RefusalKind.MUTATION,
    )
    if found:
        raise StructureRefused(found)
    return mutation
