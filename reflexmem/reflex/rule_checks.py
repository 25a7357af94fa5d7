"""Learned checks from outcome rules, and the outcome steps that promote them.

A procedural rule of a role's memory (`reflexmem.memory.outcome_rules`) that says its
condition makes outcomes *worse* becomes a pre-decision check: an L0 rule that holds the
role's decisions carrying the condition and lets everything else proceed. It is a
**learned** check (`outcomes.check_kind`): nothing in the role file asked for it. The
check is made when the rule *forms* (a waiting candidate, its screening contrast passed),
so that its own replay and rollout run while the rule waits for the later episodes of
its confirmation; made only at confirmation, a check began those weeks of steps only
then, and on `bench learning`'s validation seeds (0.5 sd planted) 8 of 20 planted
checks became active against 10 now. It becomes active only once the rule is confirmed,
and falls with the rule if the rule fails its test.

Only conditions a decision record carries when it is made can be checked before it:

* ``direction:<d>``, ``symbol:<s>``, ``scenario:<x>``: the decision's own fields.
* ``missing:<kind>``: not turned into a check. The role already requires that evidence;
  its policy check enforces the requirement from the start, and a rule confirming that
  the breach costs money is evidence *for the policy*, not something new to learn.
* ``against:signal`` and ``regime:<r>``: measured at evaluation from prices, not in the
  record a check reads; left as a seam (the rule still serves recall).
* A rule that *favours* its condition: a check can only hold or send back, so there is
  nothing for it to do.

A rule check moves on realized outcomes only, never on decisions its rule was formed
from, and its one test on outcomes no earlier step read (:func:`next_move`):

1. ``candidate -> validating``: the rule's contrast (the check's effect is the contrast
   negated): its confirmatory test on episodes made after the rule was formed, or, for a
   check made when the rule formed, the screening contrast it formed on. Either only
   starts the replay; neither is the check's test.
2. ``validating -> limited``: a screen, the check replayed on the decisions the rule
   was not formed from (made from `unseen_from`, the first two-week block after the
   rule formed; since the check's creation for a rule that does not say): with
   `MIN_SCREENED` on each side, what it would hold did worse than what it lets pass.
   A screen only chooses which checks get a test, so it spends no error rate, and it
   may read what the rule's confirmation read. Waiting for new decisions instead cost
   a check three to four weeks of its stream before its one test could begin.
3. ``limited -> active``: **one test**, like the rule's confirmation, on the same
   decisions whose return settled after the check became limited (outcomes the screen
   never read, including those of decisions made before the move that were still open
   then), taken at the first cycle at which the rule is confirmed and there are
   `MIN_HELD` decisions on each side and `MIN_BLOCKS` two-week blocks: the interval of
   its effect (`reflex.outcomes`, blocks of time as the draws) lies above zero, or the
   check is rejected. It may read what the rule's confirmation read: a check is active
   only if both pass, so on a stream with nothing to learn it is no likelier to become
   active than its rule is to be confirmed (the rule's error budget bounds both).
   Looking again at every cycle until the interval happens to clear zero would raise
   the chance that a check of no effect becomes active with every look: on the null
   streams of `bench learning`'s validation seeds (a check on each of 15 symbols and
   scenarios, made 30 % into the stream), 10 of 300 such checks did under weekly looks,
   3 of 300 with this one test.

A check made when its rule formed is rejected, at whatever step it is, when the rule is
retired (its confirmatory test failed) or has left memory unconfirmed. Until the rule is
confirmed it may sit in its limited rollout: `bench learning` counts those rollouts on
its null streams (`null.checks_rolled_out_total`), the price of starting early.
A harmful effect (interval below zero) rejects at any step; no gain in the mean after
`MAX_HELD` held decisions rejects a screen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import polars as pl

from reflexmem.ledger.enums import EntryState
from reflexmem.ledger.reflex_enums import SkillState
from reflexmem.ledger.skill_cycle_models import CheckKind
from reflexmem.memory.blocks import MIN_BLOCKS
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.role_stream import BLOCK_SECONDS
from reflexmem.memory.rule_entries import describe
from reflexmem.reflex.evidence import VersionView
from reflexmem.reflex.lifecycle import Evidence
from reflexmem.reflex.outcomes import (
    MAX_HELD,
    MIN_HELD,
    MIN_SCREENED,
    RULE_PROVENANCE,
    OutcomeEffect,
    effect_evidence,
    held_out_rows,
    holds_everything,
    one_test,
    outcome_effect,
)
from reflexmem.reflex.skills import dump_yaml
from reflexmem.reflex.trading import PROCEED, TRADE_ENVIRONMENT, TRADE_FAMILY, observation_schema
from reflexmem.registry import RoleRegistry

S = SkillState
FIELDS = {"direction": "direction", "symbol": "symbol", "scenario": "scenario"}
"""Condition kinds a check can read, and the observation field each one is."""
HOLD = "hold"


def stop_condition(condition: str) -> dict[str, Any] | str:
    """The check's condition for a memory condition tag, or why there can be none."""
    kind, _, value = condition.partition(":")
    if kind in FIELDS and value:
        return {"field": FIELDS[kind], "equals": value}
    if kind == "missing":
        return "restates the role's evidence requirement, which its policy check enforces"
    return "not in the decision record a pre-decision check reads"


def _unseen(formed_block: object) -> dict[str, str]:
    """`unseen_from`: the start of the first two-week block after the rule formed."""
    if not isinstance(formed_block, int) or formed_block < 0:
        return {}
    start = datetime.fromtimestamp((formed_block + 1) * BLOCK_SECONDS, tz=UTC)
    return {"unseen_from": start.isoformat()}


def unseen_from(provenance: Mapping[str, Any]) -> datetime | None:
    """Decisions made from then on were recorded after the rule formed: never its sources."""
    value = provenance.get("unseen_from")
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def _slug(condition: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in condition.lower()).strip("_")


def skill_id(role_id: str, condition: str) -> str:
    """A readable skill ID: role, `avoid`, and the condition."""
    return f"{role_id}_avoid_{_slug(condition)}"[:63].rstrip("_")


def rule_check_file(
    rule: MemoryEntry, role_id: str, registry: RoleRegistry, *, now: datetime
) -> tuple[str, str] | str:
    """(skill ID, YAML text) of the check an avoid-rule makes, or why none.

    A rule makes its check when it forms (a waiting `candidate` that carries the
    contrast it was formed on) or, if no check was made then, when it is confirmed.
    """
    stats = rule.stats or {}
    confirm = stats.get("confirm")
    formed = stats.get("formed") if rule.state is EntryState.CANDIDATE else None
    if rule.state is EntryState.RETIRED:
        return "the rule was retired"
    if not (confirm or formed) or not rule.tags:
        return "the rule has not been confirmed on later episodes"
    if int(stats.get("direction", 0)) >= 0:
        return "the rule favours its condition: a check can only hold or send back"
    condition = rule.tags[0]
    when = stop_condition(condition)
    if isinstance(when, str):
        return when
    scope = {"field": "role_id", "equals": role_id}
    sid = skill_id(role_id, condition)
    note = f"hold {{direction}} {{symbol}} for {{account}}: {describe(condition)} did worse"
    verdict = {"status": "hold", "reason": f"rule:{_slug(condition)}"[:64], "note": note[:400]}
    spec = {
        "skill_id": sid,
        "version": 1,
        "owner": role_id,
        "description": f"L0 check learned from an outcome rule: {rule.text}"[:1000],
        "source_experiences": [rule.id],
        "state": "candidate",
        "provenance": {
            "kind": RULE_PROVENANCE,
            "namespace": rule.namespace,
            "pattern": condition,
            "rule": rule.id,
            "rule_state": str(rule.state),
            "generated_at": now.isoformat(),
            "fixed_conditions": [condition],
            **({"confirmation": dict(confirm)} if confirm else {"formation": dict(formed or {})}),
            **_unseen(stats.get("formed_block")),
        },
        "applicability": {
            "task_family": TRADE_FAMILY,
            "environment_version": TRADE_ENVIRONMENT,
            "trigger": [scope],
            "input_contract": observation_schema(registry),
        },
        "decision": {
            "layer": "L0",
            "options": [PROCEED, HOLD],
            "procedure": {
                "kind": "rules",
                "rules": [
                    {"when": [scope, when], "choose": HOLD, "reason": f"outcome rule {rule.id}"},
                    {"when": [scope], "choose": PROCEED, "reason": "the condition does not hold"},
                ],
            },
            "action": None,
            "verdicts": {HOLD: verdict},
            "confidence_floor": 1.0,
        },
        "validation": {"evaluation_set": [], "counter_examples": [], "quality_floor": 0.0},
        "bounds": {"permissions": {"tools": [], "effects": ["read"]}, "retry_limit": 0},
        "fallback": {"escalation_target": "L1", "previous_version": None},
    }
    header = "# Generated from an outcome rule; the ledger decides its state.\n"
    return sid, header + dump_yaml(spec)


def _negated(c: Mapping[str, Any]) -> OutcomeEffect:
    """A rule contrast (carriers minus the rest) as the check's effect (passed minus held)."""
    return OutcomeEffect(
        n_passed=int(c["n_out"]),
        n_held=int(c["n_in"]),
        mean_passed=c.get("mean_out"),
        mean_held=c.get("mean_in"),
        loss_rate_passed=c.get("loss_out"),
        loss_rate_held=c.get("loss_in"),
        effect=-float(c["effect"]),
        ci_low=-float(c["ci_high"]),
        ci_high=-float(c["ci_low"]),
    )


def confirmation_evidence(provenance: Mapping[str, Any]) -> Evidence:
    """The rule's first outcome evidence for the check: its confirmation, or its formation.

    The rule's contrast is carriers minus the rest in outcome score; the check holds
    the carriers, so its effect (passed minus held) is that contrast negated. A check
    made when its rule formed has only the formation screen, on the episodes the rule
    was formed from: enough to start replaying it, never a test (it becomes active
    only once the rule is confirmed, :func:`rule_step`).
    """
    if "confirmation" in provenance:
        c = provenance["confirmation"]
        source = "the rule's confirmatory test (outcome score, episodes after it was formed)"
    else:
        c = provenance["formation"]
        source = "the rule's formation screen (outcome score, the episodes it was formed from)"
    return effect_evidence(
        _negated(c),
        "gain",
        source=source,
        rule=provenance.get("rule"),
        p_value=c.get("p_value"),
        alpha=c.get("alpha"),
    )


def rule_confirmed(provenance: Mapping[str, Any], rule: MemoryEntry | None) -> bool | None:
    """Whether the check's rule passed its confirmatory test: None while it waits.

    `rule` is the newest version of the rule's lineage
    (`reflexmem.memory.outcome_rules.newest_rules`). A check made from a confirmed rule
    carries the confirmation itself. A lineage no longer in memory (evicted) counts as
    failed: nothing can confirm it any more.
    """
    if "confirmation" in provenance:
        return True
    if rule is None or rule.state is EntryState.RETIRED:
        return False
    confirmed = rule.state is EntryState.ACTIVE and bool((rule.stats or {}).get("confirm"))
    return True if confirmed else None


def _unconfirmed(rule: MemoryEntry | None) -> Evidence:
    """Why a check made at formation is rejected: its rule failed (or left memory)."""
    test = (rule.stats or {}).get("confirm") if rule is not None else None
    if rule is not None and test:
        reason = "its rule failed its confirmatory test on later episodes"
        found = effect_evidence(_negated(test), "none", reason=reason, rule=rule.id)
        # in outcome-score units, like the formation it started from: the rule's p and level
        level = {"rule_p_value": float(test["p_value"]), "rule_alpha": float(test["alpha"])}
        return replace(found, metrics={**found.metrics, **level})
    eff = OutcomeEffect(0, 0, None, None, None, None, None, None, None)
    return effect_evidence(eff, "none", reason="its rule was retired or left memory unconfirmed")


def next_move(state: SkillState, eff: OutcomeEffect) -> tuple[SkillState, Evidence] | str:
    """The outcome step of a rule check from `validating` or `limited`, or why it waits.

    `eff` is the check's effect on the decisions of the step's window (see module doc).
    From `limited` it is the learned checks' one test (`outcomes.one_test`).
    """
    if state == S.LIMITED:
        found = one_test(eff)
        if found is not None:
            return (S.ACTIVE if found.passed else S.REJECTED), found
        if eff.effect is None or min(eff.n_passed, eff.n_held) < MIN_HELD:
            return f"fewer than {MIN_HELD} decisions on a side with a realized return since {state}"
        return f"fewer than {MIN_BLOCKS} two-week blocks of decisions since {state}"
    # the screen: a gain in the mean, interval or not
    if holds_everything(eff):
        return S.REJECTED, effect_evidence(eff, "none", reason="holds nearly every decision")
    if eff.effect is None or min(eff.n_passed, eff.n_held) < MIN_SCREENED:
        return f"fewer than {MIN_SCREENED} decisions on a side with a realized return since {state}"
    if eff.ci_high is not None and eff.ci_high < 0:
        return S.REJECTED, effect_evidence(eff, "harm")
    if eff.effect > 0:
        return S.LIMITED, effect_evidence(eff, "gain")
    if eff.n_held >= MAX_HELD:
        return S.REJECTED, effect_evidence(eff, "none")
    return f"no gain in the mean yet on {eff.n_held} held decisions (rejected at {MAX_HELD})"


def rule_step(
    view: VersionView, episodes: pl.DataFrame, now: datetime, rule: MemoryEntry | None = None
) -> tuple[SkillState, list[Evidence], CheckKind] | str:
    """The next move of a pending rule check with its evidence, or why it waits.

    `episodes` are the judged decisions (`trading.judged_frame`) with realized returns;
    the windows are those of the module doc: decisions made from `unseen_from` (or since
    creation), and from `limited` only those whose return settled after `limited_at`
    (the screen read the others). `rule` is the newest version of the check's rule
    lineage; a check made when its rule formed is rejected if the rule fails its
    confirmatory test, and waits in `limited` until the rule passes it.
    """
    provenance = view.spec.provenance
    confirmed = rule_confirmed(provenance, rule)
    if confirmed is False:
        return S.REJECTED, [_unconfirmed(rule)], _KIND[view.state]
    if view.state == S.CANDIDATE:
        return S.VALIDATING, [confirmation_evidence(provenance)], _KIND[view.state]
    if view.state == S.LIMITED and confirmed is None:
        return "its rule awaits its confirmatory test on later episodes"
    unread = view.limited_at if view.state == S.LIMITED else None
    rows = held_out_rows(
        view, episodes, through=now, settled_after=unread, since=unseen_from(view.spec.provenance)
    )
    step = next_move(view.state, outcome_effect(rows))
    if isinstance(step, str):
        return step
    to, found = step
    if to == S.ACTIVE and "confirmation" not in provenance and rule is not None:
        # made when its rule formed: the activation records the rule's test beside its own
        found = replace(
            found, detail={**found.detail, "rule_confirmation": (rule.stats or {}).get("confirm")}
        )
    return to, [found], _KIND[view.state]


_KIND = {
    S.CANDIDATE: CheckKind.EVALUATION,
    S.VALIDATING: CheckKind.REPLAY,
    S.LIMITED: CheckKind.SHADOW,
}
"""The check row a step from each state writes."""
