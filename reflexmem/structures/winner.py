"""The winner rebuilt from the search parent by its recorded lineage.

A registered structure must be reproducible: replaying the winner's lineage of
operator steps on the parent has to give exactly the structure that was scored, and
the rebuilt modules then name their origins in the parent.
"""

from __future__ import annotations

from reflexmem.structures.model import Structure
from reflexmem.structures.mutations import Mutation, checked, replay_steps
from reflexmem.structures.search import SearchResult


def rebuild_winner(result: SearchResult) -> Mutation:
    """The winner rebuilt from the search parent by its lineage, checked against it.

    Its modules then name their origins in the parent, and its fingerprint must equal
    the scored one: the recorded lineage really produces what was evaluated.
    """
    root = result.parent.structure

    def resolve(structure_id: str) -> Structure:
        return result.candidates[structure_id].structure

    rebuilt = checked(replay_steps(root, result.winner.lineage, resolve))
    if rebuilt.child.fingerprint() != result.winner.structure.fingerprint():
        raise RuntimeError("the winner's lineage does not reproduce the scored structure")
    return rebuilt


def chosen(result: SearchResult) -> Structure:
    """The version the selection chose: the rebuilt winner if it improved, else the parent."""
    return rebuild_winner(result).child if result.improved else result.winner.structure
