"""`reflexmem report`: one self-contained HTML page of a store, for a reviewer.

Every section is read from the ledger (and the benchmark output the demo writes under
`REFLEX_HOME/ael`): admission by reason, maturity, evaluation statistics per role,
outcome classes, lessons -> patterns -> rules, bandit posteriors, the benchmark table
and its equity curves, one decision's whole chain, and the MLflow runs of every batch
with links to their pages (base URL `REFLEX_MLFLOW_UI_URL`). Charts are matplotlib
PNGs embedded as `data:` URIs and the CSS is inline, so the file can be mailed or
archived alone. Aggregates are SQL `GROUP BY`s, so the page costs the same for a
thousand decisions or ten million.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
import sqlalchemy as sa

from adapters.lineage import Links, pick_decision, trace
from adapters.tracking.context import existing_client, run_url
from apps.report import plots
from reflexmem.evaluation.stats import role_statistics
from reflexmem.settings import Settings

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.88em}
td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f3f3f3}img{max-width:100%;display:block;margin:.6em 0}
.note{color:#666;font-size:.9em}
"""


def _frame(conn: sa.Connection, sql: str, **params: Any) -> pl.DataFrame:
    rows = [dict(r._mapping) for r in conn.execute(sa.text(sql), params)]
    return pl.DataFrame(rows, infer_schema_length=None) if rows else pl.DataFrame()


def _cell(value: Any, link: str | None = None) -> str:
    text = html.escape("" if value is None else str(value))
    return f'<a href="{html.escape(link)}">{text}</a>' if link else text


def table(frame: pl.DataFrame, links: dict[str, str] | None = None, empty: str = "none") -> str:
    """An HTML table; `links` maps a column to the column holding each cell's URL."""
    if frame.is_empty():
        return f'<p class="note">{html.escape(empty)}</p>'
    links = links or {}
    shown = [c for c in frame.columns if c not in links.values()]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in shown)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{_cell(row[c], row.get(links[c]) if c in links else None)}</td>" for c in shown
        )
        + "</tr>"
        for row in frame.iter_rows(named=True)
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def _img(uri: str, alt: str) -> str:
    return f'<img src="{uri}" alt="{html.escape(alt)}">'


def _admission(conn: sa.Connection) -> str:
    q = _frame(conn, "SELECT reason_code AS reason, COUNT(*) AS n FROM quarantine "
                     "GROUP BY reason_code ORDER BY n DESC, reason_code")  # fmt: skip
    p = _frame(conn, "SELECT pending_reason AS reason, COUNT(*) AS n FROM role_cases "
                     "WHERE state = 'pending' GROUP BY pending_reason ORDER BY n DESC")  # fmt: skip
    b = _frame(conn, "SELECT COUNT(*) AS batches, SUM(rows_in) AS rows_in, SUM(admitted) AS "
                     "admitted, SUM(pending) AS pending, SUM(quarantined) AS quarantined "
                     "FROM admission_batches")  # fmt: skip
    out = table(b) + "<h3>quarantined by reason</h3>" + table(q, empty="nothing quarantined")
    if not q.is_empty():
        out += _img(plots.bars("quarantine by reason", q["reason"].to_list(),
                               q["n"].to_list(), "rows"), "quarantine by reason")  # fmt: skip
    return out + "<h3>pending by reason</h3>" + table(p, empty="nothing pending")


def _maturity(conn: sa.Connection) -> str:
    m = _frame(conn, "SELECT role_id, state, COUNT(*) AS n FROM role_cases "
                     "GROUP BY role_id, state ORDER BY role_id, state")  # fmt: skip
    if m.is_empty():
        return table(m, empty="no role cases")
    wide = m.pivot(on="state", index="role_id", values="n").fill_null(0).sort("role_id")
    series = {c: wide[c].to_list() for c in wide.columns if c != "role_id"}
    chart = plots.stacked("role cases by state", wide["role_id"].to_list(), series, "cases")
    return table(wide) + _img(chart, "role cases by state")


def _outcomes(conn: sa.Connection) -> str:
    o = _frame(conn, "SELECT role_id, outcome_class, COUNT(*) AS n FROM role_cases "
                     "WHERE outcome_class IS NOT NULL GROUP BY role_id, outcome_class "
                     "ORDER BY role_id, outcome_class")  # fmt: skip
    if o.is_empty():
        return table(o, empty="nothing reflected yet")
    wide = o.pivot(on="outcome_class", index="role_id", values="n").fill_null(0).sort("role_id")
    series = {c: wide[c].to_list() for c in wide.columns if c != "role_id"}
    chart = plots.stacked("outcome classes per role", wide["role_id"].to_list(), series, "cases")
    return table(wide) + _img(chart, "outcome classes per role")


def _memory(conn: sa.Connection) -> str:
    line = _frame(
        conn,
        """
SELECT rc.role_id, COUNT(*) AS lessons,
  (SELECT COUNT(*) FROM memory_entries e WHERE e.namespace = 'role:' || rc.role_id
     AND e.tier = 'semantic' AND e.state = 'active') AS patterns,
  (SELECT COUNT(*) FROM memory_entries e WHERE e.namespace = 'role:' || rc.role_id
     AND e.tier = 'semantic' AND e.state = 'superseded') AS older_versions,
  (SELECT COUNT(*) FROM memory_entries e WHERE e.namespace = 'role:' || rc.role_id
     AND e.tier = 'procedural' AND e.state = 'candidate') AS rule_candidates,
  (SELECT COUNT(*) FROM memory_entries e WHERE e.namespace = 'role:' || rc.role_id
     AND e.tier = 'procedural' AND e.state = 'active') AS rules
FROM role_cases rc WHERE rc.lesson IS NOT NULL GROUP BY rc.role_id ORDER BY rc.role_id""",
    )
    top = _frame(conn, "SELECT namespace, tier, state, support, text FROM memory_entries "
                       "WHERE tier IN ('semantic', 'procedural') AND state IN ('active', "
                       "'candidate') ORDER BY CASE tier WHEN 'procedural' THEN 0 ELSE 1 END, "
                       "support DESC, entry_id LIMIT 12")  # fmt: skip
    return table(line, empty="no lessons yet") + "<h3>live rules and patterns</h3>" + table(top)


def _bandits(conn: sa.Connection, ael: Path) -> str:
    b = _frame(conn, "SELECT agent_id, policy, alpha, beta, pulls FROM bandit_states "
                     "ORDER BY agent_id, position")  # fmt: skip
    out = table(b, empty="no bandit arms")
    if not b.is_empty():
        labels = [f"{a} / {p}" for a, p in zip(b["agent_id"], b["policy"], strict=True)]
        out += _img(plots.posteriors(labels, b["alpha"].to_list(), b["beta"].to_list()),
                    "bandit posteriors")  # fmt: skip
    over_time = ael / "plots" / "posterior_means.png"
    if over_time.exists():
        out += "<h3>benchmark bandit posteriors over time</h3>"
        out += _img(plots.png_uri(over_time), "benchmark posterior means over time")
    return out


def _benchmark(ael: Path) -> str:
    doc = ael / "ael.json"
    if not doc.exists():
        return f'<p class="note">no benchmark output under {html.escape(str(ael))}</p>'
    rows = pl.DataFrame(json.loads(doc.read_text())["rows"], infer_schema_length=None)
    test = (
        rows.filter(pl.col("split") == "test")
        .group_by("method", "cost_bp")
        .agg(
            pl.col("sharpe").mean().round(2),
            pl.col("return_pct").mean().round(2),
            pl.col("max_dd_pct").mean().round(2),
            pl.len().alias("runs"),
        )
        .filter(pl.col("cost_bp") == 0.0)
        .sort("sharpe", descending=True)
    )
    out = "<h3>test split, 0 bp (mean over seeds)</h3>" + table(test)
    for png in sorted((ael / "plots").glob("equity_*.png")):
        out += _img(plots.png_uri(png), f"equity curves {png.stem}")
    return out


def _chain(conn: sa.Connection, links: Links) -> str:
    decision = pick_decision(conn)
    found = trace(conn, decision, links) if decision else None
    if found is None:
        return '<p class="note">no evaluated decision yet</p>'
    rows = [
        {"step": s.kind, "id": s.id, "mlflow_run": s.mlflow_run_id or "",
         "detail": str(s.detail.get("text") or s.detail.get("state") or "")[:160],
         "url": s.url}
        for s in found.steps
    ]  # fmt: skip
    head = f"<p>decision <b>{html.escape(found.decision_id)}</b> "
    head += "(see <code>reflexmem lineage</code> for every field)</p>"
    return head + table(pl.DataFrame(rows), links={"mlflow_run": "url"})


def _runs(conn: sa.Connection, base: str, client: Any | None) -> str:
    experiments: dict[str, str] = {}
    if client is not None:
        experiments = {e.name: e.experiment_id for e in client.search_experiments()}
    ev = _frame(conn, "SELECT batch_id, kind, profile, profile_version, n_runs, mlflow_run_id, "
                      "created_at FROM evaluation_batches ORDER BY created_at")  # fmt: skip
    rf = _frame(conn, "SELECT batch_id, role_id, reflector, reflected, lessons, mlflow_run_id, "
                      "finished_at FROM reflection_batches ORDER BY finished_at")  # fmt: skip

    def linked(frame: pl.DataFrame, experiment: str) -> pl.DataFrame:
        if frame.is_empty():
            return frame
        exp = experiments.get(experiment)
        urls = [run_url(base, r, exp) if r else None for r in frame["mlflow_run_id"].to_list()]
        return frame.with_columns(pl.Series("url", urls, dtype=pl.String))

    out = f'<p class="note">MLflow UI: <a href="{html.escape(base)}">{html.escape(base)}</a>'
    out += " (experiments " + ", ".join(html.escape(n) for n in sorted(experiments)) + ")</p>"
    out += "<h3>evaluation, replay and promotion batches</h3>"
    out += table(linked(ev, "evaluation-runs"), links={"mlflow_run_id": "url"})
    out += "<h3>reflection batches</h3>"
    return out + table(linked(rf, "reflection-runs"), links={"mlflow_run_id": "url"})


def _stats(conn: sa.Connection, profiles: Sequence[str]) -> str:
    parts = [role_statistics(conn, p).with_columns(pl.lit(p).alias("profile")) for p in profiles]
    frame = pl.concat(parts) if parts else pl.DataFrame()
    if not frame.is_empty():
        frame = frame.with_columns(pl.col(c).round(4) for c in ("mean", "min", "max"))
    return table(frame, empty="no primary evaluation runs")


def render(settings: Settings, engine: sa.Engine) -> str:
    """The whole page as one HTML string."""
    client = existing_client(settings.resolved_tracking_uri)
    links = Links(client, settings.mlflow_ui_url)
    ael = settings.home / "ael"
    with engine.connect() as conn:
        profiles = [r[0] for r in conn.execute(sa.text(
            "SELECT DISTINCT profile FROM evaluation_runs ORDER BY profile"))]  # fmt: skip
        sections = [
            ("Admission", _admission(conn)),
            ("Maturity", _maturity(conn)),
            ("Evaluation statistics per role (primary runs)", _stats(conn, profiles)),
            ("Outcome classes", _outcomes(conn)),
            ("Lessons -> patterns -> rules", _memory(conn)),
            ("Bandit posteriors", _bandits(conn, ael)),
            ("Benchmark", _benchmark(ael)),
            ("One decision, end to end", _chain(conn, links)),
            ("MLflow runs", _runs(conn, settings.mlflow_ui_url, client)),
        ]
    stamp = datetime.now(UTC).isoformat(timespec="seconds")
    where = html.escape(engine.url.render_as_string(hide_password=True))
    body = "".join(f"<h2>{html.escape(t)}</h2>{s}" for t, s in sections)
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>Reflex Memory report</title><style>{CSS}</style></head><body>"
        f'<h1>Reflex Memory report</h1><p class="note">ledger {where}, generated {stamp}</p>'
        f"{body}</body></html>"
    )


def write_report(settings: Settings, engine: sa.Engine, out: Path) -> Path:
    """Render the page and write it to `out` (parent folders created)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(settings, engine), encoding="utf-8")
    return out
