"""Every MLflow write passes `reflexmem.redact.redact`: the client and the fluent calls.

`redacting_client(uri)` is an `MlflowClient` whose writing methods (run, experiment,
registered model and model version tags; params; text, dict and text-file artifacts)
mask credentials before anything reaches the store. The trackers (`tracking_eval`,
`tracking_skills`, `tracking_structures`) build their client with it; the fluent calls of
`tracking_ael` pass their values through `safe`. A text artifact file that contains a
credential is uploaded as a redacted copy; binary artifacts (Parquet tables, plots) are
uploaded as they are: they hold ledger data, never settings.
"""

from __future__ import annotations

import tempfile
import warnings
from pathlib import Path
from typing import Any

from adapters.tracking.store_init import initialised
from reflexmem.redact import redact

TEXT_SUFFIXES = {".txt", ".json", ".yaml", ".yml", ".md", ".csv", ".log", ".html"}


def safe(value: Any) -> Any:
    """`redact` under the name the fluent call sites use."""
    return redact(value)


def _entities(items: Any) -> list[Any]:
    from mlflow.entities import Param, RunTag

    out: list[Any] = []
    for item in items or ():
        if isinstance(item, Param):
            out.append(Param(item.key, redact(item.value)))
        elif isinstance(item, RunTag):
            out.append(RunTag(item.key, redact(item.value)))
        else:
            out.append(item)
    return out


def _text_copy(local_path: str, tmp: str) -> str:
    path = Path(local_path)
    if path.suffix.lower() not in TEXT_SUFFIXES or not path.is_file():
        return local_path
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return local_path
    clean = redact(text)
    if clean == text:
        return local_path
    copy = Path(tmp) / path.name
    copy.write_text(clean, encoding="utf-8")
    return str(copy)


def redacting_client(tracking_uri: str, registry_uri: str | None = None) -> Any:
    """An `MlflowClient` that redacts everything it writes."""
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import mlflow

    class RedactingClient(mlflow.MlflowClient):
        """MlflowClient with credentials masked on every write."""

        def create_run(self, experiment_id: str, *args: Any, **kw: Any) -> Any:
            if kw.get("tags"):
                kw["tags"] = redact(dict(kw["tags"]))
            if kw.get("run_name"):
                kw["run_name"] = redact(kw["run_name"])
            return super().create_run(experiment_id, *args, **kw)

        def log_param(self, run_id: str, key: str, value: Any, *args: Any, **kw: Any) -> Any:
            return super().log_param(run_id, key, redact(str(value)), *args, **kw)

        def set_tag(self, run_id: str, key: str, value: Any, *args: Any, **kw: Any) -> Any:
            return super().set_tag(run_id, key, redact(str(value)), *args, **kw)

        def log_batch(self, run_id: str, *args: Any, **kw: Any) -> Any:
            names = ("metrics", "params", "tags")
            values = dict(zip(names, args, strict=False))
            values.update(kw)
            for name in ("params", "tags"):
                if name in values:
                    values[name] = _entities(values[name])
            return super().log_batch(run_id, **values)

        def log_text(self, run_id: str, text: str, artifact_file: str) -> Any:
            return super().log_text(run_id, redact(text), artifact_file)

        def log_dict(self, run_id: str, dictionary: Any, artifact_file: str) -> Any:
            return super().log_dict(run_id, redact(dictionary), artifact_file)

        def log_artifact(self, run_id: str, local_path: str, *args: Any, **kw: Any) -> Any:
            with tempfile.TemporaryDirectory(prefix="reflex-redact-") as tmp:
                return super().log_artifact(run_id, _text_copy(local_path, tmp), *args, **kw)

        def set_experiment_tag(self, experiment_id: str, key: str, value: Any) -> Any:
            return super().set_experiment_tag(experiment_id, key, redact(str(value)))

        def create_registered_model(self, name: str, *args: Any, **kw: Any) -> Any:
            if kw.get("tags"):
                kw["tags"] = redact(dict(kw["tags"]))
            if kw.get("description"):
                kw["description"] = redact(kw["description"])
            return super().create_registered_model(name, *args, **kw)

        def create_model_version(self, name: str, *args: Any, **kw: Any) -> Any:
            if kw.get("tags"):
                kw["tags"] = redact(dict(kw["tags"]))
            if kw.get("description"):
                kw["description"] = redact(kw["description"])
            return super().create_model_version(name, *args, **kw)

        def set_registered_model_tag(self, name: str, key: str, value: Any) -> Any:
            return super().set_registered_model_tag(name, key, redact(str(value)))

        def set_model_version_tag(self, name: str, *args: Any, **kw: Any) -> Any:
            if "value" in kw:
                kw["value"] = redact(str(kw["value"]))
            elif len(args) >= 3:
                args = (*args[:2], redact(str(args[2])), *args[3:])
            return super().set_model_version_tag(name, *args, **kw)

    return initialised(
        lambda: RedactingClient(tracking_uri=tracking_uri, registry_uri=registry_uri),
        tracking_uri,
    )
