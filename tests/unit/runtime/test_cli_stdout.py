"""The command owns stdout: MLflow's run-URL lines are switched off before any command runs."""

from __future__ import annotations

import os

import pytest

import apps.cli


def test_main_switches_off_mlflow_url_printing(monkeypatch: pytest.MonkeyPatch) -> None:
    # setenv first records the variable's state before the test, so teardown restores it.
    monkeypatch.setenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "unset")
    monkeypatch.delenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT")
    seen: list[str | None] = []
    monkeypatch.setattr(
        apps.cli,
        "app",
        lambda: seen.append(os.environ.get("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT")),
    )
    apps.cli.main()
    assert seen == ["true"]
    # A user who wants the lines back can still say so.
    monkeypatch.setenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "false")
    apps.cli.main()
    assert seen == ["true", "false"]
