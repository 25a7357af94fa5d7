from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reflexmem.ael.learning import LEARNING_METHODS
from reflexmem.ael.results import ALL_ROW_KEYS, BenchmarkResult
from reflexmem.ael.rules import RULE_NAMES, RuleBook
from reflexmem.ael.run import (
    combine_parts,
    default_methods,
    load_inputs,
    panel_inputs,
    run_benchmark,
)
from reflexmem.ael.run_tasks import HINDSIGHT, SELECTED, PanelInputs, rule_units
from reflexmem.ael.table import DEFAULT_COST_BPS, Row
from reflexmem.synth import synthetic_prices

METHODS = ("equal_weight", "momentum", "momentum_16", SELECTED, HINDSIGHT, "tools", "ael", "memory")


@pytest.fixture(scope="module")
def inputs() -> PanelInputs:
    return panel_inputs(synthetic_prices(1200, 5, seed=5), name="synth", folds=2, bars_per_year=252)


@pytest.fixture(scope="module")
def result(inputs: PanelInputs) -> BenchmarkResult:
    return run_benchmark(inputs, seeds=[0, 1], methods=METHODS)


def _strip(rows: list[Row]) -> list[Row]:
    return [{k: v for k, v in r.items() if k != "timing"} for r in rows]


def test_rows_cover_every_method_seed_fold_split_and_cost_with_the_documented_keys(
    result: BenchmarkResult,
) -> None:
    assert all(tuple(r) == ALL_ROW_KEYS for r in result.rows)
    folds = [r for r in result.rows if r["fold"] != "pooled"]
    cells = {(r["method"], r["seed"], r["fold"], r["split"], r["cost_bp"]) for r in folds}
    seeded = {"tools", "ael", "memory"}
    expected = {
        (m, s, f, split, float(c))
        for m in METHODS
        for s in ((0, 1) if m in seeded else (None,))
        for f in (0, 1)
        for split in ("train", "val", "test")
        for c in DEFAULT_COST_BPS
    }
    assert cells == expected
    assert len(folds) == len(expected)
    assert all(r["sharpe_se"] > 0 for r in folds if r["split"] == "test")
    tested = [r for r in folds if r["split"] == "test" and r["method"] != SELECTED]
    assert all(r["ci_low"] <= r["ci_high"] for r in tested)


def test_pooled_rows_concatenate_the_folds_and_carry_spa_on_the_seed_ensemble(
    result: BenchmarkResult,
) -> None:
    pooled = [r for r in result.rows if r["fold"] == "pooled"]
    ensemble = [r for r in pooled if r["seed"] == "ensemble"]
    assert {r["method"] for r in ensemble} == {"tools", "ael", "memory"}
    assert all(r["spa_p"] is not None and 0 <= r["spa_p"] <= 1 for r in ensemble)
    test_returns = sum(
        r["n_returns"]
        for r in result.rows
        if r["method"] == "momentum"
        and r["split"] == "test"
        and r["fold"] in (0, 1)
        and r["cost_bp"] == 0.0
    )
    (mom,) = [r for r in pooled if r["method"] == "momentum" and r["cost_bp"] == 0.0]
    assert mom["n_returns"] == test_returns


def test_val_selected_rule_is_chosen_on_validation_and_ignores_the_test_split(
    inputs: PanelInputs,
) -> None:
    fold = inputs.folds[0]
    poisoned = inputs.panel.closes.copy()
    poisoned[fold.test.start :] *= np.linspace(0.2, 5.0, inputs.panel.n_assets)[None, :]
    dirty = panel_inputs(
        inputs.panel.with_closes(poisoned), name="synth", folds=2, bars_per_year=252
    )
    costs = tuple(DEFAULT_COST_BPS)
    _, clean = rule_units(inputs, 0, RuleBook(inputs.panel), list(RULE_NAMES), costs)
    _, other = rule_units(dirty, 0, RuleBook(dirty.panel), list(RULE_NAMES), costs)
    assert clean[SELECTED] == other[SELECTED]
    assert set(clean[SELECTED].values()) <= set(RULE_NAMES)


def test_every_learning_run_ran_test_frozen(result: BenchmarkResult) -> None:
    assert len(result.runs) == 2 * 2 * 2  # methods x seeds x folds
    checks = result.frozen_checks()
    assert len(checks) == len(result.runs)
    assert all(c["identical"] and c["split"] == "test" for c in checks)


def test_per_seed_parts_combine_into_the_rows_of_one_call(
    inputs: PanelInputs, result: BenchmarkResult
) -> None:
    parts = [
        run_benchmark(
            inputs, seeds=[1], methods=METHODS, include_deterministic=False, statistics=False
        ),
        run_benchmark(inputs, seeds=[0], methods=METHODS, statistics=False),
    ]
    combined = combine_parts(parts)
    assert _strip(combined.rows) == _strip(result.rows)


def test_two_workers_give_the_rows_of_one(inputs: PanelInputs, result: BenchmarkResult) -> None:
    parallel = run_benchmark(inputs, seeds=[0, 1], methods=METHODS, workers=2)
    assert _strip(parallel.rows) == _strip(result.rows)


def test_document_is_strict_json_with_comparisons_and_a_verdict(result: BenchmarkResult) -> None:
    doc = json.loads(json.dumps(result.to_document(), allow_nan=False))
    assert len(doc["rows"]) == len(result.rows)
    assert doc["comparisons"]
    assert {c["method"] for c in doc["comparisons"]} == {"ael", "memory"}
    lines = doc["verdict"]
    assert any(line.startswith("TARGET (10 bp, pooled): ael") for line in lines)
    assert all(
        ("indistinguishable" in s)
        or (" beats " in s)
        or (" trails " in s)
        or s.startswith("TARGET")
        for s in lines
        if "pooled:" in s and "every" not in s
    )


def test_plots_are_written_as_png(result: BenchmarkResult, tmp_path: Path) -> None:
    from reflexmem.ael.learning_plots import write_plots

    names = {p.name for p in write_plots(result, tmp_path)}
    assert {
        "equity_synth_0bp.png",
        "equity_synth_10bp.png",
        "policy_frequencies.png",
        "posterior_means.png",
        "rule_choices_ael.png",
    } <= names
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in tmp_path.glob("*.png"))


def test_default_methods_and_dfull_inputs() -> None:
    assert set(LEARNING_METHODS) <= set(default_methods(False))
    assert {"olmar", "pamr", "ons", "up", "bcrp"} <= set(default_methods(True))
    inputs = load_inputs()
    assert [s.n_returns for s in inputs.folds[0]] == [127, 39, 39]
    assert len(inputs.evidence) == 40
    with pytest.raises(ValueError, match="both"):
        load_inputs(train_end=inputs.panel.local_dates[10].item())
    with pytest.raises(ValueError, match="unknown methods"):
        run_benchmark(inputs, methods=["nope"])
