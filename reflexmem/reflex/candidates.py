"""Skill candidates from a cluster: an L0 rule, an L1 policy and L2 examples, as skill files.

Each generated skill is a pre-decision check of one role's trading decisions: options
`proceed` and one verdict that stops the decision (`request_evidence`, a request naming
the absent evidence, when the lesson is about evidence the record lacks; `hold`
otherwise). The three forms of one cluster are separate skills that share a stem:

* **L0 `<stem>_rule`**: the separating conjunction of fixed conditions chooses the
  verdict, anything else of the role proceeds; emitted only when the conjunction is
  right on the fit split at least as often as the quality floor asks.
* **L1 `<stem>_policy`**: a scored policy over the fixed options; its features are the
  fixed conditions, its weights their naive-Bayes log-odds on the fit split (Laplace
  smoothing), the bias the prior log-odds.
* **L2 `<stem>_examples`**: labelled examples of the fit split compared on the record in
  words (`summary`), with the variable arguments as the note's template.

The variable arguments (account, symbol, direction) are the template of the verdict's
note. **Quality floor**: `max(0.9, 1 - (1 - base) / 2)`, with `base` the share of the
role's fit decisions outside the cluster: a check must make at most half the mistakes of
always proceeding, and never be below 90 % right. It is computed from the fit split
(the source experiences) alone, never from the splits that judge the skill.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import polars as pl

from reflexmem.reflex.clusters import Atom, Cluster
from reflexmem.reflex.conditions import compile_all
from reflexmem.reflex.skills import dump_yaml
from reflexmem.reflex.trading import (
    PROCEED,
    SPLIT_SALT,
    TRADE_ENVIRONMENT,
    TRADE_FAMILY,
    observation_schema,
)
from reflexmem.registry import RoleRegistry

EXAMPLES_PER_CLASS = 60
MAX_FEATURES = 4
SUFFIX = {"L0": "_rule", "L1": "_policy", "L2": "_examples"}
ESCALATE = {"L0": "L1", "L1": "L2", "L2": "L3"}
FLOOR_RULE = "max(0.9, 1 - (1 - base) / 2), base = fit share outside the cluster"


def quality_floor(base: float) -> float:
    """The accuracy a check of a cluster with this base rate must reach (see module doc)."""
    return round(max(0.9, 1.0 - (1.0 - base) / 2.0), 4)


def stem(cluster: Cluster, taken: set[str]) -> str:
    """A readable, unused skill-ID stem: role and the separating conditions."""
    names = [a.name for a in cluster.conjunction] or [cluster.pattern.split(":")[-1][:8]]
    base = "_".join([cluster.role_id, *names])[: 63 - len("_examples")].rstrip("_")
    if base not in taken:
        return base
    key = cluster.pattern.split(":")[-1][:6]
    return f"{base[: 63 - len('_examples') - 7]}_{key}"


def _verdict(cluster: Cluster) -> tuple[str, dict[str, Any]]:
    atoms = cluster.conjunction
    absent = [a.name.removesuffix("_missing") for a in atoms if a.name.endswith("_missing")]
    args = " ".join(f"{{{v}}}" for v in ("direction", "symbol"))
    lesson = cluster.gist.replace("{", "(").replace("}", ")")
    if atoms and len(absent) == len(atoms):
        note = f"request {', '.join(absent)} before {args} for {{account}}; lesson: {lesson}"
        reason = f"{'_'.join(absent)}_missing"[:64]
        return "request_evidence", {
            "status": "request",
            "reason": reason,
            "missing": absent,
            "note": note[:400],
        }
    reason = ("lesson:" + "_".join(a.name for a in atoms))[:64] if atoms else "lesson"
    note = f"hold {args} for {{account}}: {lesson}"
    return "hold", {"status": "hold", "reason": reason, "note": note[:400]}


def _common(
    cluster: Cluster,
    skill_id: str,
    layer: str,
    registry: RoleRegistry,
    now: datetime,
    sources: Sequence[str],
) -> dict[str, Any]:
    trigger = [{"field": "role_id", "equals": cluster.role_id}]
    return {
        "skill_id": skill_id,
        "version": 1,
        "owner": cluster.role_id,
        "description": f"{layer} check learned from: {cluster.gist}",
        "source_experiences": sorted(set(sources)),
        "state": "candidate",
        "provenance": {
            "kind": "episode_cluster",
            "namespace": cluster.namespace,
            "pattern": cluster.pattern,
            "outcome_class": cluster.outcome_class,
            "lesson": cluster.gist,
            "rule": None,
            "rule_state": None,
            "generated_at": now.isoformat(),
            "split_salt": SPLIT_SALT,
            "fit_members": cluster.members,
            "fit_contrast": cluster.contrast,
            "fixed_conditions": [a.name for a in cluster.fixed],
            "variable_arguments": list(cluster.variable),
            "fit_precision": round(cluster.precision, 4),
            "fit_recall": round(cluster.recall, 4),
            "quality_floor_rule": FLOOR_RULE,
        },
        "applicability": {
            "task_family": TRADE_FAMILY,
            "environment_version": TRADE_ENVIRONMENT,
            "trigger": trigger,
            "input_contract": observation_schema(registry),
        },
        "validation": {
            "evaluation_set": [],
            "counter_examples": [],
            "quality_floor": quality_floor(cluster.base_rate),
        },
        "bounds": {"permissions": {"tools": [], "effects": ["read"]}, "retry_limit": 0},
        "fallback": {"escalation_target": ESCALATE[layer], "previous_version": None},
    }


def _decision(cluster: Cluster, layer: str, procedure: dict[str, Any]) -> dict[str, Any]:
    option, verdict = _verdict(cluster)
    return {
        "layer": layer,
        "options": [PROCEED, option],
        "procedure": procedure,
        "action": None,
        "verdicts": {option: verdict},
    }


def rule_accuracy(cluster: Cluster) -> float:
    """How often the L0 rule is right on the fit split (precision and recall combined)."""
    if not cluster.conjunction:
        return 0.0
    hits = cluster.recall * cluster.members
    false_hits = hits / cluster.precision - hits if cluster.precision > 0 else 0.0
    errors = (cluster.members - hits) + false_hits
    total = cluster.members + cluster.contrast
    return 1.0 - errors / total if total else 0.0


def _rule_procedure(cluster: Cluster) -> dict[str, Any]:
    option, _ = _verdict(cluster)
    names = [a.name for a in cluster.conjunction]
    return {
        "kind": "rules",
        "rules": [
            {
                "when": [dict(a.condition) for a in cluster.conjunction],
                "choose": option,
                "reason": "fixed conditions of the lesson: " + ", ".join(names),
            },
            {
                "when": [{"field": "role_id", "equals": cluster.role_id}],
                "choose": PROCEED,
                "reason": "the lesson's conditions do not hold",
            },
        ],
    }


def _log_odds(hit_members: float, members: int, hit_contrast: float, contrast: int) -> float:
    p_member = (hit_members + 1.0) / (members + 2.0)
    p_contrast = (hit_contrast + 1.0) / (contrast + 2.0)
    return math.log(p_member / p_contrast)


def _policy_procedure(cluster: Cluster, atoms: Sequence[Atom]) -> dict[str, Any]:
    option, _ = _verdict(cluster)
    features: dict[str, Any] = {}
    weights: dict[str, float] = {}
    bias = math.log((cluster.members + 1.0) / (cluster.contrast + 1.0))
    m, c = cluster.members, cluster.contrast
    for atom in atoms:
        on = _log_odds(atom.cluster_rate * m, m, atom.contrast_rate * c, c)
        off = _log_odds((1 - atom.cluster_rate) * m, m, (1 - atom.contrast_rate) * c, c)
        features[atom.name] = dict(atom.condition)
        weights[atom.name] = round(on - off, 4)
        bias += off
    weights["bias"] = round(bias, 4)
    return {
        "kind": "scores",
        "features": features,
        "weights": {PROCEED: {"bias": 0.0}, option: weights},
        "temperature": 1.0,
    }


def _spread(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    if frame.height <= n:
        return frame
    step = frame.height / n
    return frame[[int(i * step) for i in range(n)]]


def _examples_procedure(cluster: Cluster, fit: pl.DataFrame) -> tuple[dict[str, Any], list[str]]:
    option, _ = _verdict(cluster)
    ordered = fit.sort("decided_at", "episode_id")
    members = _spread(ordered.filter(pl.col("pattern") == cluster.pattern), EXAMPLES_PER_CLASS)
    rest = ordered.filter(pl.col("pattern").is_null() | (pl.col("pattern") != cluster.pattern))
    contrast = _spread(rest, EXAMPLES_PER_CLASS)
    examples = [
        {"input": {"summary": s}, "expected": label, "episode_id": e}
        for rows, label in ((members, option), (contrast, PROCEED))
        for s, e in rows.select("summary", "episode_id").iter_rows()
    ]
    used = [str(e["episode_id"]) for e in examples]
    return {"kind": "examples", "text_fields": ["summary"], "k": 3, "examples": examples}, used


def candidate_files(
    cluster: Cluster,
    fit: pl.DataFrame,
    registry: RoleRegistry,
    *,
    now: datetime,
    taken: set[str],
) -> list[tuple[str, str]]:
    """(skill ID, YAML text) of every form this cluster supports, cheapest layer first.

    `fit` is the role's fit split as text columns with `pattern`, `episode_id`,
    `decided_at` (text) and `summary`.
    """
    base = stem(cluster, taken)
    sources = list(cluster.source_episodes)
    out: list[dict[str, Any]] = []
    floor = quality_floor(cluster.base_rate)
    if cluster.conjunction and rule_accuracy(cluster) >= floor:
        spec = _common(cluster, base + SUFFIX["L0"], "L0", registry, now, sources)
        spec["decision"] = _decision(cluster, "L0", _rule_procedure(cluster))
        spec["decision"]["confidence_floor"] = 1.0
        out.append(spec)
    separating = [a for a in cluster.fixed if a.contrast_rate < a.cluster_rate][:MAX_FEATURES]
    if separating:
        feats = separating or list(cluster.fixed[:1])
        if feats:
            spec = _common(cluster, base + SUFFIX["L1"], "L1", registry, now, sources)
            spec["decision"] = _decision(cluster, "L1", _policy_procedure(cluster, feats))
            out.append(spec)
    if fit.filter(pl.col("pattern") == cluster.pattern).height and fit.height > cluster.members:
        procedure, used = _examples_procedure(cluster, fit)
        spec = _common(cluster, base + SUFFIX["L2"], "L2", registry, now, [*sources, *used])
        spec["decision"] = _decision(cluster, "L2", procedure)
        out.append(spec)
    header = "# Generated by REFLEX candidate generation; the ledger decides its state.\n"
    return [(s["skill_id"], header + dump_yaml(s)) for s in out]


def matches(conditions: Sequence[dict[str, Any]], frame: pl.DataFrame) -> pl.Series:
    """Where every condition holds (a helper for reports and tests)."""
    return frame.select(compile_all(conditions)).to_series()
