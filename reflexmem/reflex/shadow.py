"""Shadow evaluation primitives (pure): independent evaluation, replay, shadow comparison.

Each takes a skill and a frame of observations (text columns, see `conditions`) and
returns a typed report whose `evidence()` is what `versions.transition` accepts. None of
them can act: they receive no executor, so a candidate's outputs are compared and
discarded, like a mirror that drops every reply.

* `evaluate_skill`: the skill's decisions on labelled inputs held apart from its source
  experiences (`held_apart` drops those). Accuracy counts the answers the skill would
  actually give (confidence at or above its floor); coverage is their share; a wrong
  confident answer on a counter-example fails the evaluation outright.
* `replay_skill`: past inputs (episodes) with their independent answers: the same
  figures, plus agreement with what was decided live at the time.
* `shadow_compare`: the candidate beside the live decisions (the active version's, or
  whatever the router decided) on new inputs. Where the candidate escalates, the live
  decision stands, as it would with the candidate in place; a one-sided exact McNemar
  test on the discordant pairs says whether the system with the candidate is worse.
  `alpha = 0.05` is the conventional level; it was fixed before any data was seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from reflexmem.reflex.conditions import ROW, observations_frame
from reflexmem.reflex.lifecycle import Evidence, EvidenceKind
from reflexmem.reflex.procedures import decide_frame
from reflexmem.reflex.skills import SkillSpec

SHADOW_ALPHA = 0.05
EXPECTED = "expected"
EPISODE = "episode_id"


def labelled_frame(items: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """`{input, expected, episode_id?}` items (a skill file's sets) as an evaluation frame."""
    inputs = [dict(i["input"]) for i in items]
    fields = set().union(*(i.keys() for i in inputs)) if inputs else set()
    frame = observations_frame(inputs, fields)
    return frame.with_columns(
        pl.Series(EXPECTED, [str(i["expected"]) for i in items], dtype=pl.String),
        pl.Series(EPISODE, [i.get("episode_id") for i in items], dtype=pl.String),
    )


def held_apart(frame: pl.DataFrame, spec: SkillSpec, *, episode_col: str = EPISODE) -> pl.DataFrame:
    """The rows not among the skill's source experiences."""
    if episode_col not in frame.columns:
        return frame
    sources = list(spec.source_experiences)
    return frame.filter(~pl.col(episode_col).is_in(sources).fill_null(False))


def _overlap(frame: pl.DataFrame, spec: SkillSpec, episode_col: str) -> int:
    if episode_col not in frame.columns:
        return 0
    return int(frame[episode_col].is_in(list(spec.source_experiences)).fill_null(False).sum())


def _answers(spec: SkillSpec, frame: pl.DataFrame) -> pl.DataFrame:
    decided = decide_frame(spec, frame)
    confident = pl.col("choice").is_not_null() & (pl.col("confidence") >= spec.confidence_floor)
    return decided.with_columns(
        pl.when(confident).then(pl.col("choice")).otherwise(None).alias("answer")
    )


@dataclass(frozen=True)
class EvaluationReport:
    """A skill's figures on labelled inputs."""

    skill: str
    kind: EvidenceKind
    n: int
    answered: int
    correct: int
    source_overlap: int
    quality_floor: float
    counter_errors: int = 0
    agreement: float | None = None
    confusion: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        """Correct share of the answers the skill gave (0 when it gave none)."""
        return self.correct / self.answered if self.answered else 0.0

    @property
    def coverage(self) -> float:
        """Share of the inputs the skill answered instead of escalating."""
        return self.answered / self.n if self.n else 0.0

    @property
    def passed(self) -> bool:
        """Answers given, accurate enough, no counter-example wrong, nothing seen before."""
        return (
            self.answered > 0
            and self.accuracy >= self.quality_floor
            and self.counter_errors == 0
            and self.source_overlap == 0
        )

    def evidence(self, run_id: str | None = None) -> Evidence:
        """The report as lifecycle evidence."""
        metrics = {
            "n": float(self.n),
            "answered": float(self.answered),
            "accuracy": self.accuracy,
            "coverage": self.coverage,
            "counter_errors": float(self.counter_errors),
            "source_overlap": float(self.source_overlap),
        }
        if self.agreement is not None:
            metrics["agreement_with_live"] = self.agreement
        detail = {"skill": self.skill, "confusion": {k: dict(v) for k, v in self.confusion.items()}}
        return Evidence(self.kind, self.passed, metrics, detail, run_id)


def _confusion(frame: pl.DataFrame) -> dict[str, dict[str, int]]:
    counts = (
        frame.with_columns(pl.col("answer").fill_null("<escalated>"))
        .group_by(EXPECTED, "answer")
        .len()
    )
    table: dict[str, dict[str, int]] = {}
    for expected, answer, n in counts.sort(EXPECTED, "answer").iter_rows():
        table.setdefault(str(expected), {})[str(answer)] = int(n)
    return table


def _score(
    spec: SkillSpec, frame: pl.DataFrame, kind: EvidenceKind, episode_col: str
) -> tuple[EvaluationReport, pl.DataFrame]:
    joined = frame.select(ROW, EXPECTED).join(_answers(spec, frame), on=ROW, how="left")
    labelled = joined.filter(pl.col(EXPECTED).is_not_null())
    answered = labelled.filter(pl.col("answer").is_not_null())
    report = EvaluationReport(
        skill=spec.key,
        kind=kind,
        n=labelled.height,
        answered=answered.height,
        correct=int((answered["answer"] == answered[EXPECTED]).sum()),
        source_overlap=_overlap(frame, spec, episode_col),
        quality_floor=spec.quality_floor,
        confusion=_confusion(labelled),
    )
    return report, joined


def evaluate_skill(
    spec: SkillSpec,
    frame: pl.DataFrame,
    *,
    counter_examples: pl.DataFrame | None = None,
    episode_col: str = EPISODE,
) -> EvaluationReport:
    """Independent evaluation on labelled inputs (`expected` column) held apart."""
    report, _ = _score(spec, frame, EvidenceKind.EVALUATION, episode_col)
    if counter_examples is not None and counter_examples.height:
        _, counter = _score(spec, counter_examples, EvidenceKind.EVALUATION, episode_col)
        wrong = counter.filter(
            pl.col("answer").is_not_null() & (pl.col("answer") != pl.col(EXPECTED))
        )
        report = replace(report, counter_errors=wrong.height)
    return report


def evaluate_declared(spec: SkillSpec) -> EvaluationReport:
    """Evaluate on the skill file's own evaluation set and counter-examples."""
    counter = labelled_frame(spec.counter_examples) if spec.counter_examples else None
    return evaluate_skill(spec, labelled_frame(spec.evaluation_set), counter_examples=counter)


def replay_skill(
    spec: SkillSpec,
    frame: pl.DataFrame,
    *,
    live_col: str | None = "live_choice",
    episode_col: str = EPISODE,
) -> EvaluationReport:
    """Replay past inputs; `expected` holds their independent answers (null if unknown)."""
    report, joined = _score(spec, frame, EvidenceKind.REPLAY, episode_col)
    if live_col is None or live_col not in frame.columns:
        return report
    both = joined.join(frame.select(ROW, live_col), on=ROW).filter(
        pl.col("answer").is_not_null() & pl.col(live_col).is_not_null()
    )
    agreement = int((both["answer"] == both[live_col]).sum()) / both.height if both.height else None
    return replace(report, agreement=agreement)


@dataclass(frozen=True)
class ShadowReport:
    """Candidate vs live decisions on the same new inputs; the candidate never acted."""

    skill: str
    n: int
    compared: int
    agreement: float
    candidate_correct: int
    live_correct: int
    labelled: int
    candidate_only_right: int
    live_only_right: int
    p_worse: float
    alpha: float = SHADOW_ALPHA

    @property
    def worse(self) -> bool:
        """The candidate is significantly less often right than the live decisions."""
        return self.p_worse < self.alpha

    @property
    def passed(self) -> bool:
        """Compared on labelled inputs and not significantly worse."""
        return self.labelled > 0 and not self.worse

    def evidence(self, run_id: str | None = None) -> Evidence:
        """The report as lifecycle evidence."""
        metrics = {
            "n": float(self.n),
            "compared": float(self.compared),
            "agreement": self.agreement,
            "labelled": float(self.labelled),
            "candidate_accuracy": self.candidate_correct / self.labelled if self.labelled else 0.0,
            "live_accuracy": self.live_correct / self.labelled if self.labelled else 0.0,
            "candidate_only_right": float(self.candidate_only_right),
            "live_only_right": float(self.live_only_right),
            "p_worse": self.p_worse,
        }
        return Evidence(EvidenceKind.SHADOW, self.passed, metrics, {"skill": self.skill}, run_id)


def mcnemar_p_worse(candidate_only: int, live_only: int) -> float:
    """One-sided exact McNemar p-value that the candidate is right less often."""
    from scipy.stats import binomtest

    discordant = candidate_only + live_only
    if discordant == 0:
        return 1.0
    return float(binomtest(live_only, discordant, 0.5, alternative="greater").pvalue)


def shadow_compare(
    candidate: SkillSpec, frame: pl.DataFrame, live: pl.Series, *, alpha: float = SHADOW_ALPHA
) -> ShadowReport:
    """Compare the candidate's answers with `live` (one per row; null = live held)."""
    answers = _answers(candidate, frame).select(ROW, "answer")
    keep = [ROW, EXPECTED] if EXPECTED in frame.columns else [ROW]
    data = frame.select(keep).with_columns(live.alias("live").cast(pl.String))
    data = data.join(answers, on=ROW, how="left").with_columns(
        pl.coalesce("answer", "live").alias("effective")
    )
    both = data.filter(pl.col("answer").is_not_null() & pl.col("live").is_not_null())
    agreement = int((both["answer"] == both["live"]).sum()) / both.height if both.height else 0.0
    c_only = l_only = 0
    counts = (0, 0, 0)
    if EXPECTED in data.columns:
        lab = data.filter(pl.col(EXPECTED).is_not_null())
        cand = (lab["effective"] == lab[EXPECTED]).fill_null(False)
        live_ok = (lab["live"] == lab[EXPECTED]).fill_null(False)
        c_only, l_only = int((cand & ~live_ok).sum()), int((live_ok & ~cand).sum())
        counts = (lab.height, int(cand.sum()), int(live_ok.sum()))
    return ShadowReport(
        skill=candidate.key,
        n=frame.height,
        compared=both.height,
        agreement=agreement,
        candidate_correct=counts[1],
        live_correct=counts[2],
        labelled=counts[0],
        candidate_only_right=c_only,
        live_only_right=l_only,
        p_worse=mcnemar_p_worse(c_only, l_only),
        alpha=alpha,
    )


def live_choices(specs: Iterable[SkillSpec], frame: pl.DataFrame) -> pl.Series:
    """What a set of skills would decide in layer order (no L3): a baseline for shadows."""
    out = pl.Series("live", [None] * frame.height, dtype=pl.String)
    for spec in sorted(specs, key=lambda s: (s.layer.rank, s.skill_id)):
        answers = _answers(spec, frame)["answer"]
        out = pl.select(pl.coalesce(out, answers)).to_series().alias("live")
    return out
