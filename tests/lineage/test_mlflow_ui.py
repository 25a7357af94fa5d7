"""The MLflow UI, in headless Chromium against a server on loopback: find a decision's batches.

The reviewer's path: from a decision (its role, symbol and day), type the searchable
tags into the runs search box of the `evaluation-runs` and `reflection-runs`
experiments and see exactly the batches that hold the decision; open the registered
models page and see every evaluation profile version.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

from adapters.lineage import pick_decision
from adapters.resources import build_resources
from adapters.tracking.context import existing_client
from reflexmem.operations import evaluation
from reflexmem.operations.cycle import CycleReport
from reflexmem.settings import Settings
from tests.browser import chromium, mlflow_server

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

WAIT_S = 60.0


def _wait_text(
    driver: WebDriver, wanted: list[str], absent: Sequence[str] = (), line: str | None = None
) -> str:
    """Wait until the page shows every `wanted` text, no `absent` one, and `line` as a line."""
    from selenium.webdriver.common.by import By

    deadline = time.monotonic() + WAIT_S
    while True:
        text = str(driver.find_element(By.TAG_NAME, "body").text)
        shown = all(w in text for w in wanted) and not any(a in text for a in absent)
        if shown and (line is None or line in text.splitlines()):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"page never showed {wanted} without {list(absent)}:\n{text}")
        time.sleep(0.5)


def _search(driver: WebDriver, base: str, experiment_id: str, query: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(f"{base}/#/experiments/{experiment_id}/runs")
    box = WebDriverWait(driver, WAIT_S).until(
        ec.element_to_be_clickable((By.CSS_SELECTOR, "input[data-testid='search-box']"))
    )
    box.clear()
    box.send_keys(query + Keys.ENTER)


def test_the_ui_finds_the_batches_of_a_decision_by_its_tags(
    lineage_store: tuple[Settings, CycleReport], tmp_path: Path
) -> None:
    started = time.monotonic()
    home = tmp_path / "home"
    shutil.copytree(lineage_store[0].home, home)
    settings = Settings(home=home)
    res = build_resources(settings)
    with res.engine.connect() as conn:
        decision = pick_decision(conn)
        d = conn.execute(
            sa.text("SELECT role_id, symbol, decided_at FROM trading_decisions "
                    "WHERE decision_id = :d"), {"d": decision}
        ).one()  # fmt: skip
        day = str(d.decided_at)[:10]
        batches = conn.execute(
            sa.text("SELECT b.mlflow_run_id FROM evaluation_run_lineage l "
                    "JOIN evaluation_runs r ON r.run_id = l.run_id "
                    "JOIN evaluation_batches b ON b.batch_id = l.batch_id "
                    "WHERE r.decision_id = :d UNION SELECT b.mlflow_run_id "
                    "FROM evaluation_promotions p JOIN evaluation_batches b "
                    "ON b.batch_id = p.batch_id WHERE p.decision_id = :d"),
            {"d": decision},
        ).scalars().all()  # fmt: skip
        reflection = conn.execute(
            sa.text("SELECT b.mlflow_run_id FROM reflection_batch_cases c "
                    "JOIN reflection_batches b ON b.batch_id = c.batch_id "
                    "JOIN role_cases rc ON rc.case_id = c.case_id WHERE rc.decision_id = :d"),
            {"d": decision},
        ).scalar_one()  # fmt: skip
        other_reflections = (
            conn.execute(
                sa.text("SELECT mlflow_run_id FROM reflection_batches WHERE mlflow_run_id <> :r"),
                {"r": reflection},
            )
            .scalars()
            .all()
        )
        others = conn.execute(
            sa.text("SELECT r.decision_id FROM evaluation_runs r JOIN trading_decisions t "
                    "ON t.decision_id = r.decision_id WHERE r.is_primary AND t.symbol <> :s "
                    "ORDER BY t.decided_at DESC LIMIT 20"), {"s": d.symbol}
        ).scalars().all()  # fmt: skip
    # A later replay of other decisions (another symbol): a batch the search must not find.
    replay = evaluation.replay(res, version=2, decisions=others)
    res.engine.dispose()
    client = existing_client(settings.resolved_tracking_uri)
    assert client is not None
    ids = [*batches, reflection, replay.mlflow_run_id, *other_reflections]
    names = {r: client.get_run(r).info.run_name for r in ids}
    eval_exp = client.get_experiment_by_name("evaluation-runs").experiment_id
    refl_exp = client.get_experiment_by_name("reflection-runs").experiment_id
    tags = (f"tags.`reflexmem.symbols` LIKE '%,{d.symbol},%' AND "
            f"tags.`reflexmem.decided_dates` LIKE '%,{day},%'")  # fmt: skip
    other_roles = [names[r] for r in other_reflections]
    assert other_roles  # three other roles' batches exist, and the search must hide them
    with mlflow_server(settings.resolved_tracking_uri) as base, chromium() as driver:
        _search(driver, base, eval_exp, tags)
        _wait_text(
            driver,
            [names[b] for b in batches],
            absent=[names[replay.mlflow_run_id]],
            line=f"{len(batches)} matching runs",
        )
        _search(driver, base, refl_exp, f"{tags} AND tags.`reflexmem.roles` LIKE '%,{d.role_id},%'")
        _wait_text(driver, [names[reflection]], absent=other_roles, line="1 matching run")
        driver.get(f"{base}/#/models")
        _wait_text(driver, ["reflexmem-profile.spy_daily", "reflexmem-role-skill.equity_research"])
        driver.get(f"{base}/#/models/reflexmem-profile.spy_daily")
        _wait_text(driver, ["Version 1", "Version 2", "profile-v1", "profile-v2", "default"])
    assert time.monotonic() - started < 240


def test_every_experiment_opens_in_the_model_training_view(
    lineage_store: tuple[Settings, CycleReport],
) -> None:
    from adapters.tracking.context import KIND_TAG, MODEL_TRAINING

    client = existing_client(lineage_store[0].resolved_tracking_uri)
    assert client is not None
    experiments = [e for e in client.search_experiments() if e.name != "Default"]
    assert {"learning-cycles", "skill-versions"} <= {e.name for e in experiments}
    for experiment in experiments:  # MLflow 3 opens an untagged one in its GenAI view
        assert experiment.tags.get(KIND_TAG) == MODEL_TRAINING, experiment.name
