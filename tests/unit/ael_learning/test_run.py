from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from reflexmem.ael.learning import LEARNING_METHODS, TILT_GRID
from reflexmem.ael.panel import PricePanel
from reflexmem.ael.run import (
    BenchmarkResult,
    combine_results,
    default_splits,
    learning_verdict,
    load_inputs,
    run_benchmark,
    select_tilt,
)
from reflexmem.ael.table import BASELINES, DEFAULT_COST_BPS, ROW_KEYS, registered_methods

ALL_METHODS = (*BASELINES, "stateless", "tools", *LEARNING_METHODS)


@pytest.fixture(scope="module")
def result(synthetic: PricePanel) -> BenchmarkResult:
    return run_benchmark(synthetic, seeds=[0, 1])


def _strip(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "timing"} for r in rows]


def test_rows_cover_every_method_seed_split_and_cost_with_exactly_the_required_keys(
    result: BenchmarkResult, synthetic: PricePanel
) -> None:
    assert set(registered_methods()) == set(ALL_METHODS)
    assert all(tuple(r) == ROW_KEYS for r in result.rows)
    cells = {(r["method"], r["seed"], r["split"], r["cost_bp"]) for r in result.rows}
    expected = {
        (m, s, split, float(c))
        for m in ALL_METHODS
        for s in ((None,) if m in BASELINES else (0, 1))
        for split in ("train", "val", "test")
        for c in DEFAULT_COST_BPS
    }
    assert cells == expected
    assert len(result.rows) == len(expected)
    assert {r["seed"] for r in result.rows if r["method"] in BASELINES} == {None}
    splits = default_splits(synthetic)
    counts = {r["split"]: r["n_returns"] for r in result.rows}
    assert counts == {s.name: s.n_returns for s in splits}


def test_timing_reports_wall_time_per_method_and_agent_overhead(result: BenchmarkResult) -> None:
    timing = result.timing
    assert timing["total_seconds"] > 0
    assert set(timing["per_method_seconds"]) == set(ALL_METHODS)
    assert set(timing["tuning_seconds"]) == set(LEARNING_METHODS)
    overhead = timing["agent_overhead_us"]["all_learning"]
    parts = ("tools", "memory", "bandit", "reflection", "planner")
    assert overhead["total"] == pytest.approx(sum(overhead[k] for k in parts))
    assert all(overhead[k] > 0 for k in ("tools", "memory", "bandit"))


def test_every_learning_run_ran_test_frozen_with_unchanged_memory(result: BenchmarkResult) -> None:
    assert len(result.runs) == len(LEARNING_METHODS) * 2
    for run in result.runs:
        (check,) = [c for c in run.frozen_checks if c["split"] == "test"]
        assert check["identical"]
        assert run.tilt in TILT_GRID
        assert run.tilt == max(run.validation, key=lambda k: (run.validation[k], -k))


def test_hyperparameters_are_chosen_on_validation_without_seeing_the_test_split(
    synthetic: PricePanel,
) -> None:
    splits = default_splits(synthetic)
    poisoned = synthetic.closes.copy()
    poisoned[splits.test.start :] *= np.linspace(0.2, 5.0, synthetic.n_assets)[None, :]
    clean = load_inputs_like(synthetic)
    dirty = load_inputs_like(synthetic.with_closes(poisoned))
    assert select_tilt("ael", 0, clean) == select_tilt("ael", 0, dirty)


def load_inputs_like(panel: PricePanel):  # type: ignore[no-untyped-def]
    from reflexmem.ael.run import BenchmarkInputs, evidence_for

    return BenchmarkInputs(panel, default_splits(panel), evidence_for(panel), "test")


def test_per_seed_parts_combine_into_the_rows_of_one_call(
    synthetic: PricePanel, result: BenchmarkResult
) -> None:
    methods = list(registered_methods())
    parts = [
        run_benchmark(synthetic, seeds=[1], include_deterministic=False),
        run_benchmark(synthetic, seeds=[0], include_deterministic=True),
    ]
    combined = combine_results(parts, methods, [0, 1])
    assert _strip(combined.rows) == _strip(result.rows)


def test_document_is_strict_json_and_the_verdict_is_stated(
    result: BenchmarkResult, tmp_path: Path
) -> None:
    text = json.dumps(result.to_document(), allow_nan=False)
    doc = json.loads(text)
    assert len(doc["rows"]) == len(result.rows)
    assert doc["frozen_checks"]
    assert all(c["identical"] for c in doc["frozen_checks"])
    lines = learning_verdict(result)
    assert len(lines) == len(LEARNING_METHODS) * len(DEFAULT_COST_BPS)
    assert all(("does not beat" in line) != (" beats " in line) for line in lines)


def test_plots_are_written_as_png(result: BenchmarkResult, tmp_path: Path) -> None:
    from reflexmem.ael.learning_plots import write_plots

    paths = write_plots(result, tmp_path)
    names = {p.name for p in paths}
    assert {"equity_test_0bp.png", "policy_frequencies.png", "posterior_means.png"} <= names
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_load_inputs_defaults_to_dfull_with_its_protocol_splits() -> None:
    inputs = load_inputs()
    assert [s.n_returns for s in inputs.splits] == [127, 39, 39]
    assert len(inputs.evidence) == 40
    with pytest.raises(ValueError, match="both"):
        load_inputs(train_end=inputs.panel.local_dates[10].item())
