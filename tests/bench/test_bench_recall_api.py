import json

import pytest
from typer.testing import CliRunner

from apps.cli import app


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_bench_recall_via_api_prints_one_json_object(
    backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        request.getfixturevalue("pg_url")  # skips locally when the server is unreachable
    result = CliRunner().invoke(
        app,
        [
            *("bench", "recall", "--via", "api", "--cases", "2000", "--queries", "30"),
            *("--backend", backend, "--json"),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert (data["via"], data["backend"], data["cases"], data["queries"]) == (
        "api",
        backend,
        2000,
        30,
    )
    assert data["errors"] == 0
    assert 0 < data["p50_ms"] <= data["p99_ms"]
    assert 0 < data["direct"]["p50_ms"] <= data["direct"]["p99_ms"]
    # Both sides ran the same payloads through the same tool: the same hits.
    assert data["mean_hits"] == data["direct"]["mean_hits"]


def test_bench_recall_refuses_an_unknown_via() -> None:
    result = CliRunner().invoke(app, ["bench", "recall", "--via", "carrier-pigeon"])
    assert result.exit_code == 2
