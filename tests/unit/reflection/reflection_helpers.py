"""Types of the reflection fixtures (tests/unit/reflection/conftest.py), for annotations."""

from __future__ import annotations

from collections.abc import Callable

from reflexmem.reflection.types import EvidenceItem, ReflectionInput
from reflexmem.registry import RolePolicy

MakeCase = Callable[..., ReflectionInput]
EvidenceFor = Callable[[str], list[EvidenceItem]]
RoleOf = Callable[[str], RolePolicy]
