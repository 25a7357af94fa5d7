from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reflexmem.ael.learning import LEARNING_METHODS
from reflexmem.ael.results import ALL_ROW_KEYS
from reflexmem.ael.run import run_benchmark
from reflexmem.prices.panel import PricePanel

METHODS = ["equal_weight", "momentum", "val_selected_rule", "tools", "memory", "ael"]


def test_mlflow_lineage_has_a_parent_with_the_prices_and_nested_runs_per_method_and_seed(
    mlflow_uri: str, synthetic: PricePanel, synthetic_csv: Path, tmp_path: Path
) -> None:
    from apps.bench.ael_tracking import log_benchmark
    from reflexmem.ael.learning_plots import write_plots

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import mlflow

    result = run_benchmark(synthetic, seeds=[0, 1], methods=METHODS)
    assert result.panels == {"panel": result.panels["panel"]}
    plots = tmp_path / "plots"
    write_plots(result, plots)
    parent_id = log_benchmark(
        result, synthetic, tracking_uri=mlflow_uri, source=str(synthetic_csv), plots_dir=plots
    )
    client = mlflow.MlflowClient(tracking_uri=mlflow_uri)
    parent = client.get_run(parent_id)
    assert parent.inputs is not None
    (dataset_input,) = parent.inputs.dataset_inputs
    assert dataset_input.dataset.name == "prices"
    assert [t.value for t in dataset_input.tags if t.key == "mlflow.data.context"] == ["prices"]
    assert parent.data.params["seeds"] == "0,1"
    parent_artifacts = {a.path for a in client.list_artifacts(parent_id)}
    assert {"timing.json", "selections.json", "verdict.json", "rows.parquet", "plots"} <= (
        parent_artifacts
    )

    children = client.search_runs(
        [parent.info.experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    by_name = {c.info.run_name: c for c in children}
    expected = {"equal_weight", "momentum", "val_selected_rule"} | {
        f"{m}-seed{s}" for m in ("tools", "memory", "ael") for s in (0, 1)
    }
    assert set(by_name) == expected
    ael = by_name["ael-seed1"]
    assert ael.data.params["method"] == "ael"
    assert ael.data.params["seed"] == "1"
    assert ael.data.params["kind"] == "learning"
    assert "panel_pooled_test_sharpe_se_10bp" in ael.data.metrics
    assert "test_sharpe_0bp" in ael.data.metrics
    assert "val_return_pct_20bp" in ael.data.metrics
    row = next(
        r
        for r in result.rows
        if (r["method"], r["seed"], r["split"], r["cost_bp"], r["fold"])
        == ("ael", 1, "test", 0.0, 0)
    )
    assert ael.data.metrics["test_sharpe_0bp"] == pytest.approx(row["sharpe"])
    names = {a.path for a in client.list_artifacts(ael.info.run_id)}
    assert {"posteriors.json", "memory_snapshot.json", "plots"} <= names
    snapshot = json.loads(
        Path(
            client.download_artifacts(ael.info.run_id, "memory_snapshot.json", str(tmp_path))
        ).read_text()
    )
    assert snapshot["store"]["entries"]
    assert all(loop["bandit"]["arms"] for loop in snapshot["loops"].values())
    assert {ns.split(":")[1] for ns in snapshot["loops"]} == {"ael"}
    assert "test_sharpe_0bp" in by_name["momentum"].data.metrics


def test_a_panel_from_a_package_not_a_file_is_logged_with_its_source_as_a_parameter(
    mlflow_uri: str, synthetic: PricePanel
) -> None:
    from apps.bench.ael_tracking import log_benchmark

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import mlflow

    result = run_benchmark(synthetic, seeds=[0], methods=["equal_weight"])
    source = "universal-portfolios:nyse_o,universal-portfolios:djia"
    parent_id = log_benchmark(result, synthetic, tracking_uri=mlflow_uri, source=source)
    parent = mlflow.MlflowClient(tracking_uri=mlflow_uri).get_run(parent_id)
    assert parent.data.params["prices_source"] == source
    assert parent.inputs is not None
    (dataset_input,) = parent.inputs.dataset_inputs
    assert dataset_input.dataset.name == "prices"


def test_cli_writes_json_rows_and_png_plots(synthetic_csv: Path, tmp_path: Path) -> None:
    from apps.cli import app

    out = tmp_path / "out.json"
    plots = tmp_path / "plots"
    res = CliRunner().invoke(
        app,
        [
            "bench",
            "ael",
            "--prices",
            str(synthetic_csv),
            "--seeds",
            "1",
            "--json",
            str(out),
            "--plots",
            str(plots),
            "--no-mlflow",
            "--no-peers",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "Table 2 - prices, test pooled over 1 fold(s), 0 bp" in res.output
    assert "Table 2 - prices, test pooled over 1 fold(s), 20 bp" in res.output
    assert "TARGET (10 bp, pooled): ael beats val_selected_rule" in res.output
    assert "full table wall time" in res.output
    doc = json.loads(out.read_text())
    methods = {r["method"] for r in doc["rows"]}
    assert methods >= {
        "equal_weight",
        "momentum",
        "min_variance",
        "inverse_momentum",
        "stateless",
        "tools",
        "val_selected_rule",
        "hindsight_best_rule",
        *LEARNING_METHODS,
    }
    assert all(tuple(r) == ALL_ROW_KEYS for r in doc["rows"])
    assert {"sharpe_se", "ci_low", "ci_high", "spa_p", "fold"} <= set(doc["rows"][0])
    assert {r["seed"] for r in doc["rows"] if r["method"] == "ael"} == {0, "ensemble"}
    assert "total_seconds" in doc["timing"]
    assert doc["verdict"]
    pngs = sorted(p.name for p in plots.glob("*.png"))
    assert {"equity_prices_0bp.png", "policy_frequencies.png", "posterior_means.png"} <= set(pngs)


def test_cli_accepts_comma_separated_and_repeated_methods(
    synthetic_csv: Path, tmp_path: Path
) -> None:
    from apps.cli import app

    out = tmp_path / "out.json"
    res = CliRunner().invoke(
        app,
        [
            "bench",
            "ael",
            "--prices",
            str(synthetic_csv),
            "--seeds",
            "1",
            "--methods",
            "momentum,tools",
            "--methods",
            "memory",
            "--json",
            str(out),
            "--no-mlflow",
            "--no-peers",
        ],
    )
    assert res.exit_code == 0, res.output
    assert {r["method"] for r in json.loads(out.read_text())["rows"]} == {
        "momentum",
        "tools",
        "memory",
    }
    bad = CliRunner().invoke(
        app,
        ["bench", "ael", "--prices", str(synthetic_csv), "--methods", "nope", "--no-mlflow"],
    )
    assert bad.exit_code == 2
