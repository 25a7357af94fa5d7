"""The agent HTTP API, served by uvicorn on loopback and called with a real HTTP client."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from pydantic import SecretStr

from apps.service.api import LoopbackServer, create_app
from reflexmem.operations import reflection
from reflexmem.operations.resources import Resources
from reflexmem.settings import MemoryMode, Settings
from tests.support import make_resources, mature_and_evaluate, scalar, seed_ledger

TOKEN = "test-token-8f1c"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

DECISION: dict[str, Any] = {
    "decision_id": "api-d1",
    "agent_id": "agent-7",
    "role_id": "momentum",
    "account": "acct-1",
    "market": "US",
    "symbol": "SPY",
    "direction": "long",
    "decided_at": "2025-01-02T15:30:00Z",
    "rationale": "breakout above the range",
    "evidence": [{"kind": "close", "as_of": "2025-01-02", "value": 470.1}],
}
PREVIEW = {
    "preview_id": "api-p1",
    "decision_id": "api-d1",
    "account": "acct-1",
    "market": "US",
    "symbol": "SPY",
    "direction": "long",
    "created_at": "2025-01-02T15:31:00Z",
}
EXECUTION = {
    "execution_id": "api-x1",
    "decision_id": "api-d1",
    "preview_id": "api-p1",
    "account": "acct-1",
    "market": "US",
    "symbol": "SPY",
    "direction": "long",
    "origin": "manual_agent",
    "origin_verified": True,
    "automation_markers": [],
    "executed_at": "2025-01-02T15:32:00Z",
}
FILL = {
    "fill_id": "api-f1",
    "execution_id": "api-x1",
    "quantity": 10,
    "price": 470.25,
    "fee": 0.5,
    "filled_at": "2025-01-02T15:32:01Z",
}


def _settings(mode: MemoryMode) -> Settings:
    return Settings(api_token=SecretStr(TOKEN), role_memory_mode=mode)


@contextmanager
def served(res: Resources, mode: MemoryMode) -> Iterator[httpx.Client]:
    """The app on a free loopback port, and an authorised client for it."""
    with (
        LoopbackServer(create_app(res, _settings(mode))) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=60) as client,
    ):
        yield client


@pytest.fixture
def api(engine: sa.Engine) -> Iterator[httpx.Client]:
    with served(make_resources(engine), MemoryMode.SHADOW) as client:
        yield client


def _detail(response: httpx.Response) -> dict[str, Any]:
    detail = response.json()["detail"]
    assert isinstance(detail, list)
    assert len(detail) == 1
    return dict(detail[0])


def test_requests_without_the_bearer_token_get_401(api: httpx.Client, engine: sa.Engine) -> None:
    url = str(api.base_url)
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        with httpx.Client(base_url=url, headers=headers) as anonymous:
            for method, path in (
                ("GET", "/v1/health"),
                ("POST", "/v1/decisions"),
                ("POST", "/v1/recall"),  # 401 before routing: not even a 404 leaks
                ("GET", "/docs"),
            ):
                response = anonymous.request(method, path, json=DECISION)
                assert response.status_code == 401, (headers, path)
                assert response.headers["www-authenticate"] == "Bearer"
    assert api.get("/v1/health").status_code == 200
    assert scalar(engine, "SELECT COUNT(*) FROM trading_decisions") == 0


def test_bad_input_is_422_naming_the_field_and_writes_nothing(
    api: httpx.Client, engine: sa.Engine
) -> None:
    bad = api.post("/v1/decisions", json={**DECISION, "direction": "up"})
    assert bad.status_code == 422
    detail = _detail(bad)
    assert detail["loc"] == ["body", "direction"]
    assert "'up' is not one of long, short" in detail["msg"]
    # In a list, the location names the row (0-based) and the field.
    rows = [DECISION, {**DECISION, "decision_id": "api-d2", "decided_at": "yesterday"}]
    bad = api.post("/v1/decisions", json=rows)
    assert bad.status_code == 422
    assert _detail(bad)["loc"] == ["body", 1, "decided_at"]
    missing = {k: v for k, v in DECISION.items() if k != "symbol"}
    assert _detail(api.post("/v1/decisions", json=missing))["loc"] == ["body", "symbol"]
    assert _detail(api.post("/v1/decisions", json={**DECISION, "colour": "red"}))["loc"] == [
        "body",
        "colour",
    ]
    assert _detail(api.post("/v1/fills", json={**FILL, "price": -1}))["loc"] == ["body", "price"]
    # A reference to a decision the ledger does not hold names the referring field.
    orphan = api.post("/v1/previews", json=PREVIEW)
    assert orphan.status_code == 422
    assert _detail(orphan)["loc"] == ["body", "decision_id"]
    assert scalar(engine, "SELECT COUNT(*) FROM trading_decisions") == 0
    assert scalar(engine, "SELECT COUNT(*) FROM trade_previews") == 0
    # A refusal after staging leaves nothing staged: the next records land alone.
    for _ in range(3):
        assert api.post("/v1/decisions", json=DECISION).status_code == 200
        assert api.post("/v1/previews", json=PREVIEW).status_code == 200
    assert scalar(engine, "SELECT COUNT(*) FROM trading_decisions") == 1
    assert scalar(engine, "SELECT COUNT(*) FROM trade_previews") == 1
    # A body that is not an object or a list of objects: FastAPI's own 422.
    assert api.post("/v1/decisions", json="a decision").status_code == 422
    no_decision = api.post("/v1/previews/api-p1/consume", json={})
    assert no_decision.status_code == 422
    assert no_decision.json()["detail"][0]["loc"] == ["body", "decision_id"]


def test_records_land_in_the_ledger_and_a_preview_is_consumed_once(
    api: httpx.Client, engine: sa.Engine
) -> None:
    assert api.post("/v1/decisions", json=DECISION).json() == {
        "kind": "decisions",
        "rows": 1,
        "added": 1,
        "unchanged": 0,
    }
    # Recording the same row again changes nothing; a different value under its key is 422.
    assert api.post("/v1/decisions", json=[DECISION]).json()["unchanged"] == 1
    changed = api.post("/v1/decisions", json={**DECISION, "symbol": "QQQ"})
    assert changed.status_code == 422
    assert _detail(changed)["loc"] == ["body", "symbol"]
    consumed_on_arrival = api.post(
        "/v1/previews", json={**PREVIEW, "consumed_at": "2025-01-02T15:31:30Z"}
    )
    assert _detail(consumed_on_arrival)["loc"] == ["body", "consumed_at"]
    assert api.post("/v1/previews", json=PREVIEW).json()["added"] == 1
    assert api.post("/v1/executions", json=EXECUTION).json()["added"] == 1
    assert api.post("/v1/fills", json=[FILL]).json()["added"] == 1

    first = api.post("/v1/previews/api-p1/consume", json={"decision_id": "api-d1"})
    assert first.status_code == 200
    assert first.json()["consumed"] is True
    second = api.post("/v1/previews/api-p1/consume", json={"decision_id": "api-d1"})
    assert second.status_code == 409
    assert _detail(second)["type"] == "preview_double_consume"
    assert "already consumed" in _detail(second)["msg"]
    missing = api.post("/v1/previews/nope/consume", json={"decision_id": "api-d1"})
    assert missing.status_code == 404
    assert _detail(missing)["loc"] == ["path", "preview_id"]
    unknown = api.post("/v1/previews/api-p1/consume", json={"decision_id": "nobody"})
    assert unknown.status_code == 422
    assert _detail(unknown)["loc"] == ["body", "decision_id"]

    with engine.connect() as conn:
        count, owner = conn.execute(
            sa.text(
                "SELECT consume_count, consumed_by_decision_id FROM trade_previews "
                "WHERE preview_id = 'api-p1'"
            )
        ).one()
        stored = conn.execute(
            sa.text("SELECT quantity, price, fee FROM trade_fills WHERE fill_id = 'api-f1'")
        ).one()
    assert (count, owner) == (1, "api-d1")
    assert tuple(stored) == (10.0, 470.25, 0.5)
    # Every refused consumption is kept in quarantine.
    refused = scalar(
        engine,
        "SELECT COUNT(*) FROM quarantine WHERE subject_kind = 'preview_consumption' "
        "AND detail LIKE 'preview=api-p1:%'",
    )
    assert refused == 2  # the second consumption and the one by an unknown decision
    assert scalar(engine, "SELECT COUNT(*) FROM ingested_files") == 0


def test_recall_does_not_exist_in_shadow_mode(api: httpx.Client) -> None:
    health = api.get("/v1/health").json()
    assert health["mode"] == "shadow"
    assert "recall" not in health["tools"]
    response = api.post("/v1/recall", json={"role": "momentum", "query": "breakout"})
    assert response.status_code == 404
    assert "/v1/recall" not in api.get("/openapi.json").json()["paths"]


def test_the_app_refuses_to_exist_without_a_token(engine: sa.Engine) -> None:
    res = make_resources(engine)
    for token in (None, SecretStr(""), SecretStr("  ")):
        with pytest.raises(ValueError, match="REFLEX_API_TOKEN"):
            create_app(res, Settings(api_token=token))


def test_recall_in_active_mode_returns_the_role_s_cases(engine: sa.Engine, tmp_path: Path) -> None:
    res = make_resources(engine)
    seed_ledger(res, tmp_path, n=600)
    mature_and_evaluate(res)
    reflection.reflect(res, "momentum")
    with served(res, MemoryMode.ACTIVE) as api:
        assert "recall" in api.get("/v1/health").json()["tools"]
        response = api.post(
            "/v1/recall",
            json={
                "role": "momentum",
                "query": "breakout entry",
                "k": 5,
                "decision_id": "about-to-decide",
                "policy": "full_detailed",
            },
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["policy"] == "full_detailed"
        assert 0 < len(body["hits"]) <= 5
        assert {h["role"] for h in body["hits"]} == {"momentum"}
        assert body["terms"] == ["breakout", "entry"]
        logged = scalar(
            engine, "SELECT COUNT(*) FROM recall_log WHERE decision_id = 'about-to-decide'"
        )
        assert logged == 1
        sampled = api.post("/v1/recall", json={"role": "momentum", "query": "breakout"})
        assert sampled.status_code == 200
        unknown = api.post("/v1/recall", json={"role": "astrology", "query": "x"})
        assert unknown.status_code == 422
        assert _detail(unknown)["loc"] == ["body", "role"]
        bad_k = api.post("/v1/recall", json={"role": "momentum", "query": "x", "k": 0})
        assert bad_k.status_code == 422
        assert bad_k.json()["detail"][0]["loc"] == ["body", "k"]


def test_reflexmem_api_refuses_to_start_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from apps.cli import app

    monkeypatch.setenv("REFLEX_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("REFLEX_API_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["api", "--port", "0"])
    assert result.exit_code == 2
    assert "REFLEX_API_TOKEN" in result.output


def test_concurrent_consumptions_over_http_let_exactly_one_through(
    api: httpx.Client, engine: sa.Engine
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    assert api.post("/v1/decisions", json=DECISION).status_code == 200
    assert api.post("/v1/previews", json=PREVIEW).status_code == 200
    url = str(api.base_url)

    def consume(_: int) -> int:
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
            response = client.post("/v1/previews/api-p1/consume", json={"decision_id": "api-d1"})
            return response.status_code

    with ThreadPoolExecutor(8) as pool:
        statuses = sorted(pool.map(consume, range(8)))
    assert statuses == [200] + [409] * 7
    assert scalar(engine, "SELECT consume_count FROM trade_previews") == 1


def test_a_body_over_the_limit_is_413_before_it_is_parsed(engine: sa.Engine) -> None:
    settings = Settings(
        api_token=SecretStr(TOKEN), role_memory_mode=MemoryMode.SHADOW, api_max_body_bytes=4096
    )
    with (
        LoopbackServer(create_app(make_resources(engine), settings)) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=60) as client,
    ):
        big = client.post("/v1/decisions", json={**DECISION, "rationale": "x" * 10_000})
        assert big.status_code == 413
        assert _detail(big)["type"] == "body_too_large"
        # Sent in chunks, with no length declared: refused at the first byte past the limit.
        chunked = client.post(
            "/v1/decisions",
            content=iter([b'{"rationale": "' + b"y" * 3000, b"y" * 3000 + b'"}']),
            headers={"content-type": "application/json"},
        )
        assert chunked.status_code == 413
        # Authentication still comes first: no token, no word about the body.
        with httpx.Client(base_url=url) as anonymous:
            assert anonymous.post("/v1/decisions", content=b"z" * 9000).status_code == 401
        assert scalar(engine, "SELECT COUNT(*) FROM trading_decisions") == 0
        fits = client.post("/v1/decisions", json=DECISION)
        assert fits.status_code == 200, fits.text
    assert scalar(engine, "SELECT COUNT(*) FROM trading_decisions") == 1


@pytest.mark.parametrize("wait_s", [10.0, 0.001])
def test_concurrent_writers_get_200_or_503_never_500_and_nothing_acknowledged_is_lost(
    engine: sa.Engine, wait_s: float
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    settings = Settings(
        api_token=SecretStr(TOKEN), role_memory_mode=MemoryMode.SHADOW, api_write_wait_s=wait_s
    )

    def write(i: int) -> tuple[int, str | None]:
        batch = [
            {**DECISION, "decision_id": f"api-c{i}-{j}", "rationale": f"writer {i}"}
            for j in range(20)
        ]
        with httpx.Client(base_url=url, headers=AUTH, timeout=60) as client:
            response = client.post("/v1/decisions", json=batch)
            return response.status_code, response.headers.get("retry-after")

    with (
        LoopbackServer(create_app(make_resources(engine), settings)) as url,
        ThreadPoolExecutor(12) as pool,
    ):
        answers = list(pool.map(write, range(24)))
    statuses = [s for s, _ in answers]
    assert set(statuses) <= {200, 503}, statuses
    assert all(retry == "1" for s, retry in answers if s == 503)
    assert scalar(engine, "SELECT COUNT(*) FROM trading_decisions") == 20 * statuses.count(200)
    if wait_s >= 1.0:
        assert statuses == [200] * 24  # a patient gate lets every writer through


def test_a_token_past_its_rate_gets_429_with_retry_after_and_nothing_is_written(
    engine: sa.Engine,
) -> None:
    settings = _settings(MemoryMode.SHADOW).model_copy(
        update={"api_rate_per_s": 1.0, "api_rate_burst": 3}
    )
    with (
        LoopbackServer(create_app(make_resources(engine), settings)) as url,
        httpx.Client(base_url=url, headers=AUTH, timeout=60) as client,
    ):
        answers = [client.get("/v1/health").status_code for _ in range(3)]
        assert answers == [200, 200, 200]  # the burst
        limited = client.post("/v1/decisions", json=DECISION)
        assert limited.status_code == 429
        assert int(limited.headers["Retry-After"]) >= 1
        assert _detail(limited)["type"] == "rate_limited"
        assert scalar(engine, "SELECT COUNT(*) FROM trading_decisions") == 0
        time.sleep(1.1)  # one request's worth refilled
        assert client.post("/v1/decisions", json=DECISION).status_code == 200


def test_the_service_works_on_as_many_requests_at_once_as_configured(engine: sa.Engine) -> None:
    """More are queued in arrival order, not handed to dozens of threads (docs/api.md)."""
    settings = Settings(api_token=SecretStr(TOKEN), role_memory_mode=MemoryMode.SHADOW)
    assert settings.api_threads == 4
    for threads in (1, 3):
        configured = settings.model_copy(update={"api_threads": threads})
        with (
            LoopbackServer(create_app(make_resources(engine), configured)) as url,
            httpx.Client(base_url=url, headers=AUTH, timeout=60) as client,
        ):
            assert client.get("/v1/health").json()["threads"] == threads
            again = client.post("/v1/decisions", json=DECISION)  # stored once, then unchanged
            other = client.post(
                "/v1/decisions", json={**DECISION, "decision_id": f"api-t{threads}"}
            )
            assert (again.status_code, other.status_code) == (200, 200)
    assert scalar(engine, "SELECT COUNT(*) FROM trading_decisions") == 3
