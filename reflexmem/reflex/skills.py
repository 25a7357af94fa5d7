"""Skill files: schema-validated YAML with every field of a skill's contract (docs/design.md §10).

A skill file is checked in two steps before anything uses it. The JSON Schema
(`skill.schema.json`, shipped beside this module) fixes the shape; then the meaning:
the owner is a registered role, the skill's tools and effects are within the role's
permissions, its action's tool is among its own tools, every choice a procedure or an
example can produce is one of its options, it escalates to a higher layer than its own,
its templates name only fields its input contract declares, and its schemas are valid
JSON Schemas. The first problem stops the load with the file, the field and the reason;
nothing is partly loaded. Checks that need the ledger (the previous version, the parent,
the lifecycle state) are `reflexmem.reflex.versions.register_skill`'s.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from reflexmem.executor_types import Caller, Effect
from reflexmem.ledger.reflex_enums import Layer, SkillState
from reflexmem.registry import RoleRegistry

SCHEMA_PATH = Path(__file__).with_name("skill.schema.json")
SKILLS_DIR = Path(__file__).with_name("skills")
DEFAULT_CONFIDENCE_FLOOR = {Layer.L0: 1.0, Layer.L1: 0.7, Layer.L2: 0.6, Layer.L3: 0.7}
"""A layer's confidence floor when the skill names none; see docs/skills.md for why."""
TEMPLATE_NAMES = frozenset({"choice", "skill_id", "version", "episode_id"})
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class SkillLoadError(ValueError):
    """A skill file was refused: `path`, the dotted `field` and the `reason`."""

    def __init__(self, path: str | Path, field: str, reason: str) -> None:
        super().__init__(f"{path}: {field}: {reason}")
        self.path = str(path)
        self.field = field
        self.reason = reason


_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_yaml(text: str) -> Any:
    """Parse YAML with the safe loader, libyaml's when installed.

    Generated skill files list thousands of source experiences; the pure-Python parser
    takes a tenth of a second on each.
    """
    return yaml.load(text, Loader=_LOADER)


def dump_yaml(data: Any) -> str:
    """Write YAML with the safe dumper (libyaml's when installed), keys in given order."""
    text: str = yaml.dump(data, Dumper=_DUMPER, sort_keys=False, allow_unicode=True, width=100)
    return text


@cache
def skill_schema() -> Draft202012Validator:
    """The compiled JSON Schema of skill files."""
    return Draft202012Validator(json.loads(SCHEMA_PATH.read_text(encoding="utf-8")))


@dataclass(frozen=True)
class SkillSpec:
    """One validated skill version; `raw` is the file's content as validated."""

    raw: Mapping[str, Any]
    source: str
    source_yaml: str

    def _get(self, *path: str, default: Any = None) -> Any:
        node: Any = self.raw
        for key in path:
            if not isinstance(node, Mapping) or key not in node:
                return default
            node = node[key]
        return node

    @property
    def skill_id(self) -> str:
        """The stable skill ID."""
        return str(self.raw["skill_id"])

    @property
    def version(self) -> int:
        """The version number (1, 2, ...)."""
        return int(self.raw["version"])

    @property
    def owner(self) -> str:
        """The owning role."""
        return str(self.raw["owner"])

    @property
    def state(self) -> SkillState:
        """The lifecycle state the file claims."""
        return SkillState(self.raw["state"])

    @property
    def task_family(self) -> str:
        """The task family it decides."""
        return str(self.raw["applicability"]["task_family"])

    @property
    def environment_version(self) -> str:
        """The environment version it was validated in."""
        return str(self.raw["applicability"]["environment_version"])

    @property
    def layer(self) -> Layer:
        """L0, L1 or L2."""
        return Layer(self.raw["decision"]["layer"])

    @property
    def options(self) -> tuple[str, ...]:
        """The fixed set of choices."""
        return tuple(self.raw["decision"]["options"])

    @property
    def procedure(self) -> dict[str, Any]:
        """How it chooses (rules, scores or examples)."""
        return dict(self.raw["decision"]["procedure"])

    @property
    def escalation_target(self) -> Layer:
        """Where an answer it cannot give goes."""
        return Layer(self.raw["fallback"]["escalation_target"])

    @property
    def retry_limit(self) -> int:
        """Retries of its tool call after the first attempt."""
        return int(self.raw["bounds"]["retry_limit"])

    @property
    def quality_floor(self) -> float:
        """The accuracy below which it is not promoted."""
        return float(self.raw["validation"]["quality_floor"])

    @property
    def key(self) -> str:
        """`skill_id@version`, the name of this version everywhere."""
        return f"{self.skill_id}@{self.version}"

    @property
    def source_experiences(self) -> tuple[str, ...]:
        """Episode IDs this version was learned from (never part of its evaluation)."""
        return tuple(self.raw["source_experiences"])

    @property
    def input_contract(self) -> dict[str, Any]:
        """JSON Schema of the observations this skill applies to."""
        return dict(self.raw["applicability"]["input_contract"])

    @property
    def trigger(self) -> list[dict[str, Any]]:
        """Conditions that must hold for the skill to be considered at all."""
        return list(self._get("applicability", "trigger", default=[]))

    @property
    def rejection_conditions(self) -> list[dict[str, Any]]:
        """Conditions under which the skill refuses an input and escalates."""
        return list(self._get("fallback", "rejection_conditions", default=[]))

    @property
    def confidence_floor(self) -> float:
        """Below this confidence the skill's answer escalates."""
        value = self._get("decision", "confidence_floor")
        return float(value) if value is not None else DEFAULT_CONFIDENCE_FLOOR[self.layer]

    @property
    def action(self) -> dict[str, Any] | None:
        """`{tool, arguments}` (arguments are templates over the observation), or None."""
        action = self._get("decision", "action")
        return dict(action) if action else None

    @property
    def argument_schema(self) -> dict[str, Any]:
        """JSON Schema the action's filled-in arguments must satisfy."""
        return dict(self._get("decision", "argument_schema", default={}))

    @property
    def tools(self) -> frozenset[str]:
        """Tools this version may call."""
        return frozenset(self.raw["bounds"]["permissions"]["tools"])

    @property
    def effects(self) -> frozenset[Effect]:
        """Effects this version may cause."""
        return frozenset(Effect(e) for e in self.raw["bounds"]["permissions"]["effects"])

    @property
    def idempotency_template(self) -> str | None:
        """Template of the idempotency key of the action (None: the episode ID is used)."""
        value = self._get("bounds", "idempotency", "key")
        return str(value) if value is not None else None

    @property
    def max_cost(self) -> float | None:
        """The budget of one episode's tool calls, if bounded."""
        value = self._get("bounds", "budget", "max_cost")
        return float(value) if value is not None else None

    @property
    def post_conditions(self) -> list[dict[str, Any]]:
        """Checks on the tool's result, beyond the tool's own verifier."""
        return list(self._get("validation", "post_conditions", default=[]))

    @property
    def evaluation_set(self) -> list[dict[str, Any]]:
        """Labelled inputs held apart from the examples and source experiences."""
        return list(self.raw["validation"]["evaluation_set"])

    @property
    def counter_examples(self) -> list[dict[str, Any]]:
        """Labelled inputs the skill must not get wrong (or must refuse)."""
        return list(self._get("validation", "counter_examples", default=[]))

    @property
    def previous_version(self) -> int | None:
        """The version this one replaces (its parent), if any."""
        value = self._get("fallback", "previous_version")
        return int(value) if value is not None else None

    @property
    def derived_from(self) -> str | None:
        """Another skill's `id@version` this one was derived from, if any."""
        value = self.raw.get("derived_from")
        return str(value) if value is not None else None

    @property
    def verdicts(self) -> dict[str, dict[str, Any]]:
        """Options that stop the task as a `hold` or a `request` instead of acting."""
        return {str(k): dict(v) for k, v in self._get("decision", "verdicts", default={}).items()}

    @property
    def provenance(self) -> dict[str, Any]:
        """Where a generated version came from (lesson pattern, memory rule), if recorded."""
        return dict(self.raw.get("provenance") or {})

    def valid_period(self) -> tuple[datetime | None, datetime | None]:
        """The validity period (`valid_from`, `valid_until`), either end open."""
        ends = [self._get("applicability", k) for k in ("valid_from", "valid_until")]
        parsed = [datetime.fromisoformat(str(v)) if v is not None else None for v in ends]
        return parsed[0], parsed[1]

    @property
    def sha256(self) -> str:
        """Digest of the contract without its lifecycle state (a state change is not an edit)."""
        body = {k: v for k, v in self.raw.items() if k != "state"}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()

    def caller(self) -> Caller:
        """The executor identity of this version: its tools, effects and argument contract."""
        schemas = {}
        action = self.action
        if action is not None and self.argument_schema:
            schemas[str(action["tool"])] = self.argument_schema
        return Caller(f"skill:{self.key}", self.tools, self.effects, schemas)


def _where(path: Iterable[Any]) -> str:
    return ".".join(str(p) for p in path) or "<root>"


def _placeholders(template: object) -> set[str]:
    if isinstance(template, str):
        return set(_PLACEHOLDER.findall(template))
    if isinstance(template, Mapping):
        return set().union(*(_placeholders(v) for v in template.values()))
    if isinstance(template, list):
        return set().union(*(_placeholders(v) for v in template))
    return set()


def _choices(procedure: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, choice) for every choice the procedure can produce."""
    kind = procedure["kind"]
    if kind == "rules":
        return [(f"rules.{i}.choose", r["choose"]) for i, r in enumerate(procedure["rules"])]
    if kind == "scores":
        return [(f"weights.{o}", o) for o in procedure["weights"]]
    return [(f"examples.{i}.expected", e["expected"]) for i, e in enumerate(procedure["examples"])]


def _check_meaning(spec: SkillSpec, registry: RoleRegistry) -> None:
    path = spec.source

    def refuse(field: str, reason: str) -> SkillLoadError:
        return SkillLoadError(path, field, reason)

    if spec.owner not in registry:
        known = ", ".join(registry.ids)
        raise refuse("owner", f"role {spec.owner!r} is not registered (known: {known})")
    role = registry.get(spec.owner).policy.permissions
    extra_tools = sorted(spec.tools - set(role.tools))
    if extra_tools:
        raise refuse(
            "bounds.permissions.tools",
            f"{extra_tools} widen the permissions of role {spec.owner!r} ({list(role.tools)})",
        )
    extra_effects = sorted(str(e) for e in spec.effects - set(role.effects))
    if extra_effects:
        raise refuse(
            "bounds.permissions.effects",
            f"{extra_effects} widen the permissions of role {spec.owner!r}",
        )
    action = spec.action
    if action is not None and action["tool"] not in spec.tools:
        raise refuse("decision.action.tool", f"{action['tool']!r} is not in bounds.permissions")
    options = set(spec.options)
    for field, choice in _choices(spec.procedure):
        if choice not in options:
            raise refuse(f"decision.procedure.{field}", f"{choice!r} is not an option")
    for name in ("evaluation_set", "counter_examples"):
        for i, item in enumerate(spec.raw["validation"].get(name, [])):
            if item["expected"] not in options:
                raise refuse(
                    f"validation.{name}.{i}.expected", f"{item['expected']!r} is not an option"
                )
    if spec.escalation_target.rank <= spec.layer.rank:
        raise refuse("fallback.escalation_target", f"must be above the skill's layer {spec.layer}")
    for option, verdict in spec.verdicts.items():
        where = f"decision.verdicts.{option}"
        if option not in options:
            raise refuse(where, f"{option!r} is not an option")
        if verdict["status"] == "request" and not verdict.get("missing"):
            raise refuse(f"{where}.missing", "a request names what is missing")
    previous = spec.previous_version
    if previous is not None and previous >= spec.version:
        raise refuse("fallback.previous_version", "must be older than version")
    if previous is None and spec.version > 1:
        raise refuse("fallback.previous_version", "a version after the first names its parent")
    for field, schema in (
        ("applicability.input_contract", spec.input_contract),
        ("decision.argument_schema", spec.argument_schema),
    ):
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise refuse(field, f"not a valid JSON Schema: {exc.message}") from exc
    start, end = spec.valid_period()
    if start is not None and end is not None and end <= start:
        raise refuse("applicability.valid_until", "must be after valid_from")
    declared = set(spec.input_contract.get("properties", {}))
    names = declared | TEMPLATE_NAMES
    notes = [(f"decision.verdicts.{o}.note", v.get("note")) for o, v in spec.verdicts.items()]
    for field, template in (
        ("decision.action.arguments", action["arguments"] if action else None),
        ("bounds.idempotency.key", spec.idempotency_template),
        *notes,
    ):
        unknown = sorted(_placeholders(template) - names)
        if unknown:
            raise refuse(field, f"placeholders {unknown} are not input_contract properties")


def parse_skill(text: str, source: str, registry: RoleRegistry) -> SkillSpec:
    """Validate one skill file's text; `SkillLoadError` names the file, field and reason."""
    try:
        raw = load_yaml(text)
    except yaml.YAMLError as exc:
        raise SkillLoadError(source, "<file>", f"not valid YAML: {exc}") from exc
    error = best_match(skill_schema().iter_errors(raw))
    if error is not None:
        raise SkillLoadError(source, _where(error.absolute_path), error.message)
    spec = SkillSpec(raw=raw, source=source, source_yaml=text)
    _check_meaning(spec, registry)
    return spec


def load_skill_file(path: Path, registry: RoleRegistry) -> SkillSpec:
    """Read and validate one skill file."""
    return parse_skill(path.read_text(encoding="utf-8"), str(path), registry)


def load_skill_files(paths: Iterable[Path], registry: RoleRegistry) -> tuple[SkillSpec, ...]:
    """Validate every file (all or nothing); two files with one `id@version` is an error."""
    specs: dict[str, SkillSpec] = {}
    for path in sorted(paths):
        spec = load_skill_file(path, registry)
        if spec.key in specs:
            raise SkillLoadError(path, "version", f"{spec.key} is also in {specs[spec.key].source}")
        specs[spec.key] = spec
    return tuple(specs.values())
