import json

import pytest
from typer.testing import CliRunner

from apps.cli import app


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_bench_episodes_prints_one_json_object(
    backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "postgres":
        request.getfixturevalue("pg_url")  # skips locally when the server is unreachable
    result = CliRunner().invoke(
        app,
        ["bench", "episodes", "--episodes", "300", "--batch", "70", "--backend", backend, "--json"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout.strip().splitlines()[-1])
    assert (data["episodes"], data["batch"], data["backend"]) == (300, 70, backend)
    assert data["posterior_equals_loop"] is True
    assert data["policies_evolved"] == 5  # windows 10, 15, 20, 25, 30: every check fires
    assert data["arms_at_end"] == 5 + 5
    assert data["windows_distilled"] == 29  # windows 2..30
    assert data["bulk_rows_s"] > 0
    assert data["in_process_loop_s"] > 0


def test_bench_episodes_refuses_a_bad_batch() -> None:
    result = CliRunner().invoke(app, ["bench", "episodes", "--episodes", "10", "--batch", "0"])
    assert result.exit_code == 2
