"""A small demo store for the lineage tests: the demo's stages on fewer decisions.

Built with the operations exactly as `make demo` builds its store (bars through the
`bars` ingest, a decision stream, the learning cycle with the real MLflow tracker, one
seed of the AEL benchmark with its JSON and plots), on 4,000 decisions (enough for a
procedural rule to form), so the notebook, report and browser tests share one store
built in well under a minute.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from apps.bench.ael import run_command
from reflexmem.operations import intake
from reflexmem.operations.cycle import CycleParams, CycleReport, run_cycle
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.settings import Settings
from tests.support import AS_OF, migrated, seed_ledger


def build_store(home: Path, decisions: int = 4000) -> tuple[Settings, CycleReport]:
    """Migrate, ingest, run one cycle and one AEL seed under `home`; settings and report."""
    settings = Settings(home=home, database_url=None, mlflow_tracking_uri=None, artifact_root=None)
    res = migrated(settings)
    intake.ingest(res, [write_dfull_bars(home / "inputs" / "bars")], "bars")
    seed_ledger(res, home / "inputs", n=decisions, seed=5)
    report = run_cycle(DirectRunner(res), CycleParams(as_of=AS_OF))
    res.engine.dispose()
    out = home / "ael"
    run_command(
        prices=None,
        seeds=1,
        methods=None,
        json_out=out / "ael.json",
        plots_dir=out / "plots",
        train_end=None,
        val_end=None,
        bars_per_year=1008,
        tracking_uri=settings.resolved_tracking_uri,
        console=Console(file=open("/dev/null", "w"), width=120),  # noqa: SIM115
        peers=False,
    )
    return settings, report
