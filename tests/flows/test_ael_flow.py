from __future__ import annotations

from pathlib import Path

from reflexmem.ael.table import Row
from tests.unit.ael_learning.synthetic import write_wide_csv

METHODS = ["equal_weight", "momentum", "val_selected_rule", "stateless", "tools", "memory", "ael"]


def _strip(rows: list[Row]) -> list[Row]:
    return [{k: v for k, v in r.items() if k != "timing"} for r in rows]


def test_flow_maps_seeds_and_returns_the_rows_of_the_direct_call(
    prefect_harness: None, tmp_path: Path
) -> None:
    from flows.ael import ael_benchmark
    from reflexmem.ael.run import load_inputs, run_benchmark
    from reflexmem.operations.ael import AelParams, run_ael
    from reflexmem.operations.runner import DirectRunner
    from reflexmem.settings import Settings
    from tests.support import migrated

    csv = write_wide_csv(tmp_path / "prices.csv")
    res = migrated(Settings(home=tmp_path / "home"))  # every flow runs against a store
    home = str(tmp_path / "home")
    doc = ael_benchmark(home=home, prices_path=str(csv), seeds=2, methods=METHODS)
    direct = run_benchmark(load_inputs(csv), seeds=[0, 1], methods=METHODS).to_document()
    params = AelParams(prices_path=str(csv), seeds=(0, 1), methods=tuple(METHODS))
    sequenced = run_ael(DirectRunner(res), params)
    assert _strip(sequenced["rows"]) == _strip(direct["rows"])
    assert _strip(doc["rows"]) == _strip(direct["rows"])
    assert {r["seed"] for r in doc["rows"] if r["method"] == "ael"} == {0, 1, "ensemble"}
    assert {r["seed"] for r in doc["rows"] if r["method"] == "momentum"} == {None}
    assert doc["selections"] == direct["selections"]
    assert doc["verdict"] == direct["verdict"]
    assert all(c["identical"] for c in doc["frozen_checks"])
