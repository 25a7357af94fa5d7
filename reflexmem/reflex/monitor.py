"""Limited rollout attribution and drift detection (pure): the evidence of the later moves.

* `rollout_assign` puts every row in the `treated` arm (the limited version decides)
  or the `control` arm (the active version does) by the sticky bucket of its account
  and symbol, exactly as the router does; `rollout_report` counts both arms and their
  success rates. A rollout passes when each arm has at least `min_per_arm` episodes
  (30: the usual floor for the normal approximation of a proportion) and the treated
  arm is not significantly worse (one-sided two-proportion z-test at 0.05).
* `drift_report` compares a recent window with the validation window: the outcome
  (success share, a two-proportion test; or a two-sample Kolmogorov-Smirnov test for a
  numeric outcome) and each input field (chi-square homogeneity over categories, or KS
  for numbers). The family-wise level is `alpha = 0.01`, split over the tests
  (Bonferroni), so monitoring many fields does not raise false quarantines; the
  population stability index (PSI) is reported beside each test for reading, not for
  deciding. Both levels are conventional and were fixed before any data was seen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from reflexmem.reflex.lifecycle import Evidence, EvidenceKind
from reflexmem.reflex.rollout import rollout_buckets

Floats = np.ndarray[tuple[int], np.dtype[np.float64]]
MIN_PER_ARM = 30
ROLLOUT_ALPHA = 0.05
DRIFT_ALPHA = 0.01
MAX_CATEGORIES = 20
"""Categories kept per field in the chi-square test; rarer ones are pooled as other."""


def rollout_assign(
    frame: pl.DataFrame,
    salt: str,
    fraction: float,
    *,
    account: str = "account",
    symbol: str = "symbol",
) -> pl.DataFrame:
    """`frame` with `bucket` and `arm` (`treated` / `control`, null without a pair)."""
    buckets = rollout_buckets(frame, salt, account=account, symbol=symbol)
    arm = (
        pl.when(pl.col("bucket").is_null())
        .then(None)
        .when(pl.col("bucket") < fraction)
        .then(pl.lit("treated"))
        .otherwise(pl.lit("control"))
    )
    return frame.with_columns(buckets.alias("bucket")).with_columns(arm.alias("arm"))


def _rate(successes: int, n: int) -> float:
    return successes / n if n else 0.0


def two_proportion_p_less(success_a: int, n_a: int, success_b: int, n_b: int) -> float:
    """One-sided p-value that arm a's success rate is below arm b's (pooled z-test)."""
    if n_a == 0 or n_b == 0:
        return 1.0
    pooled = (success_a + success_b) / (n_a + n_b)
    se = math.sqrt(pooled * (1 - pooled) * (1 / n_a + 1 / n_b))
    if se == 0:
        return 1.0
    z = (success_a / n_a - success_b / n_b) / se
    return 0.5 * math.erfc(-z / math.sqrt(2))


@dataclass(frozen=True)
class RolloutReport:
    """Episodes and successes per arm of a limited rollout."""

    skill: str
    treated: int
    control: int
    treated_success: int
    control_success: int
    min_per_arm: int = MIN_PER_ARM
    alpha: float = ROLLOUT_ALPHA

    @property
    def p_worse(self) -> float:
        """One-sided p-value that the treated arm succeeds less often."""
        return two_proportion_p_less(
            self.treated_success, self.treated, self.control_success, self.control
        )

    @property
    def passed(self) -> bool:
        """Both arms large enough and the treated arm not significantly worse."""
        enough = min(self.treated, self.control) >= self.min_per_arm
        return enough and self.p_worse >= self.alpha

    def evidence(self, run_id: str | None = None) -> Evidence:
        """The report as lifecycle evidence."""
        metrics = {
            "treated": float(self.treated),
            "control": float(self.control),
            "treated_success_rate": _rate(self.treated_success, self.treated),
            "control_success_rate": _rate(self.control_success, self.control),
            "p_worse": self.p_worse,
            "min_per_arm": float(self.min_per_arm),
        }
        return Evidence(EvidenceKind.ROLLOUT, self.passed, metrics, {"skill": self.skill}, run_id)


def rollout_report(
    assigned: pl.DataFrame, skill: str, *, success: str = "success", min_per_arm: int = MIN_PER_ARM
) -> RolloutReport:
    """Count the arms of `rollout_assign`'s frame; `success` is a boolean column."""
    counts = (
        assigned.filter(pl.col("arm").is_not_null())
        .group_by("arm")
        .agg(pl.len().alias("n"), pl.col(success).cast(pl.Int64).sum().alias("ok"))
    )
    by_arm = {arm: (int(n), int(ok)) for arm, n, ok in counts.iter_rows()}
    treated, control = by_arm.get("treated", (0, 0)), by_arm.get("control", (0, 0))
    return RolloutReport(skill, treated[0], control[0], treated[1], control[1], min_per_arm)


@dataclass(frozen=True)
class DriftTest:
    """One two-sample test between the validation and the recent window."""

    name: str
    test: str
    statistic: float
    p_value: float
    psi: float | None


@dataclass(frozen=True)
class DriftReport:
    """Every test of one drift check and the family-wise verdict."""

    skill: str
    n_validation: int
    n_recent: int
    tests: tuple[DriftTest, ...]
    alpha: float = DRIFT_ALPHA
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def threshold(self) -> float:
        """The per-test level after the Bonferroni split."""
        return self.alpha / max(1, len(self.tests))

    @property
    def drifted(self) -> tuple[str, ...]:
        """Names of the tests below the per-test level."""
        return tuple(t.name for t in self.tests if t.p_value < self.threshold)

    def evidence(self, run_id: str | None = None) -> Evidence:
        """Drift evidence: passed means no drift (a quarantine needs it failed)."""
        metrics = {"n_validation": float(self.n_validation), "n_recent": float(self.n_recent)}
        metrics.update({f"p_{t.name}": t.p_value for t in self.tests})
        detail = {
            "skill": self.skill,
            "drifted": list(self.drifted),
            "threshold": self.threshold,
            "tests": [t.__dict__ for t in self.tests],
        }
        return Evidence(EvidenceKind.DRIFT, not self.drifted, metrics, detail, run_id)


def _psi(expected: Floats, actual: Floats) -> float:
    e = np.clip(expected / max(expected.sum(), 1), 1e-4, None)
    a = np.clip(actual / max(actual.sum(), 1), 1e-4, None)
    return float(np.sum((a - e) * np.log(a / e)))


def _categorical(name: str, old: pl.Series, new: pl.Series) -> DriftTest:
    from scipy.stats import chi2_contingency

    both = pl.concat([old, new]).fill_null("<null>").cast(pl.String)
    top = both.value_counts(sort=True).head(MAX_CATEGORIES)[both.name].to_list()

    def counts(s: pl.Series) -> Floats:
        v = pl.col("v")
        kept = pl.DataFrame({"v": s.fill_null("<null>").cast(pl.String)}).select(
            pl.when(v.is_in(top)).then(v).otherwise(pl.lit("<other>")).alias("v")
        )
        found = dict(kept["v"].value_counts().iter_rows())
        return np.array([float(found.get(c, 0)) for c in [*top, "<other>"]])

    table = np.vstack([counts(old), counts(new)])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        return DriftTest(name, "chi2", 0.0, 1.0, 0.0)
    stat, p, _, _ = chi2_contingency(table)
    return DriftTest(name, "chi2", float(stat), float(p), _psi(table[0], table[1]))


def _numeric(name: str, old: Floats, new: Floats) -> DriftTest:
    from scipy.stats import ks_2samp

    if len(old) == 0 or len(new) == 0:
        return DriftTest(name, "ks", 0.0, 1.0, None)
    result = ks_2samp(old, new)
    edges = np.unique(np.quantile(old, np.linspace(0, 1, 11)))
    psi = None
    if len(edges) > 2:
        psi = _psi(
            np.histogram(old, edges)[0].astype(float), np.histogram(new, edges)[0].astype(float)
        )
    return DriftTest(name, "ks", float(result.statistic), float(result.pvalue), psi)


def _outcome(old: pl.Series, new: pl.Series) -> DriftTest:
    if old.dtype == pl.Boolean:
        a, b = old.drop_nulls(), new.drop_nulls()
        p_down = two_proportion_p_less(int(b.sum()), b.len(), int(a.sum()), a.len())
        p_up = two_proportion_p_less(int(a.sum()), a.len(), int(b.sum()), b.len())
        p = min(1.0, 2 * min(p_down, p_up))  # both 1.0 when the rates cannot differ (se = 0)
        shift = _rate(int(b.sum()), b.len()) - _rate(int(a.sum()), a.len())
        return DriftTest("outcome", "two_proportion", shift, p, None)
    old_v = old.cast(pl.Float64).drop_nulls().to_numpy()
    new_v = new.cast(pl.Float64).drop_nulls().to_numpy()
    return _numeric("outcome", old_v, new_v)


def drift_report(
    skill: str,
    validation: pl.DataFrame,
    recent: pl.DataFrame,
    *,
    outcome: str,
    inputs: Sequence[str] = (),
    alpha: float = DRIFT_ALPHA,
) -> DriftReport:
    """Test the outcome and every input field of `recent` against `validation`."""
    tests = [_outcome(validation[outcome], recent[outcome])]
    for name in inputs:
        old, new = validation[name], recent[name]
        as_num_old = old.cast(pl.Float64, strict=False)
        as_num_new = new.cast(pl.Float64, strict=False)
        numeric = (
            as_num_old.null_count() == old.null_count()
            and as_num_new.null_count() == new.null_count()
        )
        if numeric and old.dtype != pl.Boolean:
            tests.append(
                _numeric(
                    name, as_num_old.drop_nulls().to_numpy(), as_num_new.drop_nulls().to_numpy()
                )
            )
        else:
            tests.append(_categorical(name, old, new))
    return DriftReport(skill, validation.height, recent.height, tuple(tests), alpha)
