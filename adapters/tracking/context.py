"""What every MLflow run of the platform carries: where it came from, and how to find it.

A reviewer looking at one run must see which command or flow made it (`mlflow.source.*`,
`mlflow.user`, the git commit of the code when it runs from a checkout), and, for a run
made inside a Prefect flow, the flow run, flow and deployment (read from Prefect's
runtime context; a run made directly carries none). Experiments are created with their
artifact location under the configured root and a description (`mlflow.note.content`,
what the UI shows). Set-valued tags (roles, symbols, dates) are written as
`,a,b,c,` so that `LIKE '%,a,%'` in the UI's search box matches one member exactly.

Prefect is never imported here: its runtime context is read only when the process
already runs Prefect (a flow or its tasks), so a plain CLI call stays fast.
"""

from __future__ import annotations

import functools
import getpass
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import quote

TAG_LIMIT = 5000
"""Longest tag value written (MLflow allows 8000); longer sets are cut with `...`."""

REPO_ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def git_commit() -> str | None:
    """The commit of the code's checkout, or None (an installed wheel, no git)."""
    if not (REPO_ROOT / ".git").exists():
        return None
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if len(commit) == 40 else None


def _user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return os.environ.get("USER", "unknown")


def prefect_tags() -> dict[str, str]:
    """The flow run this process works for (ID, name, flow, deployment), if any."""
    if "prefect" not in sys.modules:
        return {}
    from prefect.runtime import deployment, flow_run

    run_id = flow_run.id
    if not run_id:
        return {}
    tags = {
        "reflexmem.prefect.flow_run_id": str(run_id),
        "reflexmem.prefect.flow_run_name": str(flow_run.name or ""),
        "reflexmem.prefect.flow_name": str(flow_run.flow_name or ""),
        "reflexmem.prefect.deployment": str(deployment.name or ""),
        "reflexmem.prefect.deployment_id": str(deployment.id or ""),
    }
    url = flow_run.ui_url
    if url:
        tags["reflexmem.prefect.flow_run_url"] = str(url)
    return {k: v for k, v in tags.items() if v}


def source_tags() -> dict[str, str]:
    """`mlflow.source.*`, `mlflow.user` and the Prefect context of the current process."""
    prefect = prefect_tags()
    flow = prefect.get("reflexmem.prefect.flow_name")
    name = f"prefect flow {flow}" if flow else " ".join([Path(sys.argv[0]).name, *sys.argv[1:3]])
    tags = {
        "mlflow.source.type": "JOB" if flow else "LOCAL",
        "mlflow.source.name": name.strip() or "python",
        "mlflow.user": _user(),
        **prefect,
    }
    commit = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    return tags


def member_tag(values: Iterable[object]) -> str:
    """`,a,b,c,` (sorted, distinct), cut at the tag limit with a trailing `...`."""
    items = sorted({str(v) for v in values if v is not None})
    if not items:
        return ""
    text = "," + ",".join(items) + ","
    if len(text) <= TAG_LIMIT:
        return text
    cut = text[: TAG_LIMIT - 4]
    return cut[: cut.rfind(",") + 1] + "..."


KIND_TAG, MODEL_TRAINING = "mlflow.experimentKind", "custom_model_development"
"""Every experiment of this project is one of runs and registered models ("Model
training"), tagged so. MLflow 3.17's UI still opens in its GenAI view (traces, judges)
unless told otherwise, a choice it keeps per browser; so every link this project prints
carries `VIEW`, which opens the runs, metrics and run search a reviewer looks for."""
VIEW = "?workflowType=machine_learning"


def ensure_experiment(client: Any, name: str, description: str, root: Path | None) -> str:
    """The experiment `name` (created under `root/name`), its description and kind set."""
    found = client.get_experiment_by_name(name)
    if found is None:
        location = None if root is None else (root / name).resolve().as_uri()
        experiment_id = str(
            client.create_experiment(
                name, artifact_location=location, tags={KIND_TAG: MODEL_TRAINING}
            )
        )
        tags: dict[str, str] = {KIND_TAG: MODEL_TRAINING}
    else:
        experiment_id = str(found.experiment_id)
        tags = dict(found.tags)
    if tags.get("mlflow.note.content") != description:
        client.set_experiment_tag(experiment_id, "mlflow.note.content", description)
    if tags.get(KIND_TAG) != MODEL_TRAINING:
        client.set_experiment_tag(experiment_id, KIND_TAG, MODEL_TRAINING)
    return experiment_id


def run_url(base: str, run_id: str, experiment_id: str | None = None) -> str:
    """The MLflow UI page of a run (the direct route when the experiment is unknown)."""
    root = base.rstrip("/")
    if experiment_id:
        return f"{root}/#/experiments/{experiment_id}/runs/{run_id}{VIEW}"
    return f"{root}/#/runs/{run_id}{VIEW}"


def model_version_url(base: str, model: str, version: str) -> str:
    """The MLflow UI page of a registered model version."""
    return f"{base.rstrip('/')}/#/models/{quote(model, safe='')}/versions/{version}{VIEW}"


def existing_client(tracking_uri: str) -> Any | None:
    """An MLflow client for a store that exists; None for a SQLite file not yet created.

    Read-only tools (lineage, report, notebooks) must never create an empty store as a
    side effect of looking.
    """
    if tracking_uri.startswith("sqlite:///"):
        path = Path(tracking_uri.removeprefix("sqlite:///"))
        if not path.exists():
            return None
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import mlflow

    return mlflow.MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
