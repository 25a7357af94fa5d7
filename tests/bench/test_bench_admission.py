import json

import pytest
from typer.testing import CliRunner

from apps.cli import app

KEYS = {"rows", "backend", "ingest_admit_s", "bare_load_s", "ratio", "peak_rss_mb"}


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_bench_admission_prints_one_json_object(
    backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        request.getfixturevalue("pg_url")  # skips locally when the server is unreachable
    result = CliRunner().invoke(
        app, ["bench", "admission", "--rows", "2000", "--backend", backend, "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert data.keys() >= KEYS
    assert data["rows"] == 2000
    assert data["backend"] == backend
    assert data["admitted"] + data["pending"] + data["quarantined"] == 2000
    assert data["ratio"] == pytest.approx(data["ingest_admit_s"] / data["bare_load_s"], rel=0.01)
