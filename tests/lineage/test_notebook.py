"""The lineage notebook, run by nbclient on a demo store: the chain it shows is the ledger's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jupytext
import pytest
import sqlalchemy as sa
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from adapters.db import make_engine
from reflexmem.settings import Settings

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "lineage_review.py"


def _execute(workdir: Path) -> list[dict[str, Any]]:
    nb = jupytext.read(NOTEBOOK)
    NotebookClient(
        nb, timeout=240, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    ).execute()
    cells: list[dict[str, Any]] = nb.cells  # nbformat cells: dicts with attribute access
    return cells


def _text(cell: dict[str, Any]) -> str:
    out = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            out.append(o["text"])
        elif "data" in o and "text/plain" in o["data"]:
            out.append(o["data"]["text/plain"])
    return "".join(out)


def test_the_notebook_follows_one_trade_end_to_end(store_env: Settings, tmp_path: Path) -> None:
    cells = _execute(tmp_path)  # run from another folder: the settings still find the store
    text = "\n".join(_text(c) for c in cells if c["cell_type"] == "code")
    line = next(x for x in text.splitlines() if x.startswith("LINEAGE_SUMMARY "))
    summary = json.loads(line.removeprefix("LINEAGE_SUMMARY "))
    d = summary["decision_id"]
    engine = make_engine(store_env.resolved_database_url)
    with engine.connect() as conn:
        runs = conn.execute(
            sa.text("SELECT run_id, mlflow_run_id FROM evaluation_runs WHERE decision_id = :d "
                    "ORDER BY created_at, run_id"), {"d": d}
        ).all()  # fmt: skip
        case = conn.execute(
            sa.text("SELECT case_id, lesson FROM role_cases WHERE decision_id = :d"), {"d": d}
        ).one()
        promo = (
            conn.execute(
                sa.text("SELECT batch_id FROM evaluation_promotions WHERE decision_id = :d"),
                {"d": d},
            )
            .scalars()
            .all()
        )
        refl = (
            conn.execute(
                sa.text("SELECT batch_id FROM reflection_batch_cases WHERE case_id = :c"),
                {"c": case.case_id},
            )
            .scalars()
            .all()
        )
        rules = (
            conn.execute(sa.text("SELECT entry_id FROM memory_entries WHERE tier = 'procedural'"))
            .scalars()
            .all()
        )
    engine.dispose()
    # The whole chain, from the trade to the rule its lesson fed.
    assert summary["kinds"][:10] == [
        "decision", "preview", "execution", "position", "case", "evaluation", "promotion",
        "reflection", "lesson", "pattern",
    ]  # fmt: skip
    assert summary["rules"]
    assert set(summary["rules"]) <= set(rules)
    # The IDs the notebook printed are the ledger's.
    assert summary["evaluation_runs"] == [r.run_id for r in runs]
    assert summary["evaluation_mlflow_runs"] == [r.mlflow_run_id for r in runs]
    assert summary["promotion_batches"] == list(promo)
    assert summary["reflection_batches"] == list(refl)
    # The lesson read back from the reflection run's MLflow artifact is the ledger's lesson.
    assert case.lesson
    assert summary["lesson"] == case.lesson
    mlflow = summary["mlflow"]
    assert mlflow["evaluation"]["run"] == runs[0].mlflow_run_id
    assert mlflow["reflection"]["batch_id"] == refl[0]
    assert mlflow["evaluation"]["parent"] == mlflow["reflection"]["parent"]  # one cycle run
    assert mlflow["evaluation"]["dataset"].startswith("decisions-")
    # Every section ran: quarantine by reason, bandit and equity plots shown as images.
    assert "automated_origin" in text
    assert "equity plots: ['equity_dfull_0bp.png'" in text
    images = [o for c in cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})]
    assert len(images) >= 4


def test_the_notebook_refuses_a_missing_ledger_instead_of_creating_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "nothing-here"
    monkeypatch.setenv("REFLEX_HOME", str(home))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    with pytest.raises(CellExecutionError, match=r"no ledger at .*run `make demo`"):
        _execute(tmp_path)
    assert not (home / "ledger.sqlite").exists()
    assert not home.exists()
