"""Structure files: YAML validated against the JSON Schema, then the static checks.

The schema is a file (`data/structure.schema.json`, Draft 2020-12) rather than a set
of Python classes because it is the contract other tools and reviewers read; every
object in it is closed (`additionalProperties: false`), so a misspelt key is an error,
not a silently ignored option. jsonschema reports each failure with its JSON path,
which becomes the refusal's field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from reflexmem.structures.checks import static_checks
from reflexmem.structures.model import Structure, structure_from_data
from reflexmem.structures.refusals import Refusal, RefusalKind, StructureRefused

DATA = resources.files("reflexmem.structures") / "data"


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of structure G."""
    loaded: dict[str, Any] = json.loads((DATA / "structure.schema.json").read_text())
    return loaded


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(schema())


def _path(parts: Sequence[Any]) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(document)"


def schema_refusals(data: Any, source: str, kind: RefusalKind = RefusalKind.FILE) -> list[Refusal]:
    """Every JSON Schema failure of a parsed document, ordered by path."""
    errors = sorted(_validator().iter_errors(data), key=lambda e: [str(p) for p in e.path])
    sid = data.get("structure_id") if isinstance(data, dict) else None
    return [
        Refusal(kind, source, _path(list(e.absolute_path)), "schema", e.message, sid)
        for e in errors
    ]


def parse_structure(
    text: str,
    source: str,
    parents: Sequence[Structure] = (),
    *,
    kind: RefusalKind = RefusalKind.FILE,
) -> Structure:
    """Parse, schema-validate and statically check a YAML document, or raise.

    :class:`StructureRefused` carries every failure with `source`, field and check.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        field = f"line {where.line + 1}, column {where.column + 1}" if where else "(document)"
        raise StructureRefused([Refusal(kind, source, field, "yaml", str(exc))]) from exc
    found = schema_refusals(data, source, kind)
    if found:
        raise StructureRefused(found)
    structure = structure_from_data(data)
    found = static_checks(structure, parents, source=source, kind=kind)
    if found:
        raise StructureRefused(found)
    return structure


def load_structure(path: str | Path, parents: Sequence[Structure] = ()) -> Structure:
    """Load one structure file; refusals name the file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise StructureRefused(
            [Refusal(RefusalKind.FILE, str(p), "(file)", "readable", str(exc))]
        ) from exc
    return parse_structure(text, str(p), parents)


def packaged(name: str) -> str:
    """Text of a structure shipped with the package (`data/<name>.yaml`)."""
    return (DATA / f"{name}.yaml").read_text(encoding="utf-8")


def load_packaged(name: str, parents: Sequence[Structure] = ()) -> Structure:
    """Load a packaged structure (experiment B's candidates live here)."""
    return parse_structure(packaged(name), f"reflexmem/structures/data/{name}.yaml", parents)
