"""Experiment B's tasks: the four fixed tasks, and disjoint generation/selection/test sets.

The generator writes each task's inputs (behind the tools) and its ground truth (for
the verifier) into the environment; the truth of a scheduling task is found by
scanning the hour grid, not by the scheduling skill. Two environments:

- `composite`: the three single task families (document, image, schedule) and the
  composite family `receipt` (classify the document in a receipt image: the document
  module needs the image module's fields);
- `independent`: only the three single families.

The selection set adds a new period (2026-Q3) and a rare document type (credit notes,
absent from the generation set); the final test set has fresh instances of all of
these plus sub-goal combinations no earlier set contains.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from reflexmem.structures.office import LABELS, RULES, WORK_HOURS, OfficeEnvironment
from reflexmem.structures.runtime import Task

ENVIRONMENTS = ("composite", "independent")
FILLER = ("please", "find", "attached", "the", "document", "for", "your", "records", "kind")
MERCHANTS = ("cafe blue", "hardware hub", "city books", "green grocer", "taxi seven")
PERIODS = {"2026-Q1": date(2026, 1, 5), "2026-Q3": date(2026, 7, 6)}
CLASSIFY, EXTRACT, SCHEDULE = "classify_document", "extract_fields", "schedule_event"


@dataclass(frozen=True)
class TaskSets:
    """Generation (makes candidates), selection (ranks them), test (reports the winner)."""

    generation: tuple[Task, ...]
    selection: tuple[Task, ...]
    test: tuple[Task, ...]

    def __post_init__(self) -> None:
        sets = (self.generation, self.selection, self.test)
        ids = [t.task_id for s in sets for t in s]
        if len(ids) != len(set(ids)):
            raise ValueError("generation, selection and test sets must not share a task")

    def families(self) -> tuple[str, ...]:
        """Task families of the selection set (the ones a floor applies to)."""
        return tuple(sorted({t.family for t in self.selection}))


class _Maker:
    def __init__(self, env: OfficeEnvironment, seed: int) -> None:
        self.env, self.rng, self.n = env, random.Random(seed), 0

    def _id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}-{self.n:04d}"

    def _day(self, period: str, span: int = 60) -> str:
        return (PERIODS[period] + timedelta(days=self.rng.randrange(0, span))).isoformat()

    def document(self, period: str, doc_type: str | None = None) -> tuple[str, str]:
        doc_type = doc_type or self.rng.choice(["invoice", "receipt", "letter", "contract"])
        words = [*self.rng.sample(RULES[doc_type][1], 2), *self.rng.sample(FILLER, 4)]
        self.rng.shuffle(words)
        ref = self._id("doc")
        self.env.inputs[ref] = {"text": " ".join([*words, self._day(period)])}
        return ref, doc_type

    def image(self, period: str) -> tuple[str, dict[str, Any]]:
        fields = {
            "amount": round(self.rng.uniform(3, 400), 2),
            "merchant": self.rng.choice(MERCHANTS),
            "date": self._day(period),
        }
        regions = [
            (self.rng.choice(LABELS["amount"]), f"{fields['amount']:.2f}"),
            (self.rng.choice(LABELS["merchant"]), fields["merchant"]),
            ("DATE", fields["date"]),
            ("THANK YOU", ""),
        ]
        self.rng.shuffle(regions)
        ref = self._id("img")
        self.env.inputs[ref] = {"regions": regions}
        return ref, fields

    def request(self, period: str) -> tuple[str, str]:
        # One request per calendar day, so a day's busy hours are exactly this task's:
        # a booked day moves the request to the next free day.
        day = date.fromisoformat(self._day(period, span=90))
        while day.isoformat() in self.env.booked:
            day += timedelta(days=1)
        self.env.booked.add(day.isoformat())
        hours = self.rng.choice([1, 2])
        return self._book(day.isoformat(), hours)

    def _book(self, day: str, hours: int) -> tuple[str, str]:
        busy = sorted(self.rng.sample(range(WORK_HOURS[0], WORK_HOURS[1]), 3))
        self.env.add_busy(day, busy)
        grid = range(WORK_HOURS[0], WORK_HOURS[1] - hours + 1)
        start = next(h for h in grid if not set(range(h, h + hours)) & set(busy))
        ref = self._id("req")
        self.env.inputs[ref] = {"request": {"day": day, "hours": hours}}
        return ref, f"{day}T{start:02d}:00"

    def task(
        self, family: str, period: str, *, tags: frozenset[str] = frozenset(), rare: bool = False
    ) -> Task:
        subgoals: set[str] = set()
        refs: dict[str, str] = {}
        truth: dict[str, Any] = {}
        parts = family.split("+")
        if "document" in parts:
            ref, doc_type = self.document(period, "credit_note" if rare else None)
            subgoals.add(CLASSIFY)
            refs[CLASSIFY], truth[CLASSIFY] = ref, doc_type
        if "image" in parts or "receipt" in parts:
            ref, fields = self.image(period)
            subgoals.add(EXTRACT)
            refs[EXTRACT], truth[EXTRACT] = ref, fields
        if "receipt" in parts:
            subgoals.add(CLASSIFY)
            truth[CLASSIFY] = "receipt"
        if "schedule" in parts:
            ref, slot = self.request(period)
            subgoals.add(SCHEDULE)
            refs[SCHEDULE], truth[SCHEDULE] = ref, slot
        task = Task(
            self._id(f"t-{family}"),
            family,
            frozenset(subgoals),
            tuple(sorted(refs.items())),
            period,
            tags | ({"rare_type"} if rare else set()),
        )
        self.env.add_truth(task.task_id, truth)
        return task


def families(environment: str) -> tuple[str, ...]:
    """The task families of an experiment B environment."""
    if environment not in ENVIRONMENTS:
        raise ValueError(f"environment must be one of {ENVIRONMENTS}, got {environment!r}")
    single = ("document", "image", "schedule")
    return (*single, "receipt") if environment == "composite" else single


def canonical_tasks(env: OfficeEnvironment, environment: str) -> tuple[Task, ...]:
    """Experiment B's fixed tasks: three single ones, plus the composite one if any."""
    maker = _Maker(env, seed=20260101)
    return tuple(_renamed(maker.task(f, "2026-Q1"), f"b-{f}", env) for f in families(environment))


def _renamed(task: Task, new_id: str, env: OfficeEnvironment) -> Task:
    entry = env.truth_store.get(f"truth:{task.task_id}")
    assert entry is not None
    env.truth_store.put(entry.__class__(**{**entry.to_dict(), "id": f"truth:{new_id}"}))
    return Task(new_id, task.family, task.subgoals, task.refs, task.period, task.tags)


def task_sets(
    env: OfficeEnvironment, environment: str, seed: int = 0, *, per_family: int = 6
) -> TaskSets:
    """Disjoint generation / selection / test sets for one environment."""
    fams = families(environment)
    maker = _Maker(env, seed)
    q1, q3 = "2026-Q1", "2026-Q3"
    new = frozenset({"new_period"})
    generation = [maker.task(f, q1) for f in fams for _ in range(max(2, per_family // 2))]
    selection = [maker.task(f, q1) for f in fams for _ in range(per_family)]
    selection += [maker.task(f, q3, tags=new) for f in fams for _ in range(2)]
    selection.append(maker.task("document", q1, rare=True))
    test = [maker.task(f, q1) for f in fams for _ in range(per_family)]
    test += [maker.task(f, q3, tags=new) for f in fams for _ in range(2)]
    test += [maker.task("document", q3, tags=new, rare=True) for _ in range(2)]
    unseen = ["document+schedule", "image+schedule"]
    if environment == "composite":
        unseen.append("receipt+schedule")
    combo = frozenset({"unseen_combination"})
    test += [maker.task(f, q1, tags=combo) for f in unseen for _ in range(3)]
    return TaskSets(tuple(generation), tuple(selection), tuple(test))


def stream(
    env: OfficeEnvironment,
    environment: str,
    seed: int,
    *,
    per_family: int = 10,
    rare_every: int = 0,
    period: str = "2026-Q3",
) -> tuple[Task, ...]:
    """Live traffic: `per_family` tasks of each family in `period`.

    With `rare_every` = k, every k-th document is of the rare type.
    """
    maker = _Maker(env, seed)
    maker.n = 10_000 * (seed + 1)
    out = []
    for f in families(environment):
        for i in range(per_family):
            rare = f == "document" and rare_every > 0 and i % rare_every == 0
            out.append(maker.task(f, period, tags=frozenset({"live"}), rare=rare))
    return tuple(out)


def office_setup(environment: str, seed: int = 0) -> tuple[OfficeEnvironment, TaskSets]:
    """A fresh environment and its task sets; the same arguments give the same tasks."""
    env = OfficeEnvironment()
    return env, task_sets(env, environment, seed)
