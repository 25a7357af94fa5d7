"""The outcome effect of a trading check (pure): what its stops did to realized returns.

Agreement with reflection's labels (`effect.py`, `evidence.py`) says whether a check
stops the decisions reflection later blamed; it does not say whether those decisions
lost money. The outcome effect does: on a set of decisions whose positions settled, it
is the mean realized return of the decisions the check lets proceed minus that of the
decisions it holds or sends back (a request for evidence):

    effect = mean(return | proceeded) - mean(return | stopped)

Positive means the check helps: what it stops did worse than what it lets through.
Each side carries its n, its mean and its loss rate (share of returns below zero).
The decision stream is history, so a decision the check would have stopped was still
executed and its return is known; that is what makes the comparison possible.

The 95 % interval counts **blocks of time**, not decisions, as its independent draws:
the same cluster-robust contrast with Satterthwaite's effective number of blocks that
confirms the rules (`reflexmem.memory.blocks`), each block two weeks of decision time
(`role_stream.BLOCK_SECONDS`). Decisions on the same symbol in the same fortnight share
its moves, and a check holds exactly such groups (one symbol, one scenario): counted as
independent, 31 held decisions from two weeks gave a Welch interval of +1.5 % to +3.5 %
in the demo, where two blocks give no usable spread at all. The interval needs
`MIN_BLOCKS` blocks with decisions; before that the effect (passed minus held, both
sides with at least two decisions) is shown without one. It is closed-form and
deterministic (no seed, the same figure on every backend and rerun) and costs one pass
of per-block aggregates per check. Rows without a realized return (unsettled, ambiguous
position) or without a decision time (no block) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import polars as pl

from reflexmem.memory.blocks import PairBlocks
from reflexmem.memory.contrast import MIN_SIDE, Moments
from reflexmem.memory.role_stream import BLOCK_SECONDS
from reflexmem.reflex.evidence import VersionView, in_scope
from reflexmem.reflex.lifecycle import Evidence, EvidenceKind
from reflexmem.reflex.shadow import live_choices
from reflexmem.reflex.skills import SkillSpec
from reflexmem.reflex.trading import PROCEED, SETTLED_AT, age_field
from reflexmem.registry import RoleRegistry

RETURN = "realized_return"
MIN_HELD = 20
"""Held-out decisions each side needs before outcomes judge a learned check."""
MIN_SCREENED = 5
"""Decisions each side a rule check's screen needs: it only chooses which checks are
tested (no error rate spent); 20 of one symbol took 6-7 of a 37-week stream's weeks."""
MAX_HELD = 200
"""Held decisions after which a screen without a gain, or a check letting fewer than
`MIN_HELD` through, is rejected: it would otherwise wait for ever."""
STOPPED = "stopped"
CONFIDENCE = 0.95
METHOD = "blocks_t"
"""Student's t over effective two-week blocks (`memory.blocks`), not Welch's over decisions."""
DECIDED_AT = "decided_at_ts"
RULE_PROVENANCE = "procedural_rule"
"""The provenance of a check made from an outcome rule (`reflexmem.reflex.rule_checks`)."""


def is_rule_check(provenance: Mapping[str, Any]) -> bool:
    """Whether a skill version was generated from an outcome rule."""
    return provenance.get("kind") == RULE_PROVENANCE


@dataclass(frozen=True)
class OutcomeEffect:
    """The effect of a check on realized returns, with both sides' figures."""

    n_passed: int
    n_held: int
    mean_passed: float | None
    mean_held: float | None
    loss_rate_passed: float | None
    loss_rate_held: float | None
    effect: float | None
    ci_low: float | None
    ci_high: float | None
    method: str = METHOD

    @property
    def covers_zero(self) -> bool | None:
        """Whether the interval contains zero (None without an interval)."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return self.ci_low <= 0.0 <= self.ci_high

    def as_json(self) -> dict[str, Any]:
        """The figures as a JSON object."""
        return asdict(self)


def _effect(blocks: pl.DataFrame, confidence: float) -> OutcomeEffect:
    """One check's effect from its per-block sums (rows sorted by block)."""
    p, h = (
        Moments(int(n), float(t), float(q), int(lo))
        for n, t, q, lo in (
            blocks.select(f"{c}_{side}" for c in "nsql").sum().row(0) for side in "ph"
        )
    )
    both = p.n >= MIN_SIDE and h.n >= MIN_SIDE
    effect = float((p.mean or 0.0) - (h.mean or 0.0)) if both else None
    rows = blocks.select("_block", "n_p", "s_p", "n_h", "s_h").iter_rows()
    found = PairBlocks().add(rows).contrast(p, h, confidence=confidence) if both else None
    return OutcomeEffect(
        n_passed=p.n,
        n_held=h.n,
        mean_passed=p.mean,
        mean_held=h.mean,
        loss_rate_passed=p.loss_rate,
        loss_rate_held=h.loss_rate,
        effect=effect,
        ci_low=None if found is None else found.ci_low,
        ci_high=None if found is None else found.ci_high,
    )


def outcome_effects(
    frame: pl.DataFrame,
    by: str,
    *,
    stopped: str = STOPPED,
    ret: str = RETURN,
    at: str = DECIDED_AT,
    confidence: float = CONFIDENCE,
) -> dict[Any, OutcomeEffect]:
    """The outcome effect per value of `by`: one group_by into per-block sums.

    `at` is each decision's time (its two-week block); `stopped` null counts as passed.
    """
    r = pl.col(ret)
    placed = r.is_not_null() & r.is_finite() & pl.col(at).is_not_null()  # a return, a block
    rows = frame.filter(placed).with_columns(
        pl.col(stopped).fill_null(False).alias("_held"),
        (pl.col(at).dt.epoch("s") // BLOCK_SECONDS).alias("_block"),
    )
    sums = []
    for side, held in (("p", False), ("h", True)):
        mine = r.filter(pl.col("_held") == held)
        sums += [
            mine.len().alias(f"n_{side}"),
            mine.sum().alias(f"s_{side}"),
            (mine * mine).sum().alias(f"q_{side}"),
            (mine < 0).sum().alias(f"l_{side}"),
        ]
    blocks = rows.group_by(by, "_block").agg(sums).sort(by, "_block")
    parts = blocks.partition_by(by, as_dict=True, maintain_order=True)
    empty = blocks.clear()
    return {
        key: _effect(parts.get((key,), empty), confidence)
        for key in frame.get_column(by).unique(maintain_order=True).to_list()
    }


def outcome_effect(
    frame: pl.DataFrame,
    *,
    stopped: str = STOPPED,
    ret: str = RETURN,
    at: str = DECIDED_AT,
    confidence: float = CONFIDENCE,
) -> OutcomeEffect:
    """The outcome effect of one check on these decisions (`stopped`, `realized_return`)."""
    one = frame.select(pl.lit(0).alias("_g"), pl.col(stopped), pl.col(ret), pl.col(at))
    if one.height == 0:  # no rows: one key with nothing on either side
        one = pl.DataFrame(
            {"_g": [0], stopped: [None], ret: [None], at: [None]},
            schema={"_g": pl.Int32, stopped: pl.Boolean, ret: pl.Float64, at: one.schema[at]},
        )
    found = outcome_effects(one, "_g", stopped=stopped, ret=ret, at=at, confidence=confidence)
    return found[0]


def check_stops(spec: SkillSpec, rows: pl.DataFrame) -> pl.Series:
    """Whether the check holds or sends back each row (its confident non-proceed answer).

    A row the check gives no confident answer (it escalates, or its trigger does not
    hold) counts as proceeding: the check did not stop it.
    """
    if rows.height == 0:
        return pl.Series(STOPPED, [], dtype=pl.Boolean)
    answers = live_choices([spec], rows)
    return (answers.fill_null(PROCEED) != PROCEED).alias(STOPPED)


LEARNED = "learned"
POLICY = "policy"


def _violates(cond: Mapping[str, Any], limits: Mapping[str, float]) -> bool:
    """Whether the condition holds only where a declared evidence requirement is broken.

    `limits` maps the age field of each kind the role requires to its `max_age_days`.
    Broken means: the item is absent, dated after the decision, or older than allowed.
    """
    field = cond.get("field")
    if field not in limits:
        return False
    if cond.get("missing") is True:
        return True
    limit = limits[str(field)]
    # the largest bound (below) or smallest bound (above) that still implies a breach
    below = {"lt": 0.0, "lte": -1e-9}
    above = {"gt": limit, "gte": limit + 1e-9}
    for op, bound in below.items():
        if isinstance(cond.get(op), int | float) and float(cond[op]) <= bound:
            return True
    for op, bound in above.items():
        if isinstance(cond.get(op), int | float) and float(cond[op]) >= bound:
            return True
    return False


def _stop_conditions(spec: SkillSpec) -> list[list[Mapping[str, Any]]] | None:
    """The condition sets under which the check stops, or None when it compares text."""
    proc = spec.procedure
    scope = [dict(c) for c in spec.trigger]
    if proc["kind"] == "rules":
        return [
            [c for c in rule["when"] if dict(c) not in scope]
            for rule in proc["rules"]
            if rule["choose"] != PROCEED
        ]
    if proc["kind"] == "scores":
        weights = proc["weights"]
        toward = [
            name
            for name in proc["features"]
            for option in spec.options
            if option != PROCEED
            and float(weights.get(option, {}).get(name, 0.0))
            > float(weights.get(PROCEED, {}).get(name, 0.0))
        ]
        return [[proc["features"][n] for n in dict.fromkeys(toward)]]
    return None


def _breaches(text: str, required: Mapping[str, float]) -> bool:
    """Whether `text` is `_`-joined evidence-breach atom names of required kinds only."""
    names = sorted(
        (f"{k}_{state}" for k in required for state in ("missing", "after_decision", "stale")),
        key=len,
        reverse=True,
    )
    ends = {0}
    for i in range(len(text) + 1):
        if i not in ends:
            continue
        for name in names:
            if text.startswith(name, i):
                end = i + len(name)
                ends.add(end + 1 if text[end : end + 1] == "_" else end)
    return bool(text) and (len(text) in ends) and not text.endswith("_")


def _verdict_restates(verdict: Mapping[str, Any], required: Mapping[str, float]) -> bool:
    """A verdict the generator wrote for a lesson whose conditions are all breaches.

    A request names its absent kinds (`missing`); a hold's reason is `lesson:` and the
    names of its conditions (`candidates._verdict`). A truncated or hand-written reason
    does not parse and reads as learned.
    """
    if verdict.get("status") == "request":
        missing = {str(m) for m in verdict.get("missing", [])}
        return bool(missing) and missing <= set(required)
    reason = str(verdict.get("reason", ""))
    return reason.startswith("lesson:") and _breaches(reason.removeprefix("lesson:"), required)


def check_kind(spec: SkillSpec, registry: RoleRegistry) -> str:
    """`policy` when the check only restates its role's declared evidence requirement.

    The rule, read from the check itself: every condition under which it stops (the
    conditions of its non-proceed rules beyond its trigger, for an L0 rule; the
    features that push its score toward stopping, for an L1 policy) is an evidence-state
    condition (absent, dated after the decision, older than `max_age_days`) on a kind
    the role's policy declares required. Such a check stops nothing the role file does
    not already forbid, so its "catches" are the policy's, not something learned. An L2
    check compares the record in words and has no conditions to read: it is `policy`
    when every stopping verdict is one candidate generation writes for a lesson whose
    conditions are all such breaches (a request naming required kinds only, or a hold
    whose reason lists only breach atoms of required kinds). Anything else, including a
    check of a role the registry does not know, is `learned`.
    """
    role_id = next(
        (str(c["equals"]) for c in spec.trigger if c.get("field") == "role_id" and "equals" in c),
        spec.owner,
    )
    role = registry.roles.get(role_id)
    if role is None:
        return LEARNED
    required = {e.kind: e.max_age_days for e in role.policy.required_evidence}
    limits = {age_field(k): v for k, v in required.items()}
    sets = _stop_conditions(spec)
    if sets is None:
        stops = [spec.verdicts.get(o, {}) for o in spec.options if o != PROCEED]
        restated = [_verdict_restates(v, required) for v in stops]
        return POLICY if restated and all(restated) else LEARNED
    if sets and all(s and all(_violates(c, limits) for c in s) for s in sets):
        return POLICY
    return LEARNED


def created_at(view: VersionView) -> datetime:
    """When the version entered the ledger (its first recorded move)."""
    return view.history[0][1] if view.history else view.changed_at


def held_out_rows(
    view: VersionView,
    episodes: pl.DataFrame,
    *,
    through: datetime,
    after: datetime | None = None,
    settled_after: datetime | None = None,
    since: datetime | None = None,
) -> pl.DataFrame:
    """Decisions the check was not generated from, each with whether it would stop it.

    Held out: in the check's scope, not among its sources, outside the fit split (a
    check made from an outcome rule was fitted on no split: its sources all precede its
    creation), and made after `since` (default: when the version was created; a rule
    check's `unseen_from` is earlier) and after `after`, through `through`. With
    `settled_after`, only decisions whose return settled after that time: outcomes a
    step taken then could not have read. `stopped` is the check's own answer on the
    recorded observation, so every held-out decision counts, not only those a rollout
    arm happened to route to it.
    """
    start = since or created_at(view)
    start = start if after is None else max(after, start)
    rows = in_scope(view.spec, episodes, after=start, through=through)
    if not is_rule_check(view.spec.provenance):
        rows = rows.filter(pl.col("split") != "fit")
    if settled_after is not None:
        rows = rows.filter(pl.col(SETTLED_AT) > settled_after)
    return rows.with_columns(check_stops(view.spec, rows))


def held_out_effect(
    view: VersionView, episodes: pl.DataFrame, *, through: datetime, after: datetime | None = None
) -> OutcomeEffect:
    """The outcome effect of the check on its held-out decisions (made after `after`)."""
    return outcome_effect(held_out_rows(view, episodes, through=through, after=after))


def holds_everything(eff: OutcomeEffect) -> bool:
    """`MAX_HELD` decisions held and fewer than `MIN_HELD` let through: never comparable.

    Such a check (a proposal stricter than any decision meets, say) would otherwise wait
    for a comparison forever while holding its rollout's every decision.
    """
    return eff.n_held >= MAX_HELD and eff.n_passed < MIN_HELD


def effect_evidence(eff: OutcomeEffect, verdict: str, **detail: Any) -> Evidence:
    """Outcome evidence with a verdict; only `gain` passes.

    It carries the counts, and the effect and its interval only where they exist: a
    missing figure is left out, never written as 0.
    """
    metrics: dict[str, float] = {"n_passed": eff.n_passed, "n_held": eff.n_held}
    if eff.effect is not None:  # none when a side has fewer than two decisions
        metrics["effect"] = eff.effect
    if eff.ci_low is not None and eff.ci_high is not None:  # none before five blocks
        metrics |= {"ci_low": eff.ci_low, "ci_high": eff.ci_high}
    info = {"verdict": verdict, "method": METHOD, "confidence": CONFIDENCE, **detail}
    return Evidence(EvidenceKind.OUTCOME, verdict == "gain", metrics, info)


def one_test(eff: OutcomeEffect) -> Evidence | None:
    """The verdict of a learned check's one outcome test, or None while it cannot be taken.

    It is taken at the first call with `MIN_HELD` decisions on each side and an interval
    (five two-week blocks): `gain` (passes) when the interval lies above zero, `harm`
    when below, `none` when it covers zero. A test repeated at every cycle until the
    interval clears zero would let a check of no effect through more often with every
    look. `none` also when `MAX_HELD` are held while fewer than `MIN_HELD` passed (a
    check that holds nearly everything leaves nothing to compare with).
    """
    if holds_everything(eff):
        return effect_evidence(eff, "none", reason="holds nearly every decision")
    if eff.ci_low is None or eff.ci_high is None or min(eff.n_passed, eff.n_held) < MIN_HELD:
        return None
    verdict = "gain" if eff.ci_low > 0 else "harm" if eff.ci_high < 0 else "none"
    return effect_evidence(eff, verdict)


def outcome_evidence(
    view: VersionView, episodes: pl.DataFrame, *, through: datetime, after: datetime | None = None
) -> Evidence | None:
    """The outcome verdict on a learned check (`one_test` on its held-out decisions)."""
    return one_test(held_out_effect(view, episodes, through=through, after=after))
