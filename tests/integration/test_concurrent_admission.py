"""Eight `reflexmem admit` and four reflection processes at once on PostgreSQL: all exit 0.

Real OS processes against one scratch ledger. The ledger holds an admitted, matured and
evaluated stream (cases waiting for reflection) and a second stream not yet judged,
some of whose executions claim previews of the first (so the batch that judges them
also revokes earlier cases). Then eight `reflexmem admit --json` processes and four
`reflexmem reflect && reflexmem episodes` processes start together. Every process must
exit 0; every execution must end admitted, pending or quarantined exactly once
(conservation, no duplicate case); every case must be reflected at most once (the sum
of the batches' counts equals the cases with a verdict) and recorded at most once (one
episode and one episodic memory entry per case). Each admission waits up to 600 s for
the lock, so none may give up as `busy` however slow the machine. The figures are
printed for the record.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import sqlalchemy as sa

from adapters.resources import build_resources
from apps.bench.support import scratch_url
from reflexmem.operations import intake
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.prices.panel import load_dfull
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream
from tests.integration.ledger_data import renamed
from tests.support import mature_and_evaluate

CLI = [sys.executable, "-c", "from apps.cli import main; main()"]


def _one(engine: sa.Engine, sql: str) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.text(sql)).scalar_one())


@pytest.mark.postgres
@pytest.mark.serial
def test_eight_admissions_and_four_reflections_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = Settings()
    with scratch_url(base, "postgres", tmp_path) as url:
        env = dict(os.environ)
        env.update(
            {
                "REFLEX_HOME": str(tmp_path / "home"),
                "REFLEX_DATABASE_URL": url,
                "REFLEX_MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.sqlite'}",
                "REFLEX_ARTIFACT_ROOT": str(tmp_path / "artifacts"),
                "REFLEX_ADMISSION_LOCK_WAIT_S": "600",
            }
        )
        settings = Settings(
            home=tmp_path / "home",
            database_url=url,
            mlflow_tracking_uri=env["REFLEX_MLFLOW_TRACKING_URI"],
            artifact_root=tmp_path / "artifacts",
        )
        res = build_resources(settings)
        engine = res.engine
        panel = load_dfull()
        intake.ingest(res, [write_dfull_bars(tmp_path / "bars")], "bars")
        first = generate(panel, 1500, seed=11)
        intake.ingest(res, write_stream(first, tmp_path / "first"))
        intake.admit(res)
        mature_and_evaluate(res)
        second = renamed(generate(panel, 1500, seed=12), "-b")
        # Ten executions of the second stream claim previews the first stream used.
        claims = second["executions"]["execution_id"].head(10).to_list()
        second["executions"] = second["executions"].with_columns(
            pl.when(pl.col("execution_id").is_in(claims))
            .then(pl.col("preview_id").str.replace("-b$", ""))
            .otherwise(pl.col("preview_id"))
            .alias("preview_id")
        )
        intake.ingest(res, write_stream(second, tmp_path / "second"))
        eligible_before = _one(engine, "SELECT COUNT(*) FROM role_cases WHERE state = 'eligible'")
        assert eligible_before > 100

        cli = " ".join(CLI[:2]) + ' "from apps.cli import main; main()"'
        commands: list[list[str]] = [[*CLI, "admit", "--json"] for _ in range(8)]
        commands += [["bash", "-c", f"{cli} reflect --json && {cli} episodes --json"]] * 4
        start = time.perf_counter()
        procs = [
            subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for cmd in commands
        ]
        outputs = [p.communicate(timeout=900) for p in procs]
        wall = time.perf_counter() - start
        codes = [p.returncode for p in procs]
        assert codes == [0] * 12, [o[1][-2000:] for o, c in zip(outputs, codes, strict=True) if c]

        admissions: list[dict[str, Any]] = [
            json.loads(o[0].strip().splitlines()[-1]) for o in outputs[:8]
        ]
        judged = sum(a["rows_in"] for a in admissions)
        busy = sum(a["busy"] for a in admissions)
        executions = _one(engine, "SELECT COUNT(*) FROM trade_executions")
        cases = _one(engine, "SELECT COUNT(*) FROM role_cases")
        distinct_cases = _one(engine, "SELECT COUNT(DISTINCT execution_id) FROM role_cases")
        held = _one(engine, "SELECT COUNT(*) FROM quarantine WHERE subject_kind = 'execution'")
        revoked = _one(engine, "SELECT COUNT(*) FROM role_cases WHERE state = 'revoked'")
        overlap = _one(
            engine,
            "SELECT COUNT(*) FROM role_cases rc JOIN quarantine q ON q.subject_id = "
            "rc.execution_id AND q.subject_kind = 'execution' WHERE rc.state <> 'revoked'",
        )
        assert judged == 1500, admissions
        assert busy == 0
        assert distinct_cases == cases
        assert executions == cases - revoked + held
        assert overlap == 0
        assert revoked == sum(a["revoked"] for a in admissions)
        assert revoked >= 1
        assert (
            _one(
                engine,
                "SELECT COUNT(*) FROM admission_batches "
                "WHERE rows_in <> admitted + pending + quarantined",
            )
            == 0
        )
        verdicts = _one(engine, "SELECT COUNT(*) FROM role_cases WHERE reflection IS NOT NULL")
        batch_counts = _one(
            engine, "SELECT COALESCE(SUM(reflected + failed), 0) FROM reflection_batches"
        )
        assert verdicts > 0
        assert batch_counts == verdicts  # no case was reflected twice
        episodes = _one(engine, "SELECT COUNT(*) FROM episodes WHERE case_id IS NOT NULL")
        distinct_episodes = _one(engine, "SELECT COUNT(DISTINCT case_id) FROM episodes")
        episodic = _one(
            engine,
            "SELECT COUNT(*) FROM memory_entries "
            "WHERE tier = 'episodic' AND namespace LIKE 'role:%'",
        )
        assert episodes == distinct_episodes
        assert episodic == episodes
        figures = {
            "processes": len(procs),
            "exit_codes": codes,
            "wall_s": round(wall, 1),
            "admission_batches_written": _one(engine, "SELECT COUNT(*) FROM admission_batches"),
            "executions_judged": judged,
            "admits_with_work": sum(a["rows_in"] > 0 for a in admissions),
            "revoked": revoked,
            "cases": cases,
            "quarantined": held,
            "reflected_cases": verdicts,
            "reflection_batches": _one(engine, "SELECT COUNT(*) FROM reflection_batches"),
            "episodes": episodes,
        }
        engine.dispose()
    with capsys.disabled():
        print("\nconcurrency figures:", json.dumps(figures))
