"""The pure parts of lineage tracking: set tags, digests, searchable tags, flow markdown."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from adapters.tracking.context import TAG_LIMIT, VIEW, member_tag, model_version_url, run_url
from adapters.tracking.sets import digest, set_tags
from flows.markdown import markdown, mlflow_runs


def test_member_tags_match_one_member_exactly_and_stay_under_the_limit() -> None:
    assert member_tag(["GS", "AAPL", "GS", None]) == ",AAPL,GS,"
    assert member_tag([]) == ""
    tag = member_tag(f"S{i:05d}" for i in range(5000))
    assert len(tag) <= TAG_LIMIT
    assert tag.endswith(",...")
    assert ",S00000," in tag
    # `LIKE '%,GS,%'` must not match GSK: the commas delimit members.
    assert ",GS," not in member_tag(["GSK", "AGS"])


def test_the_digest_depends_on_the_set_only() -> None:
    a = digest(pl.Series(["d2", "d1", "d3", "d1"]))
    assert a == digest(pl.Series(["d3", "d1", "d2"]))
    assert a != digest(pl.Series(["d1", "d2"]))
    assert len(a) == 32


def test_set_tags_name_roles_symbols_days_and_the_time_range() -> None:
    frame = pl.DataFrame(
        {
            "decision_id": ["d1", "d2", "d3"],
            "role_id": ["risk", "momentum", "risk"],
            "symbol": ["GS", "AAPL", "GS"],
            "decided_at": [
                datetime(2025, 1, 3, 15, tzinfo=UTC),
                datetime(2025, 1, 2, 14, tzinfo=UTC),
                datetime(2025, 1, 3, 16, tzinfo=UTC),
            ],
        }
    )
    tags = set_tags(frame)
    assert tags["reflexmem.roles"] == ",momentum,risk,"
    assert tags["reflexmem.symbols"] == ",AAPL,GS,"
    assert tags["reflexmem.decided_dates"] == ",2025-01-02,2025-01-03,"
    assert tags["reflexmem.first_decided_at"].startswith("2025-01-02T14:00")
    assert tags["reflexmem.last_decided_at"].startswith("2025-01-03T16:00")
    assert tags["reflexmem.n_decisions"] == "3"


def test_urls_of_runs_and_model_versions() -> None:
    assert run_url("http://h:5000/", "abc", "3") == f"http://h:5000/#/experiments/3/runs/abc{VIEW}"
    assert run_url("http://h:5000", "abc") == f"http://h:5000/#/runs/abc{VIEW}"
    assert model_version_url("http://h", "reflexmem-profile.spy_daily", "2") == (
        f"http://h/#/models/reflexmem-profile.spy_daily/versions/2{VIEW}"
    )


def test_flow_markdown_links_every_run_a_report_names() -> None:
    report = {
        "cycle": {"cycle_id": "cyc-1", "name": "maturation", "mlflow_run_id": "r0"},
        "evaluation": {"batch_id": "eval-1", "kind": "evaluate", "mlflow_run_id": "r1"},
        "promotion": {"batch_id": "prom-1", "mlflow_run_id": None},
        "reflection": [{"role": "risk", "batch": "refl-1", "mlflow_run": "r2"}],
    }
    assert [(r, b) for _, r, b in mlflow_runs(report)] == [
        ("r0", "cyc-1"), ("r1", "eval-1"), ("r2", "refl-1"),
    ]  # fmt: skip
    text = markdown("maturation", {"evaluated": 3, "odd|key": 1}, report, "http://m:5000")
    assert "| evaluated | 3 |" in text
    assert "| odd\\|key | 1 |" in text
    for run in ("r0", "r1", "r2"):
        assert f"[{run}](http://m:5000/#/runs/{run}{VIEW})" in text
    assert "no MLflow run was opened" in markdown("x", {}, {}, "http://m")
