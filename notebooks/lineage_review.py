# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
# ---

# %% [markdown]
# # Lineage review of a Reflex Memory store
#
# Run after `make demo` (or point `REFLEX_HOME` / `REFLEX_DATABASE_URL` elsewhere).
# It reads the ledger and the MLflow store the settings name and answers: what did
# admission do with every row, and which benchmark runs were recorded with which
# inputs? Opens as a notebook with jupytext, runs as a plain script too.

# %%
from __future__ import annotations

import warnings

import polars as pl
import sqlalchemy as sa

from infra.db import make_engine
from reflexmem.ledger.audit import ledger_counts
from reflexmem.settings import Settings

warnings.filterwarnings("ignore", category=DeprecationWarning)
settings = Settings()
engine = make_engine(settings.resolved_database_url)

# %% [markdown]
# ## Admission: conservation per batch and reasons

# %%
with engine.connect() as conn:
    batches = pl.DataFrame(
        [dict(r._mapping) for r in conn.execute(sa.text("SELECT * FROM admission_batches"))]
    )
    counts = ledger_counts(conn)
print(batches)
assert counts.batches_violating_conservation == 0, "a batch lost rows"
print("quarantined by reason:", counts.quarantined_by_reason)
print("pending by reason:", counts.pending_by_reason)

# %% [markdown]
# ## MLflow: every run, its experiment, its dataset inputs and tags

# %%
import mlflow  # noqa: E402

client = mlflow.MlflowClient(tracking_uri=settings.resolved_tracking_uri)
rows = []
for experiment in client.search_experiments():
    for run in client.search_runs([experiment.experiment_id], max_results=200):
        rows.append(
            {
                "experiment": experiment.name,
                "run": run.info.run_name,
                "parent": run.data.tags.get("mlflow.parentRunId", ""),
                "inputs": ", ".join(d.dataset.name for d in run.inputs.dataset_inputs),
                "metrics": len(run.data.metrics),
            }
        )
runs = pl.DataFrame(rows) if rows else pl.DataFrame()
print(runs)
engine.dispose()
