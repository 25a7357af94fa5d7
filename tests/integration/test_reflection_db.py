from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import reflexmem.ledger.reflection_models  # noqa: F401  (registers tables for TRUNCATE)
from reflexmem.operations.memory import record_episodes
from reflexmem.reflection import (
    BudgetLimits,
    LLMConfig,
    OpenAIReflector,
    Reflection,
    ReflectionInput,
    RuleReflector,
    TokenUsage,
)
from reflexmem.reflection.batch import guarded_executor, reflect_all, reflect_role
from tests.support import make_resources, mature_and_evaluate, registry, scalar, seed_ledger


def rows(engine: sa.Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(sql), params).all())


def as_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


@pytest.fixture
def matured(engine: sa.Engine, tmp_path: Path) -> sa.Engine:
    res = make_resources(engine)
    seed_ledger(res, tmp_path)
    mature_and_evaluate(res)
    return engine


def test_rule_reflection_flags_leakage_and_stores_lessons_per_role(matured: sa.Engine) -> None:
    engine = matured
    # Give some momentum decisions complete, fresh evidence so other classes appear too.
    with engine.begin() as conn:
        ids = [
            r[0]
            for r in conn.execute(
                sa.text(
                    "SELECT d.decision_id, d.decided_at FROM trading_decisions d "
                    "JOIN role_cases rc ON rc.decision_id = d.decision_id "
                    "WHERE rc.role_id = 'momentum' AND rc.state = 'eligible'"
                )
            )
        ]
        for decision_id, decided in conn.execute(
            sa.text(
                "SELECT decision_id, decided_at FROM trading_decisions WHERE decision_id IN :ids"
            ).bindparams(sa.bindparam("ids", expanding=True)),
            {"ids": ids},
        ):
            stamp = decided if isinstance(decided, str) else decided.isoformat()
            evidence = [
                {"kind": "price_history", "as_of": stamp},
                {"kind": "technicals", "as_of": stamp},
            ]
            conn.execute(
                sa.text("UPDATE trading_decisions SET evidence = :e WHERE decision_id = :d"),
                {"e": json.dumps(evidence), "d": decision_id},
            )
    executor, broker = guarded_executor()
    reports = reflect_all(engine, registry(), RuleReflector(), executor=executor)
    assert broker == []
    assert sum(r.reflected for r in reports) == scalar(
        engine, "SELECT COUNT(*) FROM role_cases WHERE state = 'reflected'"
    )
    # Leakage: D-full valuation decisions carry fundamentals as_of 2026-03-15.
    leaked = rows(
        engine,
        "SELECT rc.outcome_class, rc.lesson, rc.reflection FROM role_cases rc "
        "JOIN trading_decisions d ON d.decision_id = rc.decision_id "
        "WHERE rc.role_id = 'valuation' AND rc.state = 'reflected' "
        "AND CAST(d.evidence AS TEXT) LIKE '%2026-03-15%'",
    )
    assert leaked
    for cls, lesson, reflection in leaked:
        assert cls == "missing_data"
        assert "look-ahead" in lesson
        assert any("leakage" in reason for reason in as_json(reflection)["reasons"])
    # Only learnable classes carry a lesson; the others are kept for audit without one.
    by_class = rows(
        engine,
        "SELECT outcome_class, COUNT(*), SUM(CASE WHEN lesson IS NULL THEN 0 ELSE 1 END) "
        "FROM role_cases WHERE state = 'reflected' GROUP BY outcome_class",
    )
    classes = {c: (n, with_lesson) for c, n, with_lesson in by_class}
    assert len(classes) >= 2
    for cls, (n, with_lesson) in classes.items():
        assert with_lesson == (n if cls in ("logic_error", "missing_data") else 0)
    audit_only = rows(
        engine,
        "SELECT reflection FROM role_cases WHERE outcome_class IN ('variance', 'exogenous')",
    )
    assert all(as_json(r[0])["reasons"] for r in audit_only)
    # Reflection writes verdicts only; the episodes stage then records every reflected
    # case as one episode of its role's namespace, its lesson as the episode's text.
    assert scalar(engine, "SELECT COUNT(*) FROM memory_entries") == 0
    res = make_resources(engine)
    for role_id in registry().ids:
        record_episodes(res, role_id)
    episodes = dict(rows(engine, "SELECT namespace, COUNT(*) FROM episodes GROUP BY namespace"))
    reflected = dict(
        rows(
            engine,
            "SELECT 'role:' || role_id, COUNT(*) FROM role_cases WHERE state = 'reflected' "
            "GROUP BY role_id",
        )
    )
    assert episodes == reflected
    unmatched = rows(
        engine,
        "SELECT rc.case_id FROM role_cases rc JOIN episodes e ON e.case_id = rc.case_id "
        "JOIN memory_entries m ON m.entry_id = 'epi:' || e.namespace || ':' || "
        "CAST(e.episode_index AS VARCHAR(16)) "
        "WHERE rc.lesson IS NOT NULL AND m.text <> rc.lesson",
    )
    assert unmatched == []
    # Re-running reflects nothing new (idempotent).
    again = reflect_all(engine, registry(), RuleReflector(), executor=executor)
    assert sum(r.offered for r in again) == 0


class MeteredReflector:
    """Rules dressed as a model layer: one call and 100 tokens per case."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def reflect(self, batch: Sequence[ReflectionInput]) -> list[Reflection]:
        self.seen += [c.case_id for c in batch]
        return [
            replace(r, layer="L3", model_calls=1, usage=TokenUsage(60, 40, 100))
            for r in RuleReflector().reflect(batch)
        ]


def test_budget_defers_excess_and_the_next_batches_pick_it_up(matured: sa.Engine) -> None:
    engine = matured
    total = scalar(
        engine, "SELECT COUNT(*) FROM role_cases WHERE role_id = 'risk' AND state = 'eligible'"
    )
    assert total > 8
    limits = BudgetLimits(
        calls_per_batch=5,
        tokens_per_batch=10_000,
        calls_per_day=8,
        tokens_per_day=10_000,
        tokens_per_call=100,
    )
    reflector = MeteredReflector()
    day1 = date(2026, 1, 5)
    first = reflect_role(engine, registry(), "risk", reflector, budget=limits, day=day1)
    assert (first.reflected, first.deferred) == (5, total - 5)
    deferred = rows(
        engine,
        "SELECT case_id FROM role_cases WHERE role_id = 'risk' AND state = 'pending' "
        "AND pending_reason = 'budget_deferred'",
    )
    assert len(deferred) == total - 5
    assert rows(
        engine, "SELECT calls, tokens FROM reflection_budget_usage WHERE day = :d", d=str(day1)
    ) == [(5, 500)]
    second = reflect_role(engine, registry(), "risk", reflector, budget=limits, day=day1)
    assert (second.reflected, second.deferred) == (3, total - 8)  # day allowance: 8 calls
    # The deferred cases were offered first, and nothing was reflected twice.
    assert set(reflector.seen[5:8]) <= {r[0] for r in deferred}
    assert len(set(reflector.seen)) == len(reflector.seen)
    # A new day brings a fresh allowance; eventually every case is reflected, none dropped.
    day = day1
    while scalar(
        engine,
        "SELECT COUNT(*) FROM role_cases WHERE role_id = 'risk' AND (state = 'eligible' "
        "OR pending_reason = 'budget_deferred')",
    ):
        assert day < day1 + timedelta(days=60)
        day += timedelta(days=1)
        reflect_role(engine, registry(), "risk", reflector, budget=limits, day=day)
    assert len(reflector.seen) == total
    assert (
        scalar(
            engine,
            "SELECT SUM(calls) FROM reflection_budget_usage",
        )
        == total
    )


class FakeModel:
    """A real HTTP server on 127.0.0.1 answering chat completions with a fixed reply."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status, self.body, self.requests = status, body, 0
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                self.rfile.read(length)
                model.requests += 1
                data = json.dumps(model.body).encode()
                self.send_response(model.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeModel:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def failing_model() -> Iterator[FakeModel]:
    with FakeModel(503, {"error": "overloaded"}) as model:
        yield model


def test_adapter_failure_marks_reflection_failed_and_fabricates_nothing(
    matured: sa.Engine, failing_model: FakeModel
) -> None:
    engine = matured
    executor, broker = guarded_executor()
    config = LLMConfig(base_url=failing_model.url, model="m", max_retries=1, backoff_s=0.0)
    with OpenAIReflector(config, executor=executor, sleep=lambda _: None) as reflector:
        report = reflect_role(
            engine,
            registry(),
            "cycle_analysis",
            reflector,
            reflector_name="openai",
            executor=executor,
        )
    assert report.offered > 0
    assert report.failed == report.offered
    assert report.reflected == 0
    assert failing_model.requests == 2 * report.offered
    failed = rows(
        engine,
        "SELECT outcome_class, lesson, reflection FROM role_cases "
        "WHERE role_id = 'cycle_analysis' AND state = 'reflection_failed'",
    )
    assert len(failed) == report.offered
    for cls, lesson, reflection in failed:
        assert cls is None
        assert lesson is None
        data = as_json(reflection)
        assert data["failed"] is True
        assert "HTTP 503" in data["error"]
    assert scalar(engine, "SELECT COUNT(*) FROM memory_entries") == 0
    assert broker == []


def test_a_model_asking_to_trade_cannot_and_the_attempt_is_recorded(matured: sa.Engine) -> None:
    engine = matured
    content = {"action": "place_order", "symbol": "AAPL", "side": "long", "quantity": 10}
    answer = {
        "choices": [
            {
                "message": {
                    "content": json.dumps(content),
                    "tool_calls": [
                        {
                            "function": {
                                "name": "modify_order",
                                "arguments": '{"order_id": "o1", "quantity": 5}',
                            }
                        },
                        {"function": {"name": "cancel_order", "arguments": '{"order_id": "o1"}'}},
                    ],
                }
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    executor, broker = guarded_executor()
    with FakeModel(200, answer) as model:
        config = LLMConfig(base_url=model.url, model="m", max_retries=0, backoff_s=0.0)
        with OpenAIReflector(config, executor=executor, sleep=lambda _: None) as reflector:
            report = reflect_role(
                engine,
                registry(),
                "momentum",
                reflector,
                reflector_name="openai",
                executor=executor,
            )
    assert report.offered > 0
    assert report.failed == report.offered
    assert broker == []  # no order handler ever ran
    audit = rows(
        engine,
        "SELECT tool, caller, outcome, reason, batch_id FROM executor_audit ORDER BY audit_id",
    )
    assert len(audit) == 3 * report.offered
    assert {a[0] for a in audit} == {"place_order", "modify_order", "cancel_order"}
    assert {(a[1], a[2]) for a in audit} == {("reflector", "refused")}
    assert all("allow-list" in a[3] for a in audit)
    assert {a[4] for a in audit} == {report.batch_id}
    states = rows(engine, "SELECT DISTINCT state FROM role_cases WHERE role_id = 'momentum'")
    assert ("reflected",) not in states


class SlowReflector:
    """Records when each batch ran, and takes long enough for batches to collide."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float, int]] = []
        self.lock = threading.Lock()

    def reflect(self, batch: Sequence[ReflectionInput]) -> list[Reflection]:
        start = time.monotonic()
        time.sleep(0.4)
        out = RuleReflector().reflect(batch)
        with self.lock:
            self.spans.append((start, time.monotonic(), len(batch)))
        return out


@pytest.mark.parametrize(
    "engine", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_reflection_of_one_role_never_runs_concurrently_on_postgres(matured: sa.Engine) -> None:
    engine = matured
    assert engine.dialect.name == "postgresql"
    reflector = SlowReflector()
    reports: list[Any] = []
    errors: list[BaseException] = []
    gate = threading.Barrier(4)

    def run() -> None:
        try:
            gate.wait()
            reports.append(reflect_role(engine, registry(), "momentum", reflector))
        except BaseException as exc:  # pragma: no cover - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    eligible_before = sum(r.offered for r in reports)
    spans = sorted(reflector.spans)
    for (_, end, _n), (start, _, _m) in itertools.pairwise(spans):
        assert start >= end, "two momentum batches reflected at the same time"
    # One batch took every case; the ones that waited for the lock found nothing left.
    assert sorted(r.offered for r in reports)[:-1] == [0, 0, 0]
    assert eligible_before == scalar(
        engine, "SELECT COUNT(*) FROM role_cases WHERE role_id = 'momentum' AND state = 'reflected'"
    )
    # Only the batch that found work leaves a batch row; the three that waited and then
    # found nothing left none (a re-run must not add empty batches).
    assert scalar(engine, "SELECT COUNT(*) FROM reflection_batches WHERE role_id = 'momentum'") == 1
