"""`reflexmem bench learning`: does the production memory learn what is true, and only that.

For every seed it generates streams of N decisions of one role on real daily bars
(`learning_streams.py`): a **null** stream (nothing to learn) and, for each effect size,
a **planted** stream (one condition truly costs its carriers that many standard
deviations of realized return). Each stream is learned exactly as the cycle learns it:
`role_stream.episode_frame` makes the episodes, `memory.cycle.settle_episode` records
them under the role schedule (`ROLE_SCHEDULE`), whose distillation forms, confirms and
retires outcome-tested rules (`memory.outcome_rules`). Nothing here re-implements a rule.

Reported:

* **null**: active rules at the end of each stream (every one a false discovery); the
  share of streams with any (the family-wise error the rules' alpha-spending bounds).
* **planted**: power (share of seeds whose planted condition became an active
  "avoid" rule), other rules made active, and the **held-out effect**: the decisions
  of the last `TEST_SHARE` of the stream in time, which the learner had not seen when
  the test period began, are checked by the rules active at that moment (hold what an
  active avoid-rule's condition matches); effect = mean realized return of what
  proceeds minus that of what is held, with the production check's 95 % interval over
  two-week blocks (`reflex.outcomes`; none before five blocks).
* **oracle** (the ceiling): the same held-out decisions checked by the planted
  condition itself.
* **skills** (`learning_skills.py`): every avoid-rule becomes a check when it forms,
  through the generator's own function, and is promoted by the lifecycle's own outcome
  step on settled decisions, every `CHECK_EVERY` decisions (active only once its rule
  is confirmed). On null streams, the checks that reached active (false discoveries),
  and how many checks were made and reached a limited rollout while their rule waited
  (`checks_made_total`, `checks_rolled_out_total`: the price of starting early); on
  planted ones, `skill_power` (the planted
  condition's check active by the end), its effect on the decisions made after it
  became active (which never judged it) with its interval, and that effect over the
  oracle's on the same decisions.
* **oracle check** (the lifecycle's ceiling): a check of the planted condition made at
  the stream's first cycle, as if a rule had confirmed it there, and moved by the same
  steps. What it reaches is what any learner reaches at best with this lifecycle on
  this much data: a learner must first find the condition. On a null stream, one such
  check of every symbol and scenario: those that reach active are the lifecycle's own
  false activations (its one test holds each to 2.5 %).
* the seconds, and the floor: one plain polars pass computing every condition's
  contrast over a whole stream (what any learner must at least do, once).

Validation seeds (`--seed-base 0`) are for choosing thresholds; report on another base.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from apps.bench.learning_skills import CHECK_EVERY, Checks, held_effect, judged
from apps.bench.learning_streams import Bars, Stream, generate
from reflexmem.ledger.enums import EntryState, Tier
from reflexmem.memory.cycle import EpisodeInput, LearningState, settle_episode
from reflexmem.memory.entries import MemoryEntry
from reflexmem.memory.ledger_mirror import role_namespace
from reflexmem.memory.policies import default_policies
from reflexmem.memory.role_stream import episode_frame
from reflexmem.memory.store import InMemoryStore
from reflexmem.operations.memory import ROLE_SCHEDULE
from reflexmem.reflex.rule_checks import stop_condition
from reflexmem.registry import RoleRegistry

TEST_SHARE = 0.3
EFFECTS = (0.1, 0.25, 0.5, 1.0)
HEADLINE = 0.5


def learn(
    frame: pl.DataFrame, role_id: str, checks: Checks | None = None
) -> tuple[list[MemoryEntry], int]:
    """Record the episodes through the cycle's learning function.

    Returns every rule version not superseded (active, candidate or retired) when the
    test period began, and that period's first index. With `checks`, the skill steps run every
    `CHECK_EVERY` decisions on the way.
    """
    namespace = role_namespace(role_id)
    store = InMemoryStore()
    state = LearningState.initial(default_policies())
    test_start = int(frame.height * (1.0 - TEST_SHARE))
    rules: list[MemoryEntry] | None = None
    for i, row in enumerate(frame.iter_rows(named=True)):
        if i == test_start:  # entries are immutable: the list keeps the rules as they were
            rules = list(store.entries(namespace, (Tier.PROCEDURAL,), RULE_STATES))
        if checks is not None and i and i % CHECK_EVERY == 0:
            checks.run(store, checks.frame["decided_at_ts"][i - 1])
        episode = EpisodeInput(
            text=row["text"],
            outcome=float(row["outcome"]),
            quality=float(row["quality"]),
            tags=tuple(row["tags"]),
            source_ids=(row["case_id"],),
            case_id=row["case_id"],
            decision_id=row["decision_id"],
        )
        state, _ = settle_episode(ROLE_SCHEDULE, store, namespace, state, i, episode)
    assert rules is not None
    return rules, test_start


RULE_STATES = (EntryState.ACTIVE, EntryState.CANDIDATE, EntryState.RETIRED)


def rule_stage(rules: Sequence[MemoryEntry], condition: str) -> str:
    """Where `condition`'s rule stood when the test period began: where power was lost.

    `not_formed` (its contrast never passed screening), `waiting` (formed, too few later
    episodes for the confirmatory test), `rejected` (the test failed), `turned` (confirmed,
    then retired when its outcomes turned), `active`; `_favour` marks a rule pointing the
    other way (the planted effect is a cost).
    """
    mine = [r for r in rules if r.tags and r.tags[0] == condition]
    if not mine:
        return "not_formed"
    rule = max(mine, key=lambda r: r.created_episode)
    stats = rule.stats or {}
    if rule.state is EntryState.CANDIDATE:
        stage = "waiting"
    elif rule.state is EntryState.ACTIVE:
        stage = "active"
    else:
        stage = "turned" if stats.get("turned") else "rejected"
    return stage if stats.get("direction", -1) < 0 else f"{stage}_favour"


def judge(stream: Stream, registry: RoleRegistry, role_id: str) -> dict[str, Any]:
    """Learn one stream; what became active, and the held-out effects of learner and oracle."""
    started = time.perf_counter()
    frame = episode_frame(stream.cases, registry)
    known = (stream.planted,) if stream.planted else stream.conditions
    checks = Checks(role_id, registry, judged(stream.cases, registry), known=known)
    rules, test_start = learn(frame, role_id, checks)
    seconds = time.perf_counter() - started - checks.oracle_seconds
    active = [r for r in rules if r.state is EntryState.ACTIVE]
    test = frame.slice(test_start)
    ret = stream.cases["realized_return"].slice(test_start).to_numpy()
    at = stream.cases["decided_at"].slice(test_start)
    avoid = [r.tags[0] for r in active if r.stats and r.stats["direction"] < 0]
    tags = test["tags"].to_list()
    held = np.array([any(c in t for c in avoid) for t in tags], dtype=bool)
    out: dict[str, Any] = {
        "planted": stream.planted,
        "active_at_test": sorted(r.tags[0] for r in active),
        "found": stream.planted in avoid,
        "rule_stage": None if stream.planted is None else rule_stage(rules, stream.planted),
        "learner": held_effect(held, ret, at) if held.any() else None,
        "rule": None,
        "oracle": None,
        "skills_active": checks.active(),
        "checks_made": len(checks.views),
        "checks_rolled_out": checks.rolled_out(),
        "skill_found": stream.planted in checks.active(),
        "checkable": stream.planted is not None
        and isinstance(stop_condition(stream.planted), dict),
        "carriers": None if stream.planted is None else int(stream.cases["planted"].sum()),
        "skill": None,
        "oracle_checks": len(checks.oracles),
        "oracle_checks_active": checks.oracles_active(),
        "oracle_check": stream.planted in checks.oracles_active(),
        "oracle_skill": None
        if stream.planted is None
        else checks.after_activation(stream.planted, stream.cases["planted"], oracle=True),
        "seconds": seconds,
    }
    if stream.planted is not None:
        oracle = stream.cases["planted"].slice(test_start).to_numpy()
        out["oracle"] = held_effect(oracle, ret, at)
        if out["skill_found"]:
            out["skill"] = checks.after_activation(str(stream.planted), stream.cases["planted"])
        if out["found"]:
            mine = np.array([stream.planted in t for t in tags], dtype=bool)
            out["rule"] = held_effect(mine, ret, at)
    return out


def floor_seconds(stream: Stream, registry: RoleRegistry) -> float:
    """One plain pass: every condition's mean outcome against the rest, with polars."""
    started = time.perf_counter()
    frame = episode_frame(stream.cases, registry)
    total = frame.select(pl.col("outcome").sum(), pl.len())
    (
        frame.select("outcome", "tags")
        .explode("tags")
        .group_by("tags")
        .agg(pl.col("outcome").sum().alias("s"), pl.len().alias("n"))
        .with_columns(
            (
                pl.col("s") / pl.col("n")
                - (total[0, 0] - pl.col("s")) / (total[0, 1] - pl.col("n"))
            ).alias("effect")
        )
    )
    return time.perf_counter() - started


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _ratio(skills: Sequence[dict[str, Any]]) -> float | None:
    """Mean skill effect over the oracle's mean on the same decisions (after activation)."""
    pairs = [(x["effect"], x["oracle_effect"]) for x in skills if x["oracle_effect"] is not None]
    oracle = float(np.mean([o for _, o in pairs])) if pairs else 0.0
    return float(np.mean([e for e, _ in pairs])) / oracle if oracle else None


def _summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Power, intervals and effects over the seeds of one effect size.

    `rule_*`: the planted condition's own active rule on the held-out decisions (seeds
    where it was found). `learner_effect_mean`: every active avoid-rule together, as a
    user would run them, over all seeds (0 where nothing was held). `checkable_seeds`:
    seeds whose planted condition a learned check can express at all
    (`rule_checks.stop_condition`: a missing evidence kind is its policy check's,
    against-signal is not in the decision record); `skill_power_of_checkable`: the
    planted check's power among them. `oracle_*`: the planted condition checked over the
    test period. `oracle_check_*`: the lifecycle's ceiling, a check of the planted
    condition made at the first cycle and moved by the same steps (`Checks.plant_oracle`;
    checkable seeds only): how often it reaches active, and its interval after that
    above zero. `rule_stage_at_test`: seeds by where the planted rule stood then (`rule_stage`).
    `by_kind`: per planted kind, its seeds, mean carriers per stream and how many found
    the rule and the check (what can be found depends on how many decisions carry it).
    """
    n = len(rows)
    checkable = [r for r in rows if r["checkable"]]
    rules = [r["rule"] for r in rows if r["rule"] is not None]
    skills = [r["skill"] for r in rows if r["skill"]]
    learner = [r["learner"]["effect"] if r["learner"] else 0.0 for r in rows]
    oracle = [r["oracle"]["effect"] for r in rows if r["oracle"] is not None]
    mean_l, mean_o = _mean(learner), _mean(oracle)
    return {
        "seeds": n,
        "power": sum(1 for r in rows if r["found"]) / n,
        "rule_ci_excludes_zero": sum(1 for x in rules if (x["ci_low"] or 0) > 0) / n,
        "rule_effect_mean": _mean([x["effect"] for x in rules]),
        "learner_effect_mean": mean_l,
        "oracle_effect_mean": mean_o,
        "oracle_ci_excludes_zero": sum(
            1 for r in rows if r["oracle"] and (r["oracle"]["ci_low"] or 0) > 0
        )
        / n,
        "learner_over_oracle": None if not (mean_l and mean_o) else mean_l / mean_o,
        "other_rules_active": sum(len(r["active_at_test"]) - int(r["found"]) for r in rows),
        "skill_power": sum(1 for r in rows if r["skill_found"]) / n,
        "checkable_seeds": len(checkable),
        "skill_power_of_checkable": None
        if not checkable
        else sum(1 for r in checkable if r["skill_found"]) / len(checkable),
        "skill_ci_excludes_zero": sum(1 for x in skills if (x["ci_low"] or 0) > 0) / n,
        "skill_effect_mean": _mean([x["effect"] for x in skills]),
        "skill_over_oracle": _ratio(skills),
        "other_skills_active": sum(len(r["skills_active"]) - int(r["skill_found"]) for r in rows),
        "oracle_check_power": sum(1 for r in rows if r["oracle_check"]) / n,
        "oracle_check_ci_excludes_zero": sum(
            1 for r in rows if r["oracle_skill"] and (r["oracle_skill"]["ci_low"] or 0) > 0
        )
        / n,
        "planted_kinds": sorted({str(r["planted"]).split(":")[0] for r in rows}),
        "rule_stage_at_test": dict(sorted(Counter(str(r["rule_stage"]) for r in rows).items())),
        "by_kind": _by_kind(rows),
    }


def _by_kind(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    kinds: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        kinds.setdefault(str(r["planted"]).split(":")[0], []).append(r)
    return {
        kind: {
            "seeds": len(mine),
            "mean_carriers": float(np.mean([r["carriers"] for r in mine])),
            "rules_active": sum(1 for r in mine if r["found"]),
            "checks_active": sum(1 for r in mine if r["skill_found"]),
            "checkable": all(r["checkable"] for r in mine),
        }
        for kind, mine in sorted(kinds.items())
    }


def run_bench(
    bars: Bars,
    registry: RoleRegistry,
    *,
    role_id: str,
    decisions: int,
    seeds: int,
    seed_base: int,
    effects: Sequence[float] = EFFECTS,
    horizon: int = 10,
    progress: bool = True,
) -> dict[str, Any]:
    """Null and planted streams over ``seeds`` seeds; the summary as one JSON object."""
    if role_id not in registry.roles:
        raise ValueError(f"unknown role {role_id!r} (have {sorted(registry.roles)})")
    if decisions < 200 or seeds < 1:
        raise ValueError("need at least 200 decisions and one seed")
    role = registry.roles[role_id]
    started = time.perf_counter()
    null_rows: list[dict[str, Any]] = []
    planted: dict[float, list[dict[str, Any]]] = {e: [] for e in effects}
    floors: list[float] = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, disable=not progress, transient=True) as bar:
        task = bar.add_task("streams", total=seeds * (1 + len(effects)))
        for k in range(seeds):
            seed = seed_base + k
            null = generate(bars, role, n=decisions, seed=seed, kind="null", horizon=horizon)
            null_rows.append(judge(null, registry, role_id))
            floors.append(floor_seconds(null, registry))
            bar.advance(task)
            for effect in effects:
                stream = generate(
                    bars,
                    role,
                    n=decisions,
                    seed=seed,
                    kind="planted",
                    effect_sd=effect,
                    horizon=horizon,
                )
                planted[effect].append(judge(stream, registry, role_id))
                bar.advance(task)
    seconds = time.perf_counter() - started
    per_stream = [r["seconds"] for r in null_rows]
    null_active = [len(r["active_at_test"]) for r in null_rows]
    return {
        "benchmark": "learning",
        "role": role_id,
        "decisions": decisions,
        "seeds": seeds,
        "seed_base": seed_base,
        "horizon_bars": horizon,
        "symbols": len(bars.symbols),
        "bars": len(bars.ts),
        "null": {
            "streams": seeds,
            "active_rules_total": int(sum(null_active)),
            "streams_with_any_active": int(sum(1 for a in null_active if a)),
            "false_discovery_share": sum(1 for a in null_active if a) / seeds,
            "active_skills_total": int(sum(len(r["skills_active"]) for r in null_rows)),
            "checks_made_total": int(sum(r["checks_made"] for r in null_rows)),
            "checks_rolled_out_total": int(sum(r["checks_rolled_out"] for r in null_rows)),
            "oracle_checks_total": int(sum(r["oracle_checks"] for r in null_rows)),
            "oracle_checks_active": int(sum(len(r["oracle_checks_active"]) for r in null_rows)),
        },
        "planted": _summary(planted[HEADLINE]) if HEADLINE in planted else None,
        "power_curve": [{"effect_sd": e, **_summary(rows)} for e, rows in planted.items()],
        "seconds": seconds,
        "seconds_per_stream": float(np.mean(per_stream)),
        "floor_seconds_per_stream": float(np.mean(floors)),
    }
