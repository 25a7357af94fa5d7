"""Deterministic reflection rules: layer L0 (evidence integrity) and L1 (outcome attribution).

The checks run in a fixed order and the first that fires decides the class:

1. **missing_data (L0)**: required evidence was absent, stale at the decision, or the
   record carries evidence dated after the decision (look-ahead leakage). It comes first
   because every later check reads the evidence and the role's signal derived from it;
   a verdict built on incomplete or leaked evidence would attribute the outcome to
   something the role never had. Leaked items are excluded from everything afterwards.
2. **variance (L1)**: |outcome| lies inside the noise band `k * vol * sqrt(horizon)`.
   Before blaming the market or the role, ask whether the outcome is distinguishable
   from noise at all; if not, it teaches nothing, whatever else is true.
3. **exogenous (L1)**: a market-wide shock of at least `shock_sigma` against the
   position, unknowable at decision time, explains the loss. It precedes logic_error so
   a role is not taught to "fix" reasoning that a crash, not the reasoning, punished.
4. **logic_error (L1)**: the decision went against the sign of the role's own signal
   and lost. Only now is the role's reasoning the remaining explanation.
5. otherwise **variance**: a profitable or self-consistent case yields no guidance.

Numeric checks run over numpy arrays of the whole batch; only cases that end up with a
lesson or an L0 finding get per-item Python work to word their reasons.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from numpy.typing import NDArray

from reflexmem.ledger.enums import Direction, OutcomeClass
from reflexmem.reflection.types import (
    LESSON_MAX_CHARS,
    EvidenceItem,
    Reflection,
    ReflectionInput,
)
from reflexmem.registry import RolePolicy

_DAY = 86_400.0

# Words in a failure-mode name that fit each learnable class; the mode sharing the most
# words with the class and the offending evidence kind wins, ties go to declaration order.
_MODE_HINTS: dict[OutcomeClass, frozenset[str]] = {
    OutcomeClass.MISSING_DATA: frozenset({"stale", "missing", "ignored", "data"}),
    OutcomeClass.LOGIC_ERROR: frozenset(
        {"ignored", "misread", "denial", "underestimated", "anchoring", "contradicted"}
    ),
}


@dataclass(frozen=True)
class RuleConfig:
    """Thresholds of the rule layers.

    `noise_k = 1.0`: an outcome within one horizon standard deviation of zero is not
    distinguishable from noise, so no lesson is drawn from it. `shock_sigma = 2.0`: a
    benchmark move of two horizon sigmas is rare enough (about 5 % two-sided under a
    normal) to excuse a loss in its direction. `min_signal = 0.1`: a signal closer to
    zero is neutral, and going against a neutral signal contradicts nothing.
    """

    noise_k: float = 1.0
    shock_sigma: float = 2.0
    min_signal: float = 0.1

    def __post_init__(self) -> None:
        if self.noise_k <= 0 or self.shock_sigma <= 0 or not 0 <= self.min_signal < 1:
            raise ValueError(f"invalid rule thresholds: {self}")


@dataclass(frozen=True)
class _Finding:
    """One L0 problem with one required kind or one leaked item."""

    kind: str
    problem: str  # "leaked", "absent" or "stale"
    detail: str
    age_days: float = 0.0
    max_age_days: float = 0.0


def _tokens(name: str) -> set[str]:
    return set(name.lower().split("_"))


def pick_failure_mode(role: RolePolicy, cls: OutcomeClass, kinds: Sequence[str] = ()) -> str:
    """Choose the role's failure mode that best fits the class and evidence, deterministically."""
    return _best_mode(role.failure_modes, cls, tuple(kinds))


@functools.lru_cache(maxsize=4096)
def _best_mode(modes: tuple[str, ...], cls: OutcomeClass, kinds: tuple[str, ...]) -> str:
    # Cached: a batch asks the same few (role, class, kinds) questions many times over.
    hints = set(_MODE_HINTS.get(cls, frozenset()))
    for kind in kinds:
        hints |= _tokens(kind)
    best, best_score = modes[0], 0
    for mode in modes:
        score = len(_tokens(mode) & hints)
        if score > best_score:
            best, best_score = mode, score
    return best


def _clip(text: str) -> str:
    if len(text) <= LESSON_MAX_CHARS:
        return text
    return text[: LESSON_MAX_CHARS - 1].rstrip() + "…"


def _stamp(value: datetime) -> str:
    return value.isoformat(timespec="minutes")


def _l0_findings(case: ReflectionInput) -> list[_Finding]:
    """Leaked items first, then each required kind that is absent or stale."""
    decided = case.decided_at.timestamp()
    findings = [
        _Finding(
            e.kind,
            "leaked",
            f"look-ahead leakage: {e.kind} as_of {_stamp(e.as_of)} is after the decision "
            f"at {_stamp(case.decided_at)}; item excluded from every check",
        )
        for e in case.evidence
        if e.epoch > decided
    ]
    for req in case.role.required_evidence:
        usable = [e for e in case.evidence if e.kind == req.kind and e.epoch <= decided]
        if not usable:
            findings.append(
                _Finding(req.kind, "absent", f"required {req.kind} absent at decision time")
            )
            continue
        freshest = max(usable, key=lambda e: e.epoch)
        age = (decided - freshest.epoch) / _DAY
        if age > req.max_age_days:
            findings.append(
                _Finding(
                    req.kind,
                    "stale",
                    f"required {req.kind} stale: as_of {_stamp(freshest.as_of)} is "
                    f"{age:.1f} days old at the decision (limit {req.max_age_days:g})",
                    age,
                    req.max_age_days,
                )
            )
    return findings


def _missing_lesson(case: ReflectionInput, first: _Finding) -> str:
    role = case.role
    mode = pick_failure_mode(role, OutcomeClass.MISSING_DATA, [first.kind])
    if first.problem == "leaked":
        text = (
            f"Role {role.id} ({mode}): the decision record carries {first.kind} dated after "
            f"the decision (look-ahead), so only {first.kind} available at decision time counts."
        )
    elif first.problem == "absent":
        text = f"Role {role.id} ({mode}): decided without the required {first.kind} evidence."
    else:
        text = (
            f"Role {role.id} ({mode}): decided on {first.kind} {first.age_days:.1f} days old, "
            f"beyond its {first.max_age_days:g}-day limit."
        )
    return _clip(text)


def _logic_lesson(case: ReflectionInput, usable: Sequence[EvidenceItem], loss: float) -> str:
    role = case.role
    kinds = list(dict.fromkeys(e.kind for e in usable))[:3]
    mode = pick_failure_mode(role, OutcomeClass.LOGIC_ERROR, kinds)
    source = "/".join(kinds) if kinds else "available"
    signal = case.signal if case.signal is not None else 0.0
    text = (
        f"Role {role.id} ({mode}): went {case.direction.value} against its own {source} "
        f"signal ({signal:+.2f}) and lost {loss:.2%}."
    )
    return _clip(text)


def _column(batch: Sequence[ReflectionInput], attr: str) -> NDArray[np.float64]:
    values = (getattr(c, attr) for c in batch)
    return np.fromiter((np.nan if v is None else v for v in values), np.float64, len(batch))


def _has_l0_problem(batch: Sequence[ReflectionInput]) -> NDArray[np.bool_]:
    """Per case: any leaked item, or any required kind absent or stale (vectorized)."""
    n = len(batch)
    decided = np.fromiter((c.decided_at.timestamp() for c in batch), np.float64, n)
    codes: dict[str, int] = {}
    item_case: list[int] = []
    item_kind: list[int] = []
    item_epoch: list[float] = []
    req_case: list[int] = []
    req_kind: list[int] = []
    req_max: list[float] = []
    for i, case in enumerate(batch):
        for e in case.evidence:
            item_case.append(i)
            item_kind.append(codes.setdefault(e.kind, len(codes)))
            item_epoch.append(e.epoch)
        for req in case.role.required_evidence:
            req_case.append(i)
            req_kind.append(codes.setdefault(req.kind, len(codes)))
            req_max.append(req.max_age_days * _DAY)
    flagged = np.zeros(n, dtype=np.bool_)
    n_kinds = max(len(codes), 1)
    ic = np.asarray(item_case, dtype=np.int64)
    ik = np.asarray(item_kind, dtype=np.int64)
    ie = np.asarray(item_epoch, dtype=np.float64)
    leaked = ie > decided[ic]
    flagged[ic[leaked]] = True
    freshest = np.full(n * n_kinds, -np.inf)
    ok = ~leaked
    np.maximum.at(freshest, ic[ok] * n_kinds + ik[ok], ie[ok])
    rc = np.asarray(req_case, dtype=np.int64)
    rk = np.asarray(req_kind, dtype=np.int64)
    rm = np.asarray(req_max, dtype=np.float64)
    newest = freshest[rc * n_kinds + rk]
    bad = np.isneginf(newest) | (decided[rc] - newest > rm)
    flagged[rc[bad]] = True
    return flagged


def classify(
    batch: Sequence[ReflectionInput], config: RuleConfig | None = None
) -> list[Reflection]:
    """Classify a batch of settled cases with the L0/L1 rules, one reflection per case."""
    cfg = config or RuleConfig()
    n = len(batch)
    if n == 0:
        return []
    sign = np.fromiter(
        (1.0 if c.direction is Direction.LONG else -1.0 for c in batch), np.float64, n
    )
    ret = _column(batch, "realized_return")
    bench = _column(batch, "benchmark_return")
    vol = _column(batch, "realized_vol")
    shock = _column(batch, "market_shock_sigma")
    signal = _column(batch, "signal")
    horizon = np.fromiter((c.role.outcome_probe.horizon_bars for c in batch), np.float64, n)
    excess = np.fromiter((c.role.outcome_probe.kind == "excess_return" for c in batch), np.bool_, n)
    observable = np.fromiter((c.shock_observable for c in batch), np.bool_, n)

    use_excess = excess & ~np.isnan(bench)
    outcome = sign * np.where(use_excess, ret - np.nan_to_num(bench), ret)
    band = cfg.noise_k * vol * np.sqrt(horizon)
    loss = outcome < 0
    with np.errstate(invalid="ignore"):
        in_noise = ~np.isnan(band) & (np.abs(outcome) < band)
        shocked = ~np.isnan(shock) & ~observable & (sign * shock <= -cfg.shock_sigma) & loss
        contradicted = ~np.isnan(signal) & (sign * signal <= -cfg.min_signal) & loss
    l0 = _has_l0_problem(batch)

    codes = np.select([l0, in_noise, shocked, contradicted], [0, 1, 2, 3], default=4).tolist()
    out: list[Reflection] = []
    for i, case in enumerate(batch):
        out.append(
            _reflection(
                case,
                codes[i],
                float(outcome[i]),
                float(band[i]),
                bool(excess[i] and not use_excess[i]),
                cfg,
            )
        )
    return out


def _reflection(
    case: ReflectionInput,
    code: int,
    outcome: float,
    band: float,
    benchmark_missing: bool,
    cfg: RuleConfig,
) -> Reflection:
    if code == 0:
        decided = case.decided_at.timestamp()
        usable: Sequence[EvidenceItem] = [e for e in case.evidence if e.epoch <= decided]
    else:
        usable = case.evidence  # a leaked item would have made this an L0 case
    used = tuple(e.ref for e in usable)
    notes = ("excess-return probe without a benchmark return; judged on the raw return",)
    extra = notes if benchmark_missing else ()
    if code == 0:
        findings = _l0_findings(case)
        return Reflection(
            case_id=case.case_id,
            outcome_class=OutcomeClass.MISSING_DATA,
            lesson=_missing_lesson(case, findings[0]),
            evidence_used=used,
            reasons=tuple(f.detail for f in findings) + extra,
            layer="L0",
        )
    if code == 1:
        cls, lesson = OutcomeClass.VARIANCE, None
        why = f"|outcome| {abs(outcome):.4f} within noise band {band:.4f} (k={cfg.noise_k:g})"
    elif code == 2:
        cls, lesson = OutcomeClass.EXOGENOUS, None
        why = (
            f"market shock {case.market_shock_sigma:+.2f} sigma against the position "
            f"(threshold {cfg.shock_sigma:g}), not observable at decision time"
        )
    elif code == 3:
        cls = OutcomeClass.LOGIC_ERROR
        lesson = _logic_lesson(case, usable, -outcome)
        why = (
            f"went {case.direction.value} against the role's own signal {case.signal:+.2f} "
            f"and lost {-outcome:.4f}"
        )
    else:
        cls, lesson = OutcomeClass.VARIANCE, None
        why = (
            f"outcome {outcome:+.4f} is no loss: no guidance"
            if outcome >= 0
            else f"loss {-outcome:.4f} has no shock and no contradicted signal behind it: "
            "no guidance"
        )
    return Reflection(
        case_id=case.case_id,
        outcome_class=cls,
        lesson=lesson,
        evidence_used=used,
        reasons=(why, *extra),
        layer="L1",
    )


class RuleReflector:
    """The rule layers behind the `Reflector` protocol."""

    def __init__(self, config: RuleConfig | None = None) -> None:
        self.config = config or RuleConfig()

    def reflect(self, batch: Sequence[ReflectionInput]) -> list[Reflection]:
        """Classify the batch deterministically; the rules never fail a case."""
        return classify(batch, self.config)
