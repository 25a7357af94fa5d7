"""Prefect artifacts of the flows, redacted: no credential reaches the Prefect API.

Every artifact a flow publishes (markdown or table) goes through
`reflexmem.redact.redact` (text, keys, cells and description), the same function the
MLflow writers and the log filter use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from prefect.artifacts import create_markdown_artifact, create_table_artifact

from reflexmem.redact import redact


def table_artifact(
    *, key: str, table: Sequence[Mapping[str, Any]], description: str | None = None
) -> Any:
    """`create_table_artifact` with every cell and the description redacted."""
    rows = [{str(k): redact(v) for k, v in row.items()} for row in table]
    return create_table_artifact(
        key=key, table=rows, description=None if description is None else redact(description)
    )


def markdown_artifact(*, key: str, markdown: str, description: str | None = None) -> Any:
    """`create_markdown_artifact` with the text and the description redacted."""
    return create_markdown_artifact(
        key=key,
        markdown=str(redact(markdown)),
        description=None if description is None else redact(description),
    )
