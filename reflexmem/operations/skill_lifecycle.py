"""Stages of the skill lifecycle: shadow evaluation and promotion, audits, measured effect.

* `advance_skills` (the `shadow_evaluation` flow, after `check_decisions`): every trading
  candidate, validating or limited version takes each step its evidence allows, in one
  run: independent evaluation on held-apart decisions -> `validating`; replay of past
  decisions -> `limited` (a sticky rollout over half the account/symbol pairs); shadow
  beside the cluster's active checks and the rollout's arms, on decisions made since ->
  `active`; a *learned* check (not a restated evidence policy) instead needs its effect
  on realized returns of held-out decisions to be a gain with an interval above zero
  (`reflexmem.reflex.outcomes.outcome_evidence`); agreement with reflection's labels is
  then only a diagnostic. A check made from a confirmed outcome rule takes every step
  on outcomes (`reflexmem.reflex.rule_checks.rule_step`): no label describes it, so it
  is neither label-audited nor revalidated on labels. Failing evidence rejects.
  Versions are judged cheapest layer first, so a costlier form of a lesson is compared
  beside a cheaper form promoted in the same run: "beside the active version" is
  literal.
* `audit_skills` (the `audit` flow): a sample audit and drift detection of every active
  version on the decisions it checked since its last audit, and for a learned version
  its outcome effect since it became active; failing any quarantines it; a quarantined
  version is revalidated on decisions made after its quarantine.
* `skill_effects`: the failure mode of each promoted check with it off and on (agreement
  with reflection, a diagnostic), and its outcome effect on realized returns.
* `skill_status`: every version with its kind (learned or policy) and outcome effect.

Every evaluation is recorded: a move as a transition with its evidence and a run of the
skill tracker, anything else (a passing audit, a failed revalidation) as a tracker run;
each is one `skill_checks` row. Steps without enough data wait and record nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import polars as pl
import sqlalchemy as sa

from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.ledger.skill_cycle_models import CheckKind
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.ledger_store import LedgerMemoryStore
from reflexmem.memory.outcome_rules import newest_rules
from reflexmem.operations.resources import Resources
from reflexmem.operations.skills import ACTOR, clock
from reflexmem.reflex.audit import audit
from reflexmem.reflex.cycle_ledger import last_through, load_views, record_check
from reflexmem.reflex.effect import EffectWindow, measure_effect
from reflexmem.reflex.evidence import (
    ROLLOUT_FRACTION,
    VersionView,
    evaluation_evidence,
    in_scope,
    replay_evidence,
    shadow_rollout_evidence,
    with_run,
)
from reflexmem.reflex.gate import AGENT
from reflexmem.reflex.lifecycle import Evidence
from reflexmem.reflex.outcomes import (
    OutcomeEffect,
    check_kind,
    held_out_effect,
    is_rule_check,
    outcome_evidence,
)
from reflexmem.reflex.rule_checks import rule_step
from reflexmem.reflex.tracking import transition_tracked
from reflexmem.reflex.trading import TRADE_FAMILY, judged_frame, read_checks, read_episodes
from reflexmem.reflex.versions import version_info

S = SkillState
PENDING = (S.CANDIDATE, S.VALIDATING, S.LIMITED)
_KIND = {S.VALIDATING: CheckKind.EVALUATION, S.LIMITED: CheckKind.REPLAY}


@dataclass(frozen=True)
class Move:
    """One lifecycle move made by the cycle, with a summary of its evidence."""

    skill: str
    frm: str
    to: str
    evidence: dict[str, dict[str, float]]


@dataclass(frozen=True)
class LifecycleReport:
    """Moves made, and versions that waited for more decisions."""

    as_of: datetime | None
    moves: tuple[Move, ...] = ()
    waiting: dict[str, str] = field(default_factory=dict)
    checks: int = 0


def _inputs(res: Resources, now: datetime) -> tuple[list[VersionView], pl.DataFrame, pl.DataFrame]:
    with res.engine.connect() as conn:
        views = load_views(conn)
        episodes = read_episodes(conn, res.registry, through=now)
        checks = read_checks(conn, AGENT, through=now)
    return views, judged_frame(episodes, res.registry), checks


def _move(
    res: Resources,
    view: VersionView,
    to: SkillState,
    evidence: Sequence[Evidence],
    now: datetime,
    kind: CheckKind,
    window: tuple[datetime | None, datetime] | None = None,
) -> tuple[VersionView, Move]:
    spec = view.spec
    fraction = ROLLOUT_FRACTION if to == S.LIMITED else None

    def check(conn: sa.Connection, run_id: str | None) -> None:
        record_check(
            conn, kind, at=now, skill_id=spec.skill_id, version=spec.version,
            after=window[0] if window else None, through=window[1] if window else now,
            passed=all(e.passed for e in evidence), moved_to=str(to),
            metrics={f"{e.kind}.{k}": v for e in evidence for k, v in e.metrics.items()},
            detail={"evidence": [e.as_json() for e in with_run(evidence, run_id)]}, run_id=run_id,
        )  # fmt: skip

    # the move and its check row commit together: a crash between them would leave a
    # move the rerun never records (it starts from the new state)
    transition_tracked(
        res.engine, res.skill_tracker, spec.skill_id, spec.version, to, evidence,
        actor=ACTOR, rollout_fraction=fraction, now=now, also=check,
    )  # fmt: skip
    new = replace(view, state=to, changed_at=now, rollout_fraction=fraction)
    if to == S.LIMITED:
        new = replace(new, limited_at=now)
    elif to == S.ACTIVE:
        new = replace(new, active_at=now)
    elif to == S.QUARANTINED:
        new = replace(new, quarantined_at=now)
    summary = {str(e.kind): {k: round(float(v), 4) for k, v in e.metrics.items()} for e in evidence}
    return new, Move(spec.key, str(view.state), str(to), summary)


def _log(res: Resources, view: VersionView, kind: CheckKind, evidence: Sequence[Evidence],
         now: datetime, after: datetime | None = None,
         through: datetime | None = None) -> None:  # fmt: skip
    with res.engine.connect() as conn:
        info = version_info(conn, view.spec.skill_id, view.spec.version)
    run_id = res.skill_tracker.log_check(info, str(kind), evidence, {"after": after, "at": now})
    with res.engine.begin() as conn:
        record_check(
            conn, kind, at=now, skill_id=view.spec.skill_id, version=view.spec.version,
            after=after, through=through or now, passed=all(e.passed for e in evidence),
            metrics={f"{e.kind}.{k}": v for e in evidence for k, v in e.metrics.items()},
            detail={"evidence": [e.as_json() for e in evidence]}, run_id=run_id,
        )  # fmt: skip


def _step(
    view: VersionView,
    views: Sequence[VersionView],
    episodes: pl.DataFrame,
    checks: pl.DataFrame,
    *,
    learned: bool,
    now: datetime,
    rule: MemoryEntry | None = None,
) -> tuple[SkillState, list[Evidence], CheckKind] | str:
    """The next move of a pending version with its evidence, or why it waits.

    `rule`: for a rule check, the newest version of its rule (`_rules`).

    From `limited`, a learned check moves on its outcome effect alone (realized returns
    of held-out decisions made since it was created); a policy check, which restates its
    role's requirement, on shadow and rollout agreement as before.
    """
    if is_rule_check(view.spec.provenance):
        return rule_step(view, episodes, now, rule)
    cluster_ids = [v.spec.skill_id for v in views if v.cluster == view.cluster]
    if view.state == S.CANDIDATE:
        found = evaluation_evidence(view, episodes)
        if found is None:
            return "too few held-apart decisions to evaluate"
        return (S.VALIDATING if found.passed else S.REJECTED), [found], CheckKind.EVALUATION
    if view.state == S.VALIDATING:
        found = replay_evidence(view, episodes, checks, cluster_ids, after=view.quarantined_at)
        if found is None:
            return "too few past decisions to replay"
        return (S.LIMITED if found.passed else S.REJECTED), [found], CheckKind.REPLAY
    if learned:
        outcome = outcome_evidence(view, episodes, through=now)
        if outcome is None:
            return "too few held-out decisions with a realized return to judge its effect"
        return (S.ACTIVE if outcome.passed else S.REJECTED), [outcome], CheckKind.SHADOW
    champions = [
        v.spec for v in views if v.cluster == view.cluster and v.state == S.ACTIVE and v != view
    ]
    both = shadow_rollout_evidence(view, episodes, checks, champions)
    if both is None:
        return "too few decisions since it became limited"
    passed = all(e.passed for e in both)
    return (S.ACTIVE if passed else S.REJECTED), both, CheckKind.SHADOW


def _lineage(view: VersionView) -> tuple[str, str]:
    """(namespace, condition) of a rule check's rule; empty for other versions."""
    p = view.spec.provenance
    if not is_rule_check(p):
        return "", ""
    return str(p.get("namespace", "")), str(p.get("pattern", ""))


def _rules(res: Resources, views: Sequence[VersionView]) -> dict[tuple[str, str], MemoryEntry]:
    """The newest rule version behind each pending rule check, by (namespace, condition)."""
    store = LedgerMemoryStore(res.engine)
    wanted = {_lineage(v)[0] for v in views if v.state in PENDING} - {""}
    return {(ns, c): rule for ns in sorted(wanted) for c, rule in newest_rules(store, ns).items()}


def advance_skills(res: Resources, as_of: datetime | None = None) -> LifecycleReport:
    """Take every pending trading version as far as its evidence allows, cheapest first."""
    now = clock(res, as_of)
    if now is None:
        return LifecycleReport(as_of=None)
    views, episodes, checks = _inputs(res, now)
    rules = _rules(res, views)
    order = sorted(range(len(views)), key=lambda i: (views[i].spec.layer.rank, views[i].key))
    moves: list[Move] = []
    waiting: dict[str, str] = {}
    for i in order:
        for _ in range(3):
            view = views[i]
            if view.state not in PENDING:
                break
            learned = check_kind(view.spec, res.registry) == "learned"
            rule = rules.get(_lineage(view))
            step = _step(view, views, episodes, checks, learned=learned, now=now, rule=rule)
            if isinstance(step, str):
                waiting[view.key] = step
                break
            to, evidence, kind = step
            views[i], move = _move(res, view, to, evidence, now, kind)
            moves.append(move)
            waiting.pop(view.key, None)
    return LifecycleReport(as_of=now, moves=tuple(moves), waiting=waiting, checks=len(moves))


def audit_skills(res: Resources, as_of: datetime | None = None) -> LifecycleReport:
    """Audit every active trading version; revalidate every quarantined one."""
    now = clock(res, as_of)
    if now is None:
        return LifecycleReport(as_of=None)
    views, episodes, checks = _inputs(res, now)
    moves: list[Move] = []
    waiting: dict[str, str] = {}
    logged = 0
    for view in sorted(views, key=lambda v: v.key):
        if view.state == S.ACTIVE:
            with res.engine.connect() as conn:
                done = last_through(
                    conn, CheckKind.AUDIT, skill_id=view.spec.skill_id, version=view.spec.version
                )
            after = max((t for t in (done, view.active_at) if t is not None), default=None)
            turned = _turned(res, view, episodes, now)
            if turned is not None:
                _, move = _move(res, view, S.QUARANTINED, [turned], now, CheckKind.AUDIT)
                moves.append(move)
                continue
            if is_rule_check(view.spec.provenance):
                continue  # judged on outcomes alone: no label to audit it against
            result = audit(view, episodes, checks, after=after, through=now)
            if result is None:
                waiting[view.key] = "too few checked decisions with a known outcome to audit"
                continue
            if result.passed:
                _log(res, view, CheckKind.AUDIT, result.evidence, now, after, result.through)
                logged += 1
                continue
            window = (after, result.through)
            _, move = _move(res, view, S.QUARANTINED, result.evidence, now, CheckKind.AUDIT, window)
            moves.append(move)
        elif view.state == S.QUARANTINED:
            with res.engine.connect() as conn:
                tried = last_through(
                    conn, CheckKind.REVALIDATION, skill_id=view.spec.skill_id,
                    version=view.spec.version,
                )  # fmt: skip
            if is_rule_check(view.spec.provenance):
                waiting[view.key] = "a rule's check is not revalidated on labels; it stays out"
                continue
            newest = _newest(view, episodes)
            if newest is None or (tried is not None and tried >= newest):
                waiting[view.key] = "no new decisions since the quarantine or the last try"
                continue
            found = evaluation_evidence(view, episodes, after=view.quarantined_at)
            if found is None:
                waiting[view.key] = "too few decisions since the quarantine to revalidate"
                continue
            if not found.passed:
                _log(res, view, CheckKind.REVALIDATION, [found], now, view.quarantined_at, newest)
                logged += 1
                continue
            _, move = _move(res, view, S.VALIDATING, [found], now, CheckKind.REVALIDATION)
            moves.append(move)
    return LifecycleReport(
        as_of=now, moves=tuple(moves), waiting=waiting, checks=logged + len(moves)
    )


def _turned(
    res: Resources, view: VersionView, episodes: pl.DataFrame, now: datetime
) -> Evidence | None:
    """Failing outcome evidence if an active learned check now harms returns, else None.

    Judged on decisions made since it became active: the outcome it was promoted on
    has turned when that interval lies below zero.
    """
    if check_kind(view.spec, res.registry) != "learned":
        return None
    found = outcome_evidence(view, episodes, through=now, after=view.active_at)
    return found if found is not None and found.detail["verdict"] == "harm" else None


def _newest(view: VersionView, episodes: pl.DataFrame) -> datetime | None:
    """The newest evaluation-split decision of the check's role since its quarantine."""
    rows = in_scope(view.spec, episodes, after=view.quarantined_at, split="evaluation")
    value = rows["decided_at_ts"].max() if rows.height else None
    return value if isinstance(value, datetime) else None


@dataclass(frozen=True)
class EffectReport:
    """Every trading check that reached `limited`: label windows and outcome effect.

    `windows` are a diagnostic of agreement with reflection (the rate of the label's
    failure mode among decisions that went ahead); `outcomes` is what the check did to
    realized returns (`reflexmem.reflex.outcomes`), per version key, with `kinds`
    telling a learned check from one that restates its role's evidence policy.
    """

    as_of: datetime | None
    windows: tuple[EffectWindow, ...] = ()
    states: dict[str, str] = field(default_factory=dict)
    outcomes: dict[str, OutcomeEffect] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)


def skill_effects(res: Resources, as_of: datetime | None = None) -> EffectReport:
    """Measure each promoted check's effect on decisions it was not generated from."""
    now = clock(res, as_of)
    if now is None:
        return EffectReport(as_of=None)
    views, episodes, checks = _inputs(res, now)
    windows: list[EffectWindow] = []
    outcomes: dict[str, OutcomeEffect] = {}
    kinds: dict[str, str] = {}
    for view in sorted(views, key=lambda v: v.key):
        if any(state == "limited" for state, _ in view.history):
            if not is_rule_check(view.spec.provenance):  # no label describes a rule's check
                windows.extend(measure_effect(view, episodes, checks, through=now))
            outcomes[view.key] = held_out_effect(view, episodes, through=now)
            kinds[view.key] = check_kind(view.spec, res.registry)
    states = {v.key: str(v.state) for v in views}
    return EffectReport(now, tuple(windows), states, outcomes, kinds)


@dataclass(frozen=True)
class VersionStatus:
    """One skill version as `reflexmem skills status` lists it."""

    view: VersionView
    kind: str
    outcome: OutcomeEffect | None
    """The outcome effect on held-out decisions (trading checks; None for other families)."""


def skill_status(
    res: Resources, family: str = TRADE_FAMILY, as_of: datetime | None = None
) -> list[VersionStatus]:
    """Every version of a family with its kind and its outcome effect.

    The outcome effect is measured on held-out decisions for every trading version,
    learned or policy (a policy check's effect is the policy's, worth seeing too); the
    episodes are read once for all versions.
    """
    with res.engine.connect() as conn:
        views = load_views(conn, family)
    kinds = {v.key: check_kind(v.spec, res.registry) for v in views}
    now = clock(res, as_of) if family == TRADE_FAMILY and views else None
    if now is None:
        return [VersionStatus(v, kinds[v.key], None) for v in views]
    with res.engine.connect() as conn:
        episodes = judged_frame(read_episodes(conn, res.registry, through=now), res.registry)
    return [
        VersionStatus(v, kinds[v.key], held_out_effect(v, episodes, through=now)) for v in views
    ]
