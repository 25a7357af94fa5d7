"""The Prefect side of the Prefect <-> MLflow link: flow artifacts as markdown with run links.

A flow's report (plain data) names the MLflow runs its stages opened (`mlflow_run_id`
anywhere in it: the cycle's parent run, evaluation, promotion and reflection batches).
`markdown` renders the flow's counts as a table and every such run as a link to its
MLflow UI page (base URL `REFLEX_MLFLOW_UI_URL`), so a reviewer in the Prefect UI is one
click from the run; the MLflow runs carry the flow run's ID in turn
(`tracking_context.prefect_tags`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from adapters.tracking.context import run_url


def _label(path: str, node: Mapping[str, Any]) -> str:
    for key in ("role_id", "role", "kind", "name"):
        if isinstance(node.get(key), str):
            return f"{path} ({node[key]})" if path else str(node[key])
    return path or "run"


def mlflow_runs(data: Any, path: str = "") -> Iterator[tuple[str, str, str]]:
    """(label, run ID, batch ID) of every MLflow run a report names, in report order."""
    if isinstance(data, Mapping):
        run = data.get("mlflow_run_id") or data.get("mlflow_run")
        if isinstance(run, str) and run:
            batch = data.get("batch_id") or data.get("batch") or data.get("cycle_id") or ""
            yield _label(path, data), run, str(batch)
        for key, value in data.items():
            yield from mlflow_runs(value, f"{path}.{key}" if path else str(key))
    elif isinstance(data, list | tuple):
        for item in data:
            yield from mlflow_runs(item, path)


def _escape(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown(title: str, counts: Mapping[str, Any], report: Any, ui_base: str) -> str:
    """`# title`, a counts table, and a link per MLflow run the report names."""
    lines = [f"# {title}", "", "| count | value |", "|---|---|"]
    lines += [f"| {_escape(k)} | {_escape(v)} |" for k, v in counts.items()] or ["| - | 0 |"]
    runs = list(dict.fromkeys(mlflow_runs(report)))
    lines += ["", "## MLflow runs", ""]
    if not runs:
        lines.append("no MLflow run was opened (nothing to evaluate, promote or reflect)")
    for label, run_id, batch in runs:
        suffix = f" — batch `{batch}`" if batch else ""
        lines.append(f"- {_escape(label)}: [{run_id}]({run_url(ui_base, run_id)}){suffix}")
    return "\n".join(lines) + "\n"
