"""Secrets planted in every secret setting never reach MLflow, artifacts, the ledger or logs.

Every setting marked secret gets a distinct planted value: the ledger URL carries a
user-info password and `password=` / `sslpassword=` query parameters (PostgreSQL with
trust authentication accepts them all), the benchmark server URL a password, the model
base URL an `api_key=` parameter, the model API key itself, plus `PGPASSWORD` and
`MLFLOW_TRACKING_TOKEN` in the environment. The real cycle then runs through
`build_resources` on a scratch PostgreSQL ledger: ingestion, admission, maturation and
evaluation tracked in a real MLflow store, reflection by the model adapter against a
local server that answers 400 and echoes what it was sent (headers and URL). Afterwards
the MLflow database file, the artifact folder, every ledger table and the captured logs
are scanned byte for byte for every planted value.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import sqlalchemy as sa

from adapters.resources import build_resources
from apps.bench.support import scratch_url
from reflexmem.ledger.models import Base
from reflexmem.operations import intake
from reflexmem.operations.cycle import CycleParams, run_cycle
from reflexmem.operations.runner import DirectRunner
from reflexmem.prices.dfull_bars import write_dfull_bars
from reflexmem.prices.panel import load_dfull
from reflexmem.redact import MASK, known_secrets, redact, secret_values
from reflexmem.settings import Settings
from reflexmem.synth import generate, write_stream
from tests.support import AS_OF

SECRETS = {
    "db_userinfo": "pw-userinfo-7Qx2",
    "db_query": "pw-query-9Zk4",
    "db_ssl": "pw-sslquery-3Lm8",
    "bench": "pw-bench-2Vn6",
    "base_url": "KEYQ-base-8Hj1",
    "api_key": "sk-test-api-5Rt3",
    "pgpassword": "pw-env-6Wd9",
    "mlflow_token": "tok-mlflow-4Yc7",
}


@pytest.fixture
def echo_model() -> Iterator[str]:
    """A model endpoint that refuses with 400 and echoes the request line and headers."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            echo = json.dumps({"error": {"path": self.path, "headers": dict(self.headers)}})
            data = echo.encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    httpd.shutdown()
    httpd.server_close()


def _planted_db_url(url: str) -> str:
    parsed = sa.make_url(url).set(password=SECRETS["db_userinfo"])
    parsed = parsed.update_query_dict(
        {"password": SECRETS["db_query"], "sslpassword": SECRETS["db_ssl"]}
    )
    return parsed.render_as_string(hide_password=False)


def _ledger_text(engine: sa.Engine) -> str:
    parts: list[str] = []
    with engine.connect() as conn:
        for table in Base.metadata.sorted_tables:
            parts.extend(repr(tuple(row)) for row in conn.execute(sa.select(table)))
    return "\n".join(parts)


def _files_bytes(root: Path) -> bytes:
    return b"\n".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def _leaks(haystack: bytes) -> list[str]:
    return [name for name, value in SECRETS.items() if value.encode() in haystack]


@pytest.mark.postgres
def test_no_planted_secret_leaves_the_process_unmasked(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    echo_model: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    base = Settings()
    with scratch_url(base, "postgres", tmp_path) as url:
        bench = sa.make_url(base.bench_postgres_url).set(password=SECRETS["bench"])
        env = {
            "REFLEX_HOME": str(tmp_path / "home"),
            "REFLEX_DATABASE_URL": _planted_db_url(url),
            "REFLEX_MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.sqlite'}",
            "REFLEX_ARTIFACT_ROOT": str(tmp_path / "artifacts"),
            "REFLEX_BENCH_POSTGRES_URL": bench.render_as_string(hide_password=False),
            "REFLEX_LLM_REFLECTOR": "openai",
            "REFLEX_LLM_BASE_URL": f"{echo_model}?api_key={SECRETS['base_url']}",
            "REFLEX_LLM_MODEL": "echo",
            "REFLEX_LLM_API_KEY": SECRETS["api_key"],
            "REFLEX_LLM_MAX_RETRIES": "0",
            "PGPASSWORD": SECRETS["pgpassword"],
            "MLFLOW_TRACKING_TOKEN": SECRETS["mlflow_token"],
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        settings = Settings()
        # Every planted setting is one the settings mark secret.
        marked = set(secret_values(settings))
        for name in ("db_userinfo", "db_query", "db_ssl", "bench", "base_url", "api_key"):
            assert SECRETS[name] in marked, name

        res = build_resources(settings)
        assert set(SECRETS.values()) <= known_secrets()
        try:
            intake.ingest(res, [write_dfull_bars(tmp_path / "bars")], "bars")
            stream = generate(load_dfull(), 300)
            drop = tmp_path / "drop"
            write_stream(stream, drop)
            report = run_cycle(DirectRunner(res), CycleParams(as_of=AS_OF, drop=drop))
            failed = sum(r.failed for r in report.reflection)
            assert failed > 0, "the model adapter was never called"
            # Library and application log lines that carry secrets in their arguments.
            logging.getLogger("reflexmem.test").error(
                "ledger %s, model %s", settings.resolved_database_url, settings.llm.base_url
            )
            try:
                raise RuntimeError(f"connect failed: {settings.resolved_database_url}")
            except RuntimeError:
                logging.getLogger("reflexmem.test").exception("with a traceback")
            ledger = _ledger_text(res.engine)
        finally:
            res.engine.dispose()

    mlflow_db = (tmp_path / "mlflow.sqlite").read_bytes()
    artifacts = _files_bytes(tmp_path / "artifacts")
    logs = "\n".join(caplog.messages + [r.exc_text or "" for r in caplog.records])
    assert b"reflexmem.ledger" in mlflow_db, "the evaluation batch was not tracked"
    assert artifacts, "no artifact was written"
    leaks = {
        "mlflow store": _leaks(mlflow_db),
        "artifacts": _leaks(artifacts),
        "ledger": _leaks(ledger.encode()),
        "logs": _leaks(logs.encode()) + _leaks(caplog.text.encode()),
    }
    assert leaks == {"mlflow store": [], "artifacts": [], "ledger": [], "logs": []}
    assert MASK in ledger, "the model's echo never reached the ledger"
    assert MASK in logs


def test_every_credential_form_is_masked() -> None:
    cases = {
        "postgresql://u:hunter22@h:5432/db": "postgresql://u:***@h:5432/db",
        "postgresql://u@h/db?sslmode=require&password=hunter22": (
            "postgresql://u@h/db?sslmode=require&password=***"
        ),
        "https://mlflow.example/api?token=abc123&x=1": "https://mlflow.example/api?token=***&x=1",
        "host=h user=u password=hunter22 dbname=d": "host=h user=u password=*** dbname=d",
        "Authorization: Bearer sk-abc.def": "Authorization: *** ***",
    }
    for raw, masked in cases.items():
        assert redact(raw) == masked, raw
    assert redact({"api_key": "x", "rows": [{"url": "a://b:c@d"}]}) == {
        "api_key": MASK,
        "rows": [{"url": "a://b:***@d"}],
    }


def test_prefect_table_artifacts_are_redacted(prefect_harness: None) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client

    from flows.artifacts import table_artifact

    @flow(name="redaction-artifact")
    def publish() -> None:
        table_artifact(
            key="redaction-check",
            table=[{"ledger": "postgresql://u:pw-artifact-1Aa@h/db?password=pw-artifact-2Bb"}],
            description="ledger postgresql://u:pw-artifact-3Cc@h/db",
        )

    publish()

    async def read() -> list[str]:
        from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

        async with get_client() as client:
            found = await client.read_artifacts(
                artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["redaction-check"]))
            )
        return [json.dumps([a.data, a.description], default=str) for a in found]

    import asyncio

    stored = asyncio.run(read())
    assert stored
    for text in stored:
        assert "pw-artifact" not in text
        assert MASK in text
