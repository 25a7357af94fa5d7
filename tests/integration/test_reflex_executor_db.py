"""The executor's cross-process guarantees on the ledger: idempotency keys and token buckets."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, Unpack

import pytest
import sqlalchemy as sa
from pydantic import BaseModel

from adapters.db import make_engine
from reflexmem.executor import (
    CallCode,
    Caller,
    Effect,
    RetryableToolError,
    TokenBucket,
    Tool,
    ToolExecutor,
)
from reflexmem.executor_ledger import LedgerIdempotency, LedgerRateStore

ROOT = Path(__file__).resolve().parents[2]
WRITER = Caller("writer", frozenset({"note"}), frozenset({Effect.WRITE_MEMORY}))


class NoteArgs(BaseModel):
    text: str


class Effects:
    def __init__(self, fail_times: int = 0) -> None:
        self.done: list[str] = []
        self.fail_times = fail_times
        self.calls = 0

    def __call__(self, args: NoteArgs) -> dict[str, object]:
        self.calls += 1
        if self.calls <= self.fail_times:
            raise RetryableToolError("transient")
        self.done.append(args.text)
        return {"n": len(self.done), "text": args.text}


class NoteOptions(TypedDict, total=False):
    """The optional fields of the `note` tool."""

    verify: Callable[[NoteArgs, object], bool] | None
    max_attempts: int
    verifier_version: str | None
    rate: TokenBucket | None
    cost: float


def executor(engine: sa.Engine, effects: Effects, **kwargs: Unpack[NoteOptions]) -> ToolExecutor:
    tool = Tool("note", frozenset({Effect.WRITE_MEMORY}), NoteArgs, effects, **kwargs)
    return ToolExecutor.with_tools([tool], idempotency=LedgerIdempotency(engine, wait_s=0.3))


def test_a_key_replays_across_executors_and_refuses_other_arguments(engine: sa.Engine) -> None:
    effects = Effects()
    first = executor(engine, effects).call(WRITER, "note", {"text": "x"}, idempotency_key="k")
    other = executor(engine, effects)  # another owner, as another process would be
    again = other.call(WRITER, "note", {"text": "x"}, idempotency_key="k")
    clash = other.call(WRITER, "note", {"text": "y"}, idempotency_key="k")
    assert first.ok
    assert not first.replayed
    assert again.ok
    assert again.replayed
    assert again.value == first.value == {"n": 1, "text": "x"}
    assert clash.code == CallCode.IDEMPOTENCY_CONFLICT
    assert effects.done == ["x"]
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT status, attempts FROM tool_calls")).one()
    assert tuple(row) == ("done", 1)


def test_a_failed_call_releases_its_key_to_the_next_process(engine: sa.Engine) -> None:
    effects = Effects(fail_times=1)
    failed = executor(engine, effects).call(WRITER, "note", {"text": "x"}, idempotency_key="k")
    retried = executor(engine, effects).call(WRITER, "note", {"text": "x"}, idempotency_key="k")
    assert failed.code == CallCode.RETRIES_EXHAUSTED
    assert retried.code == CallCode.EXECUTED
    assert effects.done == ["x"]


def test_a_claim_left_pending_by_a_dead_process_is_never_rerun(engine: sa.Engine) -> None:
    dead = LedgerIdempotency(engine, owner="crashed-worker")
    assert dead.claim("note", "k", {"text": "x"}, "writer").status == "claimed"
    effects = Effects()
    result = executor(engine, effects).call(WRITER, "note", {"text": "x"}, idempotency_key="k")
    assert (result.outcome, result.code) == ("refused", CallCode.IN_PROGRESS)
    assert "crashed-worker" in result.reason
    assert effects.done == []


def test_a_failed_post_condition_stays_pinned_in_the_ledger(engine: sa.Engine) -> None:
    effects = Effects()
    ex = executor(engine, effects, verify=lambda _a, _r: False, verifier_version="never-v1")
    first = ex.call(WRITER, "note", {"text": "x"}, idempotency_key="k")
    again = executor(engine, effects).call(WRITER, "note", {"text": "x"}, idempotency_key="k")
    assert first.code == again.code == CallCode.POSTCONDITION_FAILED
    assert again.replayed
    assert effects.done == ["x"]


def _spawn(url: str, effects: Path, key: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.reflex_worker", url, str(effects), key],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_two_processes_with_one_key_cause_one_effect_and_see_one_result(
    engine: sa.Engine, tmp_path: Path
) -> None:
    url = engine.url.render_as_string(hide_password=False)
    effects = tmp_path / "effects.txt"
    workers = [_spawn(url, effects, "file:d-1") for _ in range(2)]
    for proc in workers:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = []
    for proc in workers:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        outputs.append(json.loads(out.strip().splitlines()[-1]))
    assert [o["outcome"] for o in outputs] == ["ok", "ok"]
    assert sorted(o["replayed"] for o in outputs) == [False, True]
    assert outputs[0]["value"] == outputs[1]["value"]
    lines = effects.read_text().splitlines()
    assert len(lines) == 1
    filer = next(o for o in outputs if not o["replayed"])
    assert lines[0] == f"{filer['pid']} d-1"
    assert outputs[0]["value"]["filed_by"] == filer["pid"]


def test_two_connections_share_one_token_bucket(engine: sa.Engine) -> None:
    url = engine.url.render_as_string(hide_password=False)
    other_engine = make_engine(url)
    try:
        a, b = LedgerRateStore(engine), LedgerRateStore(other_engine)
        bucket = TokenBucket(capacity=3, refill_per_s=0.5)
        t = 1_000.0
        assert [
            a.take("note", bucket, t),
            a.take("note", bucket, t),
            b.take("note", bucket, t),
        ] == [
            0.0,
            0.0,
            0.0,
        ]
        assert b.take("note", bucket, t) == pytest.approx(2.0)  # one token takes 2 s at 0.5/s
        assert a.take("note", bucket, t + 1.0) == pytest.approx(1.0)
        assert a.take("note", bucket, t + 2.0) == 0.0
        assert b.tokens("note") == pytest.approx(0.0)
        assert b.take("note", bucket, t - 50.0) > 0  # a clock behind refills nothing
        assert a.take("note", bucket, t + 100.0) == 0.0  # refill is capped at capacity
        assert a.tokens("note") == pytest.approx(2.0)
    finally:
        other_engine.dispose()


def test_the_executor_refuses_when_the_shared_bucket_is_empty(engine: sa.Engine) -> None:
    url = engine.url.render_as_string(hide_password=False)
    other_engine = make_engine(url)
    try:
        wall = [5_000.0]
        tool_kwargs: NoteOptions = {"rate": TokenBucket(capacity=1, refill_per_s=0.01)}
        first, second = Effects(), Effects()
        ex1 = ToolExecutor.with_tools(
            [Tool("note", frozenset({Effect.WRITE_MEMORY}), NoteArgs, first, **tool_kwargs)],
            rates=LedgerRateStore(engine),
            wall=lambda: wall[0],
        )
        ex2 = ToolExecutor.with_tools(
            [Tool("note", frozenset({Effect.WRITE_MEMORY}), NoteArgs, second, **tool_kwargs)],
            rates=LedgerRateStore(other_engine),
            wall=lambda: wall[0],
        )
        assert ex1.call(WRITER, "note", {"text": "a"}).ok
        refused = ex2.call(WRITER, "note", {"text": "b"})
        assert refused.code == CallCode.RATE_LIMITED
        assert second.done == []
    finally:
        other_engine.dispose()
