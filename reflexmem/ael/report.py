"""Table 2 per panel (test windows pooled over folds) with the statistics columns.

Columns: the seven Table 2 metrics (seeded methods: mean ± std over seeds), then the
Sharpe standard error (Lo 2002), the 95% bootstrap interval of the Sharpe difference
to `val_selected_rule` and the SPA p-value of "beats val_selected_rule" (seed
ensemble), and a word: `indistinguishable` when the interval covers zero. Kinds are
marked: `[H]` hindsight (knows the test window), `[peer]` online-portfolio peer.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from reflexmem.ael.table import TABLE2_COLUMNS, Row

MARKS = {"hindsight": " [H]", "peer": " [peer]"}


def _fmt(value: float | None, signed: bool = False) -> str:
    if value is None or not np.isfinite(value):
        return "-"
    return f"{value:+.2f}" if signed else f"{value:.2f}"


def pooled_table(
    rows: Iterable[Row], panel: str, cost_bp: float, methods: Sequence[str]
) -> list[list[str]]:
    """Cells of one panel's pooled test table at one cost level."""
    chosen = [
        r
        for r in rows
        if r["panel"] == panel
        and r["fold"] == "pooled"
        and r["split"] == "test"
        and r["cost_bp"] == float(cost_bp)
    ]
    body: list[list[str]] = []
    for method in methods:
        mine = [r for r in chosen if r["method"] == method]
        if not mine:
            continue
        per_seed = [r for r in mine if isinstance(r["seed"], int)]
        stat = next((r for r in mine if r["seed"] in (None, "ensemble")), mine[0])
        label = method + MARKS.get(str(stat["kind"]), "")
        cells = [label]
        for key, _ in TABLE2_COLUMNS:
            signed = key == "return_pct"
            if per_seed:
                values = np.array([float(r[key]) for r in per_seed])
                cells.append(f"{_fmt(float(values.mean()), signed)} ± {_fmt(float(values.std()))}")
            else:
                cells.append(_fmt(float(stat[key]), signed))
        low, high = stat.get("ci_low"), stat.get("ci_high")
        cells.append(_fmt(stat.get("sharpe_se")))
        if low is None or high is None:
            cells += ["-", "-", ""]
        else:
            word = "indistinguishable" if low <= 0 <= high else ("above" if low > 0 else "below")
            cells += [f"[{_fmt(low, True)}, {_fmt(high, True)}]", _fmt(stat.get("spa_p")), word]
        body.append(cells)
    return body


def render_pooled(
    rows: Iterable[Row], panel: str, cost_bp: float, methods: Sequence[str], n_folds: int | str
) -> str:
    """Plain-text Table 2 of one panel with statistics columns."""
    header = [
        "Method",
        *(label for _, label in TABLE2_COLUMNS),
        "SE",
        "CI vs val_sel",
        "SPA p",
        "",
    ]
    body = pooled_table(list(rows), panel, cost_bp, methods)
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def fmt(line: list[str]) -> str:
        first = line[0].ljust(widths[0])
        rest = (c.rjust(w) for c, w in zip(line[1:], widths[1:], strict=True))
        return "  ".join([first, *rest])

    title = f"Table 2 - {panel}, test pooled over {n_folds} fold(s), {cost_bp:g} bp"
    rule = "-" * len(fmt(header))
    return "\n".join([title, rule, fmt(header), rule, *(fmt(line) for line in body), rule])
