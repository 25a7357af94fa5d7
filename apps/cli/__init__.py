"""`reflexmem`: the command line over the core, the expectations and the flows.

Commands build one `Settings` and pass it down; heavy dependencies (Great Expectations,
Prefect, MLflow) are imported inside the commands that need them, so `--help` is fast.
Each module of this package registers the commands of one area on the shared apps.
"""

from __future__ import annotations

import os

from apps.cli import (  # noqa: F401  (register commands)
    admin,
    agents,
    backfill,
    bench,
    cycle,
    evaluation,
    experiments,
    ledger,
    lessons,
    lineage,
    memory,
    migrate,
    review,
    skills,
    stack,
    structures,
)
from apps.cli.common import app

# Typer shows this as the top-level help; the first paragraph is enough.
app.info.help = (__doc__ or "").split("\n\n")[0]


def main() -> None:
    """Console-script entry point.

    Stdout belongs to the command: `--json` prints one JSON object and nothing else, so
    MLflow's "View run ... at" lines (written to stdout when it talks to a tracking
    server) are switched off; run URLs are in `reflexmem lineage` and the report.
    """
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    app()


__all__ = ["app", "main"]
