"""MLflow lineage of an AEL benchmark run: one parent run, nested runs per method x seed.

The parent run carries the invocation (seeds, methods, panels, folds, cost levels),
the first price panel as a dataset input (context `prices`, so a result can be traced
to the exact bars it was computed on), the timing, the validation selections, the
comparisons and the verdict, every row as a Parquet artifact (`rows.parquet`) and the
plots. Each (method, seed) gets a nested run with its parameters, the first panel's
fold-0 metrics as `<split>_<metric>_<cost>bp` and the pooled test metrics with their
statistics as `<panel>_pooled_test_<metric>_<cost>bp` (metric also `sharpe_se`,
`ci_low`, `ci_high`, `spa_p`), and for learning methods the posteriors, the memory
snapshot, reflections, rule choices per regime and a posterior-means plot.

MLflow is imported inside the functions (the CLI's `--help` stays fast), and the
tracking URI is always passed in: nothing here reads the environment. MLflow's
file store is deprecated, so callers pass `sqlite:///` URIs; the SQLAlchemy 2.1
deprecation warnings MLflow's store triggers are filtered while logging.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from adapters.tracking.redact import safe
from reflexmem.ael.results import BenchmarkResult
from reflexmem.ael.table import METRIC_KEYS
from reflexmem.prices.panel import PricePanel

EXPERIMENT = "ael-benchmark"


@contextmanager
def _quiet() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", category=FutureWarning, module="mlflow")
        warnings.filterwarnings("ignore", message=".*SQLAlchemy.*")
        # A local path matches two equivalent local-artifact source types; either is right.
        warnings.filterwarnings("ignore", message=".*dataset source can be interpreted.*")
        yield


def _dataset_source(source: str) -> str | None:
    """`source` where MLflow can resolve it (a path, a URI), else None: the running code.

    A classic panel's source reads `universal-portfolios:<name>`, which no MLflow source
    type accepts (logging it failed the whole run); the exact string is the run's
    `prices_source` parameter either way.
    """
    from mlflow.data.dataset_source_registry import resolve_dataset_source
    from mlflow.exceptions import MlflowException

    try:
        resolve_dataset_source(source)
    except MlflowException:
        return None
    return source


def panel_frame(panel: PricePanel) -> Any:
    """The panel as a pandas frame (timestamp + one close column per ticker)."""
    import pandas as pd

    frame = pd.DataFrame(panel.closes, columns=list(panel.tickers))
    frame.insert(0, "timestamp", pd.to_datetime(panel.timestamps).tz_localize("UTC"))
    return frame


def metric_name(split: str, metric: str, cost_bp: float) -> str:
    """MLflow metric key, e.g. `test_sharpe_0bp`."""
    return f"{split}_{metric}_{cost_bp:g}bp"


def _row_metrics(rows: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        prefix = row["split"] if row["fold"] != "pooled" else f"{row['panel']}_pooled_test"
        for key in (*METRIC_KEYS, "sharpe_se", "ci_low", "ci_high", "spa_p"):
            value = row.get(key)
            if isinstance(value, float) and math.isfinite(value):
                out[metric_name(prefix, key, row["cost_bp"])] = value
        if row["fold"] != "pooled":
            out[f"{row['split']}_n_returns"] = float(row["n_returns"])
            out[f"{row['split']}_seconds"] = float(row["timing"]["seconds"])
    return out


def _ensure_experiment(experiment: str, tracking_uri: str) -> None:
    """Create the experiment beside a SQLite store (`mlartifacts/`), never under `./mlruns`."""
    import mlflow

    from adapters.tracking.context import ensure_experiment

    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    root = None
    if tracking_uri.startswith("sqlite:///"):
        root = Path(tracking_uri.removeprefix("sqlite:///")).parent / "mlartifacts"
    description = "AEL benchmark invocations: Table 2 per panel, statistics, plots (docs/ael.md)."
    ensure_experiment(client, experiment, description, root)


def log_benchmark(
    result: BenchmarkResult,
    panel: PricePanel,
    *,
    tracking_uri: str,
    source: str,
    experiment: str = EXPERIMENT,
    plots_dir: Path | None = None,
    run_name: str | None = None,
) -> str:
    """Log one invocation; return the parent run id.

    The global tracking URI is restored afterwards, so logging here does not
    redirect whatever else in the process uses MLflow.
    """
    with _quiet():
        import mlflow

        from reflexmem.ael.learning_plots import plot_run_posteriors

        previous = mlflow.get_tracking_uri()
        mlflow.set_tracking_uri(tracking_uri)
        try:
            _ensure_experiment(experiment, tracking_uri)
            mlflow.set_experiment(experiment)
            with mlflow.start_run(run_name=run_name or "ael-bench") as parent:
                params: dict[str, Any] = {
                    "methods": ",".join(result.methods),
                    "seeds": ",".join(str(s) for s in result.seeds),
                    "cost_bps": ",".join(f"{c:g}" for c in result.cost_bps),
                    "n_bars": panel.n_bars,
                    "tickers": ",".join(panel.tickers),
                    "prices_source": source,
                }
                params["panels"] = ",".join(result.panels)
                for name, info in result.panels.items():
                    params[f"folds_{name}"] = len(info["folds"])
                mlflow.log_params(safe(params))
                dataset = mlflow.data.from_pandas(  # type: ignore[attr-defined]
                    panel_frame(panel), source=_dataset_source(source), name="prices"
                )
                mlflow.log_input(dataset, context="prices")
                mlflow.log_metric("total_seconds", float(result.timing["total_seconds"]))
                _log_dict(result.timing, "timing.json")
                _log_dict(result.selections, "selections.json")
                _log_dict({"verdict": result.verdict}, "verdict.json")
                _log_dict({"comparisons": result.comparisons}, "comparisons.json")
                _log_dict(result.refusals(), "refusals.json")
                _log_rows(result)
                if plots_dir is not None and plots_dir.is_dir():
                    mlflow.log_artifacts(str(plots_dir), artifact_path="plots")
                _log_children(result, plot_run_posteriors)
                return str(parent.info.run_id)
        finally:
            mlflow.set_tracking_uri(previous)


def _log_dict(data: Any, name: str) -> None:
    """`mlflow.log_dict` of the redacted data (the fluent API has no redacting client)."""
    import mlflow

    mlflow.log_dict(safe(data), name)


def _log_rows(result: BenchmarkResult) -> None:
    import mlflow
    import polars as pl

    flat = [
        {
            **{k: v for k, v in r.items() if k != "timing"},
            "seed": str(r["seed"]),
            "fold": str(r["fold"]),
            "seconds": r["timing"]["seconds"],
        }
        for r in result.rows
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.parquet"
        pl.DataFrame(flat, infer_schema_length=None).write_parquet(path)
        mlflow.log_artifact(str(path))


def _log_children(result: BenchmarkResult, plot_run_posteriors: Any) -> None:
    import mlflow

    groups: dict[tuple[str, int | None], list[dict[str, Any]]] = {}
    first = next(iter(result.panels))
    for row in result.rows:
        if row["seed"] == "ensemble":
            continue
        if (row["fold"] == 0 and row["panel"] == first) or row["fold"] == "pooled":
            groups.setdefault((row["method"], row["seed"]), []).append(row)
    records = {(r.method, r.seed): r for r in result.runs if (r.panel, r.fold) == (first, 0)}
    with tempfile.TemporaryDirectory() as tmp:
        for (method, seed), rows in groups.items():
            label = method if seed is None else f"{method}-seed{seed}"
            with mlflow.start_run(run_name=label, nested=True):
                params: dict[str, Any] = {
                    "method": method,
                    "seed": "none" if seed is None else seed,
                }
                record = records.get((method, seed)) if seed is not None else None
                if rows:
                    params["kind"] = rows[0]["kind"]
                mlflow.log_params(safe(params))
                mlflow.log_metrics(_row_metrics(rows))
                if record is None:
                    continue
                mlflow.log_metrics(
                    {
                        "seconds": record.seconds,
                        "per_decision_us": record.seconds * 1e6 / max(record.decisions, 1),
                    }
                )
                _log_dict(record.posteriors(), "posteriors.json")
                _log_dict(record.learned_state, "memory_snapshot.json")
                _log_dict(
                    {"reflections": record.reflections, "frozen_checks": record.frozen_checks},
                    "reflections.json",
                )
                _log_dict(record.rule_frequencies, "rule_frequencies.json")
                if len(record.arms) > 1:
                    png = plot_run_posteriors(record, Path(tmp) / f"{label}-posteriors.png")
                    mlflow.log_artifact(str(png), artifact_path="plots")
