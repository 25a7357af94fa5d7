# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Lineage review: one trade, end to end
#
# Run after `make demo` (or point `REFLEX_HOME` / `REFLEX_DATABASE_URL` at another
# store; `REFLEX_DECISION` picks the trade, otherwise the one whose chain reaches
# furthest is taken). It follows one decision through preview, execution, fills,
# position, role case, evaluation runs and their components, promotion, reflection
# and lesson, the semantic pattern and procedural rule the lesson fed, and any skill
# version built on it; every MLflow step is read back from the MLflow store. Then:
# admission quarantine by reason, bandit posteriors, and the benchmark's equity curves.
# Open it with jupytext (`jupytext --to ipynb`) or run it as a plain script.

# %%
from __future__ import annotations

import json
import os
import warnings

import polars as pl
import sqlalchemy as sa

from adapters.lineage import pick_decision, trace
from adapters.review_store import open_store

warnings.filterwarnings("ignore", category=DeprecationWarning)
store = open_store()  # refuses a missing ledger instead of creating an empty one
print("ledger:", store.settings.resolved_database_url)
print("MLflow:", store.settings.resolved_tracking_uri, "(present)" if store.client else "(absent)")


def frame(sql: str, **params: object) -> pl.DataFrame:
    """Rows of a ledger query as a polars frame."""
    with store.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.text(sql), params)]
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


# %% [markdown]
# ## The chain of one decision

# %%
with store.engine.connect() as conn:
    decision_id = os.environ.get("REFLEX_DECISION") or pick_decision(conn)
    assert decision_id is not None, "the ledger has no evaluated decision yet"
    lineage = trace(conn, decision_id, store.links)
assert lineage is not None, f"decision {decision_id} is not in the ledger"
chain = lineage.as_json()
steps = pl.DataFrame(
    [
        {"step": s["kind"], "id": str(s["id"]), "mlflow_run": s["mlflow_run_id"] or "-"}
        for s in chain["steps"]
    ]
)
print(f"decision {decision_id}: {' -> '.join(dict.fromkeys(steps['step'].to_list()))}")
with pl.Config(tbl_rows=50, fmt_str_lengths=60):
    print(steps)

# %% [markdown]
# ## Decision, preview, execution, fills, position, case

# %%
for step in chain["steps"]:
    if step["kind"] in ("decision", "preview", "execution", "position", "case"):
        fields = {k: v for k, v in step.items() if k not in ("mlflow_run_id", "url", "fills")}
        print(step["kind"], json.dumps(fields, default=str))
        for fill in step.get("fills", []):
            print("  fill", json.dumps(fill, default=str))

# %% [markdown]
# ## Evaluation runs with their components, and the promotion

# %%
for step in lineage.of("evaluation"):
    d = step.detail
    print(
        f"evaluation run {step.id}: profile {d['profile']} v{d['profile_version']}, "
        f"primary={bool(d['is_primary'])}, batch {d['batch_id']}, MLflow run {step.mlflow_run_id}"
    )
    print(pl.DataFrame(d["components"]))
for step in lineage.of("promotion"):
    d = step.detail
    print(
        f"promotion {step.id}: run {d['run_id']} primary (replaced {d['previous_run_id']}), "
        f"profile v{d['profile_version']}, source batch {d['source_batch']} "
        f"(MLflow run {d['source_mlflow_run_id']}), MLflow run {step.mlflow_run_id}"
    )

# %% [markdown]
# ## What MLflow holds for those steps (read back from the tracking store)

# %%
mlflow_check = {}
if store.client is not None:
    for step in lineage.steps:
        if step.kind in ("evaluation", "promotion", "reflection") and step.mlflow_run_id:
            run = store.client.get_run(step.mlflow_run_id)
            tags = run.data.tags
            inputs = [d.dataset for d in run.inputs.dataset_inputs]
            mlflow_check[step.kind] = {
                "run": step.mlflow_run_id,
                "batch_id": tags.get("reflexmem.batch_id"),
                "symbols": tags.get("reflexmem.symbols"),
                "cycle_id": tags.get("reflexmem.cycle_id"),
                "parent": tags.get("mlflow.parentRunId"),
                "dataset": inputs[0].name if inputs else None,
                "digest": inputs[0].digest if inputs else None,
                "url": step.url,
            }
    for kind, info in mlflow_check.items():
        print(kind, json.dumps(info))

# %% [markdown]
# ## Reflection and lesson (the lessons table artifact of the reflection run)

# %%
lesson_row: dict[str, object] = {}
for step in lineage.of("reflection"):
    d = step.detail
    print(f"reflection batch {step.id} ({d['reflector']}): class {d['outcome_class']}")
    if store.client is not None and step.mlflow_run_id:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            path = store.client.download_artifacts(step.mlflow_run_id, "lessons.parquet", tmp)
            lessons = pl.read_parquet(path)
        mine = lessons.filter(pl.col("decision_id") == decision_id)
        print(mine.select("case_id", "outcome_class", "lesson", "layer", "evaluation_run_id"))
        lesson_row = mine.row(0, named=True) if mine.height else {}
for step in lineage.of("lesson"):
    print(f"lesson ({step.id}): {step.detail['text']}")

# %% [markdown]
# ## Semantic pattern, procedural rule, skill and structure versions

# %%
for step in lineage.of("pattern"):
    d = step.detail
    print(
        f"pattern {step.id} -> now {d['current_id']} ({d['state']}, support {d['support']}, "
        f"{len(d['versions'])} versions)\n  {d['text']}"
    )
for step in lineage.of("rule"):
    print(f"rule {step.id} ({step.detail['state']}): {step.detail['text']}")
for step in lineage.of("skill") + lineage.of("structure"):
    print(f"{step.kind} {step.id}: {step.url}")
if not lineage.of("skill"):
    print("skill: no skill version lists this decision's episode among its source experiences")

# %%
summary = {
    "decision_id": decision_id,
    "kinds": list(dict.fromkeys(s["kind"] for s in chain["steps"])),
    "evaluation_runs": [s.id for s in lineage.of("evaluation")],
    "evaluation_mlflow_runs": [s.mlflow_run_id for s in lineage.of("evaluation")],
    "promotion_batches": [s.id for s in lineage.of("promotion")],
    "reflection_batches": [s.id for s in lineage.of("reflection")],
    "lesson": lesson_row.get("lesson"),
    "patterns": [s.detail["current_id"] for s in lineage.of("pattern")],
    "rules": [s.id for s in lineage.of("rule")],
    "mlflow": mlflow_check,
}
print("LINEAGE_SUMMARY " + json.dumps(summary, default=str))

# %% [markdown]
# ## Admission: quarantine by reason

# %%
quarantine = frame(
    "SELECT reason_code, subject_kind, COUNT(*) AS n FROM quarantine "
    "GROUP BY reason_code, subject_kind ORDER BY n DESC, reason_code"
)
print(quarantine)
batches = frame("SELECT COUNT(*) AS batches, SUM(rows_in) AS rows_in FROM admission_batches")
print(batches)

# %% [markdown]
# ## Bandit posteriors: the ledger's retrieval-policy arms, and the benchmark's over time

# %%
bandits = frame("SELECT agent_id, policy, alpha, beta, pulls FROM bandit_states ORDER BY 1, 2")
if bandits.height:
    bandits = bandits.with_columns(
        (pl.col("alpha") / (pl.col("alpha") + pl.col("beta"))).round(3).alias("posterior_mean")
    )
print(bandits)
plots = store.settings.home / "ael" / "plots"
shown = []
try:
    from IPython.display import Image, display
except ImportError:  # a plain script: name the files instead
    display = None
for name in ("posterior_means.png", "policy_frequencies.png"):
    if (plots / name).exists():
        shown.append(name)
        if display is not None:
            display(Image(filename=str(plots / name)))
print("bandit plots:", shown or f"none under {plots} (run the demo's benchmark step)")

# %% [markdown]
# ## The benchmark: equity curves and the test-split table

# %%
equity = sorted(p.name for p in plots.glob("equity_*.png")) if plots.exists() else []
for name in equity:
    if display is not None:
        display(Image(filename=str(plots / name)))
print("equity plots:", equity)
ael_json = store.settings.home / "ael" / "ael.json"
if ael_json.exists():
    rows = pl.DataFrame(json.loads(ael_json.read_text())["rows"], infer_schema_length=None)
    table = (
        rows.filter((pl.col("split") == "test") & (pl.col("cost_bp") == 0.0))
        .group_by("method")
        .agg(pl.col("sharpe").mean().round(2), pl.col("return_pct").mean().round(2))
        .sort("sharpe", descending=True)
    )
    print(table)
store.close()
