"""Stages of the skill learning path (docs/design.md §10): generate candidates, check new decisions.

* `generate_candidates` clusters the reflected `trade_decision` episodes known at the
  cycle's clock by lesson (`reflexmem.reflex.clusters`), separates fixed conditions
  from variable arguments and registers L0, L1 and L2 candidates for every lesson not
  generalised yet (`reflexmem.reflex.candidates`). Beside them, every confirmed
  procedural rule of a role's memory that says its condition makes outcomes worse
  (`reflexmem.memory.outcome_rules`) becomes an L0 check that holds such decisions,
  once per condition (`reflexmem.reflex.rule_checks`, which says which conditions a
  check can read and how such a check is promoted: on outcomes alone). Each
  version's sources are written to `skill_sources` in the registration's transaction,
  and every form of one lesson is registered in one transaction: a lesson is generated
  once (a rerun skips any lesson with a version), so a crash must never leave it half
  registered. Versions a crash left unlinked to the tracking store are linked first
  (found by their tags).
* `check_decisions` routes every decision made since the last run through the usable
  trading checks (`reflexmem.reflex.gate`): a limited check only inside its sticky
  rollout, an active one everywhere; each judgement is one episode. Decisions are
  checked once: the run's window starts after the previous run's clock.

Both are idempotent by their own selection. Lifecycle moves and audits are in
`skill_lifecycle`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.bulk import bulk_insert
from reflexmem.ledger.skill_cycle_models import CheckKind
from reflexmem.ledger.sqlio import to_utc
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.memory.ledger_store import LedgerMemoryStore
from reflexmem.memory.outcome_rules import live_rules, newest_rules
from reflexmem.operations.resources import Resources
from reflexmem.reflex.candidates import candidate_files
from reflexmem.reflex.clusters import MIN_CLUSTER, describe, find_patterns
from reflexmem.reflex.cycle_ledger import (
    generated_clusters,
    last_through,
    load_views,
    record_check,
    write_sources,
)
from reflexmem.reflex.evidence import VersionView
from reflexmem.reflex.gate import check_frame
from reflexmem.reflex.rule_checks import rule_check_file
from reflexmem.reflex.skills import SkillSpec, parse_skill
from reflexmem.reflex.snapshot import load_snapshot
from reflexmem.reflex.tracking import Also, link_untracked, register_all_tracked, register_tracked
from reflexmem.reflex.trading import (
    TRADE_FAMILY,
    judged_frame,
    read_decisions,
    read_episodes,
)
from reflexmem.reflex.versions import VersionInfo
from reflexmem.structures import rollout, trading_gate

ACTOR = "reflex-cycle"
CHECK_CHUNK = 50_000
"""Decisions judged per batch: memory stays bounded however long the window is."""


def clock(res: Resources, as_of: datetime | None) -> datetime | None:
    """The cycle's clock: the `as_of` asked for, else the newest bar (never the wall clock)."""
    when = as_of if as_of is not None else res.prices.newest()
    return None if when is None else to_utc(when)


@dataclass(frozen=True)
class GenerationReport:
    """What candidate generation found and registered."""

    as_of: datetime | None
    episodes: int = 0
    clusters: int = 0
    registered: tuple[str, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckReport:
    """What one run of the pre-decision checks judged."""

    as_of: datetime | None
    after: datetime | None = None
    decisions: int = 0
    episodes: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    by_skill: dict[str, int] = field(default_factory=dict)


def generate_candidates(
    res: Resources, as_of: datetime | None = None, min_members: int = MIN_CLUSTER
) -> GenerationReport:
    """Register L0/L1/L2 candidates for every lesson not generalised yet."""
    now = clock(res, as_of)
    if now is None:
        return GenerationReport(as_of=None)
    registry = res.registry
    with res.engine.connect() as conn:
        episodes = read_episodes(conn, registry, through=now)
        views = load_views(conn)
    judged = judged_frame(episodes, registry).with_columns(episodes["episode_index"])
    fit = judged.filter(pl.col("split") == "fit")
    wanted = (
        find_patterns(fit, min_members=min_members)
        .select("role_id", "pattern")
        .unique()
        .sort("role_id", "pattern")
    )
    link_untracked(res.engine, res.skill_tracker, [(v.spec, v.mlflow_model_version) for v in views])
    done = generated_clusters(views)
    taken = {v.spec.skill_id.rsplit("_", 1)[0] for v in views}
    registered: list[str] = []
    skipped: dict[str, str] = {}
    for role_id, pattern in wanted.iter_rows():
        if (f"role:{role_id}", pattern) in done or role_id not in registry:
            continue
        fit_rows = fit.filter(pl.col("role_id") == role_id)
        rows = fit_rows
        members = rows.filter(pl.col("pattern") == pattern)
        if members.height == 0:
            skipped[f"{role_id}/{pattern}"] = "no episode of this lesson is known yet"
            continue
        gist, outcome_class = members.row(0, named=True)["gist"], members["outcome_class"][0]
        cluster = describe(
            registry, rows, role_id, pattern, gist=str(gist), outcome_class=str(outcome_class)
        )
        files = candidate_files(cluster, fit_rows, registry, now=now, taken=taken)
        if not files:
            skipped[f"{role_id}/{pattern}"] = "no form of the lesson is supported by the fit split"
        forms: list[tuple[SkillSpec, Also | None]] = []
        for skill_id, text in files:
            spec = parse_skill(text, f"generated:{skill_id}.yaml", registry)
            sources = judged.filter(pl.col("episode_id").is_in(list(spec.source_experiences)))

            def also(conn: sa.Connection, info: VersionInfo, src: pl.DataFrame = sources) -> None:
                write_sources(conn, info.skill_id, info.version, src)

            forms.append((spec, also))
            registered.append(spec.key)
            taken.add(skill_id.rsplit("_", 1)[0])
        # every form of the lesson in one transaction: "done" is per lesson (see above)
        register_all_tracked(res.engine, res.skill_tracker, forms, actor=ACTOR, now=now)
    made, why = _rule_checks(res, now, views)  # lesson forms never make a rule's check
    registered.extend(made)
    skipped.update(why)
    return GenerationReport(
        as_of=now,
        episodes=judged.height,
        clusters=wanted.height,
        registered=tuple(registered),
        skipped=skipped,
    )


def _rule_checks(
    res: Resources, now: datetime, views: Sequence[VersionView]
) -> tuple[list[str], dict[str, str]]:
    """Register a check for every formed or confirmed avoid-rule of a role without one yet."""
    store = LedgerMemoryStore(res.engine)
    done = generated_clusters(views)
    registered: list[str] = []
    skipped: dict[str, str] = {}
    for role_id in sorted(res.registry.roles):
        namespace = role_namespace(role_id)
        for condition, rule in sorted(live_rules(newest_rules(store, namespace)).items()):
            if (namespace, condition) in done:
                continue
            made = rule_check_file(rule, role_id, res.registry, now=now)
            if isinstance(made, str):
                skipped[rule.id] = made
                continue
            skill, text = made
            spec = parse_skill(text, f"generated:{skill}.yaml", res.registry)
            register_tracked(res.engine, res.skill_tracker, spec, actor=ACTOR, now=now)
            registered.append(spec.key)
    return registered, skipped


@dataclass(frozen=True)
class ProposalReport:
    """A skill file admitted as a candidate (a person's proposal, not the generator's)."""

    skill: str
    state: str
    sources: int


def propose_skill(
    res: Resources, text: str, source: str, as_of: datetime | None = None
) -> ProposalReport:
    """Validate a skill file and register it as a candidate, like a generated one.

    Refused with `SkillLoadError` (file, field, reason) when the file breaks the schema,
    names an unknown role, widens a permission, claims a state the ledger has not
    reached, or names a parent it does not hold; nothing is written then.
    """
    spec = parse_skill(text, source, res.registry)
    now = clock(res, as_of)
    with res.engine.connect() as conn:
        episodes = read_episodes(conn, res.registry, through=now)
    known = judged_frame(episodes, res.registry).filter(
        pl.col("episode_id").is_in(list(spec.source_experiences))
    )

    def also(conn: sa.Connection, info: VersionInfo) -> None:
        write_sources(conn, info.skill_id, info.version, known)

    info = register_tracked(
        res.engine, res.skill_tracker, spec, actor="proposal", now=now, also=also
    )
    return ProposalReport(info.key, str(info.state), known.height)


def check_decisions(res: Resources, as_of: datetime | None = None) -> CheckReport:
    """Judge every decision made since the last run with the usable trading checks."""
    now = clock(res, as_of)
    if now is None:
        return CheckReport(as_of=None)
    with res.engine.connect() as conn:
        after = last_through(conn, CheckKind.GATE)
        if after is not None and now <= after:
            return CheckReport(as_of=now, after=after)
        snapshot = load_snapshot(conn, task_family=TRADE_FAMILY, now=now)
        decisions = read_decisions(conn, res.registry, after=after, through=now)
    under = rollout.active(res.engine, trading_gate.SCOPE)
    pins = trading_gate.bundle_pins(*under) if under else {}
    if under:
        snapshot = trading_gate.pinned_snapshot(snapshot, pins)
    by_status: dict[str, int] = {}
    by_skill: dict[str, int] = {}
    written = 0
    with res.engine.begin() as conn:
        for start in range(0, decisions.height, CHECK_CHUNK):
            chunk = decisions.slice(start, CHECK_CHUNK)
            rows = check_frame(snapshot, chunk, res.registry)
            if under:
                lent = trading_gate.lent_rows(snapshot, under[1], pins, chunk, res.registry)
                rows = rows if lent is None else pl.concat([rows, lent], how="vertical_relaxed")
                ran = trading_gate.ran_under(under[0], under[1], chunk, now)
                bulk_insert(conn, "decision_structures", ran)
            written += bulk_insert(conn, "episodes", rows.drop("checked"))
            for key, n in rows.group_by("status").len().iter_rows():
                by_status[str(key)] = by_status.get(str(key), 0) + int(n)
            for key, n in rows.group_by("checked").len().iter_rows():
                by_skill[str(key)] = by_skill.get(str(key), 0) + int(n)
        record_check(
            conn,
            CheckKind.GATE,
            at=now,
            after=after,
            through=now,
            metrics={"decisions": decisions.height, "episodes": written, **by_status},
            detail={"by_skill": by_skill},
        )
    return CheckReport(
        as_of=now,
        after=after,
        decisions=decisions.height,
        episodes=written,
        by_status=by_status,
        by_skill=by_skill,
    )
