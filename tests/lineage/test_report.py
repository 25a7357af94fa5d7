"""`reflexmem report` renders in headless Chromium: not blank, every image loaded, links."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import sqlalchemy as sa

from adapters.db import make_engine
from adapters.tracking.context import VIEW
from reflexmem.settings import Settings
from tests.browser import chromium, screenshot_spread

IMAGES_JS = """
return Array.from(document.images).map(i => ({alt: i.alt, complete: i.complete,
  width: i.naturalWidth, height: i.naturalHeight, src: i.src.slice(0, 22)}));
"""


def test_the_report_is_one_page_whose_images_all_load(store_env: Settings, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = subprocess.run(
        [str(Path(sys.executable).with_name("reflexmem")), "report", "--out", str(out)],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    assert 'src="http' not in page  # self-contained: no image is fetched from anywhere
    engine = make_engine(store_env.resolved_database_url)
    with engine.connect() as conn:
        run_ids = (
            conn.execute(
                sa.text("SELECT mlflow_run_id FROM evaluation_batches ORDER BY created_at")
            )
            .scalars()
            .all()
        )
    engine.dispose()
    with chromium() as driver:
        driver.get(out.as_uri())
        images = driver.execute_script(IMAGES_JS)
        links = driver.execute_script(
            "return Array.from(document.querySelectorAll('a')).map(a => a.href);"
        )
        headings = driver.execute_script(
            "return Array.from(document.querySelectorAll('h2')).map(h => h.textContent);"
        )
        driver.set_window_size(1400, 2400)
        colours, spread = screenshot_spread(driver.get_screenshot_as_png())
    # Every chart and equity curve decoded to a real bitmap from a data: URI.
    assert len(images) >= 7, json.dumps(images)
    assert all(i["complete"] and i["width"] > 100 and i["height"] > 50 for i in images), images
    assert all(i["src"].startswith("data:image/png;base64") for i in images)
    alts = " ".join(i["alt"] for i in images)
    for wanted in ("quarantine by reason", "outcome classes", "bandit posteriors", "equity curves"):
        assert wanted in alts
    assert colours > 50
    assert spread > 10.0
    for title in ("Admission", "Maturity", "Outcome classes", "Lessons -> patterns -> rules",
                  "Bandit posteriors", "Benchmark", "MLflow runs"):  # fmt: skip
        assert title in headings
    # The batch runs link to their MLflow pages.
    for run_id in run_ids:
        assert any(h.endswith(f"/runs/{run_id}{VIEW}") for h in links), run_id
