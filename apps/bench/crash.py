"""`reflexmem bench crash`: kill the cycle with SIGKILL part way, rerun it, compare ledgers.

The input is what a user's drop folder would hold: the D-full bars and a generated
decision stream of `decisions` rows (`reflexmem.synth`). First one uninterrupted
`reflexmem cycle --drop DIR` runs, in its own OS process, on a fresh scratch ledger:
that ledger's `table_checksums` are the reference. Then each trial runs the same
command on another fresh ledger, kills its process group with SIGKILL at a random
instant of a randomly chosen stage (`StageTrigger`), reruns the command to completion,
and compares the checksums of every table with the reference. A trial is identical
when every table's row count and digest agree.

What the comparison leaves out is only what two runs cannot share: generated IDs and
wall-clock stamps (`reflexmem.ledger.checksums.excluded_columns`, printed in full).
The killed ledger is described by its first incomplete stage: the first stage whose
evidence table holds fewer rows than the reference's.

The honest floor is the uninterrupted run itself: the figure beside it is what a crash
plus rerun costs in wall time.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from adapters.db import make_engine
from apps.bench.support import scratch_url
from reflexmem.ledger.checksums import excluded_columns, table_checksums
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.prices.panel import load_dfull
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream

AS_OF = "2025-03-28T00:00:00+00:00"
"""After the last D-full bar: every decision old enough for its role is due."""

STAGES: tuple[tuple[str, str], ...] = (
    ("ingest", "SELECT COUNT(*) FROM ingested_files"),
    ("admission", "SELECT COUNT(*) FROM admission_batches"),
    ("settle", "SELECT COUNT(*) FROM position_lifecycles WHERE status = 'settled'"),
    ("mature", "SELECT COUNT(*) FROM role_cases WHERE state <> 'pending'"),
    ("evaluate", "SELECT COUNT(*) FROM evaluation_runs"),
    ("promote", "SELECT COUNT(*) FROM evaluation_runs WHERE is_primary"),
    ("reflect", "SELECT COUNT(*) FROM reflection_batches"),
    ("episodes", "SELECT COUNT(*) FROM episodes"),
    ("distil", "SELECT COUNT(*) FROM memory_windows"),
    ("generate", "SELECT COUNT(*) FROM skill_versions"),
    ("check", "SELECT COUNT(*) FROM skill_checks WHERE kind = 'gate'"),
    (
        "advance",
        "SELECT COUNT(*) FROM skill_checks WHERE kind IN ('evaluation', 'replay', 'shadow')",
    ),
    ("audit", "SELECT COUNT(*) FROM skill_checks WHERE kind IN ('audit', 'revalidation')"),
)
"""Each stage of the cycle in order, and a count that grows only when it has run."""
POLL_S = 0.1
MAX_DELAY_S = 2.0
ATTEMPTS = 3


def _cycle_command(drop: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from apps.cli import main; main()",
        "cycle",
        "--drop",
        str(drop),
        "--as-of",
        AS_OF,
        "--json",
    ]


def _env(url: str, home: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "REFLEX_HOME": str(home),
            "REFLEX_DATABASE_URL": url,
            "REFLEX_MLFLOW_TRACKING_URI": f"sqlite:///{home / 'mlflow.sqlite'}",
            "REFLEX_ARTIFACT_ROOT": str(home / "mlartifacts"),
            "REFLEX_PRICES": "ledger",
            "REFLEX_LLM_REFLECTOR": "rules",
        }
    )
    return env


def _run(
    drop: Path, url: str, home: Path, kill_when: Callable[[], bool] | None = None
) -> tuple[float, int]:
    """Run the cycle; with `kill_when`, SIGKILL its process group once it returns True.

    Returns (seconds, exit code); a killed run's code is -SIGKILL.
    """
    home.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with (home / "cycle.log").open("ab") as log:
        proc = subprocess.Popen(
            _cycle_command(drop),
            env=_env(url, home),
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        if kill_when is not None:
            while proc.poll() is None:
                if kill_when():
                    os.killpg(proc.pid, signal.SIGKILL)
                    break
                time.sleep(POLL_S)
        code = proc.wait()
    if kill_when is None and code != 0:
        raise RuntimeError(f"the cycle failed with exit {code}; see {home / 'cycle.log'}")
    return time.perf_counter() - start, code


class StageTrigger:
    """Kill at a random instant of a randomly chosen stage.

    The target stage has begun once the evidence count of the stage before it reached
    the reference run's final count; the kill then comes a random 0 to `MAX_DELAY_S`
    seconds later (a stage that finishes sooner is interrupted in a later one, which the
    trial reports). A run that never gets there is killed after `deadline_s`.
    """

    def __init__(
        self, url: str, reference: dict[str, int], rng: random.Random, deadline_s: float
    ) -> None:
        self.stage = rng.choice([name for name, _ in STAGES])
        self.delay = rng.uniform(0.0, MAX_DELAY_S)
        self.reference = reference
        self.engine = make_engine(url)
        self.started = time.monotonic()
        self.deadline = self.started + deadline_s
        self.begun: float | None = None

    def __call__(self) -> bool:
        """Whether to kill now (polled every `POLL_S`)."""
        now = time.monotonic()
        if now >= self.deadline:
            return True
        if self.begun is None:
            names = [name for name, _ in STAGES]
            index = names.index(self.stage)
            if index == 0:
                self.begun = now
            else:
                try:
                    counts = _counts(self.engine)
                except sa.exc.SQLAlchemyError:
                    return False  # the schema is still being read or locked: look again
                before = names[index - 1]
                if counts[before] >= self.reference[before]:
                    self.begun = now
        return self.begun is not None and now - self.begun >= self.delay

    def close(self) -> None:
        """Release the polling connection."""
        self.engine.dispose()


def _counts(engine: sa.Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {name: int(conn.execute(sa.text(sql)).scalar_one()) for name, sql in STAGES}


def _interrupted(killed: dict[str, int], reference: dict[str, int]) -> str:
    for name, _ in STAGES:
        if killed[name] < reference[name]:
            return name
    return "none (every stage's rows were written; killed while finishing)"


def _ledger(url: str) -> tuple[dict[str, tuple[int, str]], dict[str, int]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            sums = table_checksums(conn)
        return sums, _counts(engine)
    finally:
        engine.dispose()


def prepare_drop(folder: Path, decisions: int, seed: int) -> Path:
    """The drop folder: D-full bars and a stream of `decisions` generated decisions."""
    write_dfull_bars(folder)
    write_stream(generate(load_dfull(), decisions, seed=seed), folder)
    return folder


def run_bench(
    settings: Settings, *, trials: int, backend: str, decisions: int, seed: int = 0
) -> dict[str, Any]:
    """The crash benchmark's JSON-able result (see the module doc)."""
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="reflex-crash-"))
    try:
        drop = prepare_drop(workdir / "drop", decisions, seed)
        with scratch_url(settings, backend, workdir) as url:
            reference_s, _ = _run(drop, url, workdir / "reference")
            reference, reference_counts = _ledger(url)
        results: list[dict[str, Any]] = []
        for trial in range(trials):
            for attempt in range(1, ATTEMPTS + 1):
                with scratch_url(settings, backend, workdir) as url:
                    home = workdir / f"trial-{trial}-{attempt}"
                    trigger = StageTrigger(url, reference_counts, rng, 3 * reference_s)
                    try:
                        killed_s, code = _run(drop, url, home, kill_when=trigger)
                    finally:
                        trigger.close()
                    if code != -signal.SIGKILL and attempt < ATTEMPTS:
                        continue  # finished before the kill: not a crash, try again
                    _, killed_counts = _ledger(url)
                    rerun_s, _ = _run(drop, url, home)
                    sums, _ = _ledger(url)
                break
            differing = sorted(t for t in reference if sums.get(t) != reference[t])
            killed = code == -signal.SIGKILL
            results.append(
                {
                    "trial": trial,
                    "target_stage": trigger.stage,
                    "delay_in_stage_s": round(trigger.delay, 2),
                    "killed": killed,
                    "killed_after_s": round(killed_s, 2),
                    "first_incomplete_stage": _interrupted(killed_counts, reference_counts)
                    if killed
                    else "finished_before_the_kill",
                    "rerun_s": round(rerun_s, 2),
                    "identical": not differing,
                    "differing_tables": {
                        t: {"reference": reference[t], "rerun": sums.get(t)} for t in differing
                    },
                }
            )
        excluded = {t: cols for t, cols in excluded_columns().items() if cols}
        identical = sum(r["identical"] for r in results)
        return {
            "benchmark": "crash",
            "backend": backend,
            "decisions": decisions,
            "trials": trials,
            "identical": identical,
            "killed": sum(r["killed"] for r in results),
            "result": f"{identical}/{trials} identical",
            "tables_compared": len(reference),
            "reference_rows": {t: n for t, (n, _) in reference.items() if n},
            "floor": {"uninterrupted_cycle_s": round(reference_s, 2)},
            "trial_results": results,
            "excluded_columns": excluded,
            "exclusion_rule": "generated IDs and wall-clock stamps: column names matching "
            "`_at$`, `^at$`, `batch_id$`, `run_id$`, `^holder$`, `^recall_id$`, and "
            "autoincrement keys (component_id, observation_id, quarantine_id); the same "
            "rule drops such keys inside JSON values",
        }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
