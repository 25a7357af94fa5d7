"""How settings enter a flow: one function every flow calls first.

A flow's parameters are plain data a deployment pins when it is created (the ledger and
tracking URIs, the home folder as absolute paths: `Settings.pinned()`); everything else
comes from the environment of the process that runs it. Every flow takes the same three
parameters and builds its `Settings` here, so a deployment passes the same pinned
parameters to every flow and a failure hook finds the ledger the run was given.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapters.resources import protect
from reflexmem.settings import Settings


def flow_settings(
    database_url: str | None, tracking_uri: str | None, home: str | None = None
) -> Settings:
    """Settings from the environment, with the flow's pinned ledger, tracking store and home.

    `home` (absolute when a deployment pinned it) places everything else a run writes:
    MLflow artifacts of new experiments, the default drop folder.
    """
    overrides: dict[str, Any] = {}
    if home:
        overrides["home"] = Path(home)
    if database_url:
        overrides["database_url"] = database_url
    if tracking_uri:
        overrides["mlflow_tracking_uri"] = tracking_uri
    settings = Settings(**overrides)
    protect(settings)
    return settings
