"""The executor's REFLEX guarantees with the in-process stores (ledger stores: integration)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from reflexmem.executor import (
    CallCode,
    Caller,
    Effect,
    RetryableToolError,
    TokenBucket,
    Tool,
    ToolExecutor,
)


class FileArgs(BaseModel):
    doc_id: str
    folder: str


class Store:
    """A destination the executor can observe: folder -> doc ids actually written."""

    def __init__(self, *, fail_times: int = 0, misfile: bool = False) -> None:
        self.folders: dict[str, list[str]] = {}
        self.calls = 0
        self.fail_times = fail_times
        self.misfile = misfile

    def put(self, args: FileArgs) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.fail_times:
            raise RetryableToolError(f"disk busy #{self.calls}")
        folder = "lost+found" if self.misfile else args.folder
        self.folders.setdefault(folder, []).append(args.doc_id)
        return {"folder": folder, "doc_id": args.doc_id}

    def landed(self, args: FileArgs, _result: object) -> bool:
        """Ground truth: the document is in the folder it was sent to, read from the store."""
        return args.doc_id in self.folders.get(args.folder, [])


def file_tool(store: Store, **kwargs: Any) -> Tool[FileArgs]:
    return Tool(
        "file_doc",
        frozenset({Effect.WRITE_FILES}),
        FileArgs,
        store.put,
        verify=store.landed,
        verifier_version="landed-v1",
        **kwargs,
    )


FILER = Caller(
    "skill:filer@1",
    frozenset({"file_doc"}),
    frozenset({Effect.WRITE_FILES}),
    {"file_doc": {"type": "object", "properties": {"folder": {"enum": ["earnings", "guidance"]}}}},
)


def test_a_verified_call_reports_its_verifier_version_and_latency() -> None:
    store = Store()
    ex = ToolExecutor.with_tools([file_tool(store)])
    result = ex.call(FILER, "file_doc", {"doc_id": "d1", "folder": "earnings"})
    assert result.ok
    assert (result.code, result.verified, result.verifier_version) == (
        CallCode.EXECUTED,
        True,
        "landed-v1",
    )
    assert result.latency_ms >= 0
    assert result.effects == ("write_files",)


def test_arguments_outside_the_identitys_contract_are_refused_before_any_effect() -> None:
    store = Store()
    ex = ToolExecutor.with_tools([file_tool(store)])
    result = ex.call(FILER, "file_doc", {"doc_id": "d1", "folder": "trash"})
    assert (result.outcome, result.code) == ("refused", CallCode.INVALID_ARGUMENTS)
    assert "folder" in result.reason
    assert "skill:filer@1" in result.reason
    assert store.calls == 0
    assert ex.audit[-1].code == "invalid_arguments"


def test_a_failed_post_condition_is_pinned_to_its_key_and_never_run_twice() -> None:
    store = Store(misfile=True)
    ex = ToolExecutor.with_tools([file_tool(store)])
    args = {"doc_id": "d1", "folder": "earnings"}
    first = ex.call(FILER, "file_doc", args, idempotency_key="k")
    again = ex.call(FILER, "file_doc", args, idempotency_key="k")
    assert (first.outcome, first.code, first.verified) == (
        "failed",
        CallCode.POSTCONDITION_FAILED,
        False,
    )
    assert (again.outcome, again.code, again.replayed) == (
        "failed",
        CallCode.POSTCONDITION_FAILED,
        True,
    )
    assert store.calls == 1
    assert store.folders == {"lost+found": ["d1"]}


def test_a_callers_retry_limit_lowers_the_tools_bound_and_backoff_doubles() -> None:
    sleeps: list[float] = []
    store = Store(fail_times=5)
    ex = ToolExecutor.with_tools(
        [file_tool(store, max_attempts=6)], sleep=sleeps.append, backoff_s=0.1
    )
    result = ex.call(FILER, "file_doc", {"doc_id": "d", "folder": "earnings"}, max_attempts=3)
    assert (result.outcome, result.code, result.attempts) == (
        "failed",
        CallCode.RETRIES_EXHAUSTED,
        3,
    )
    assert sleeps == [0.1, 0.2]
    assert store.calls == 3
    assert ex.call(FILER, "file_doc", {"doc_id": "d", "folder": "earnings"}, max_attempts=99).ok
    assert store.calls == 6  # 3 more: two transient failures, then success (tool bound 6)


def test_a_tools_token_bucket_waits_when_short_and_refuses_when_long() -> None:
    wall = [1000.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        wall[0] += seconds

    store = Store()
    tool = file_tool(store, rate=TokenBucket(capacity=2, refill_per_s=2.0))
    ex = ToolExecutor.with_tools([tool], wall=lambda: wall[0], sleep=sleep, max_rate_wait_s=0.6)
    args = {"doc_id": "d", "folder": "earnings"}
    assert [ex.call(FILER, "file_doc", args).ok for _ in range(3)] == [True, True, True]
    assert sleeps == [pytest.approx(0.5)]  # the third call waited for one refill
    slow = ToolExecutor.with_tools(
        [file_tool(Store(), rate=TokenBucket(capacity=1, refill_per_s=0.5))],
        wall=lambda: wall[0],
        sleep=sleep,
        max_rate_wait_s=0.6,
    )
    assert slow.call(FILER, "file_doc", args).ok
    refused = slow.call(FILER, "file_doc", args)
    assert (refused.outcome, refused.code) == ("refused", CallCode.RATE_LIMITED)


def test_a_rate_limited_keyed_call_releases_its_key() -> None:
    wall = [0.0]
    store = Store()
    tool = file_tool(store, rate=TokenBucket(capacity=1, refill_per_s=0.1))
    ex = ToolExecutor.with_tools([tool], wall=lambda: wall[0], max_rate_wait_s=0.0)
    args = {"doc_id": "d", "folder": "earnings"}
    assert ex.call(FILER, "file_doc", args, idempotency_key="a").ok
    assert ex.call(FILER, "file_doc", args, idempotency_key="b").code == CallCode.RATE_LIMITED
    wall[0] = 10.0
    assert ex.call(FILER, "file_doc", args, idempotency_key="b").code == CallCode.EXECUTED


def test_a_reentrant_call_with_a_key_in_flight_is_refused_as_in_progress() -> None:
    ex = ToolExecutor()
    seen: list[str] = []

    def handler(args: FileArgs) -> object:
        inner = ex.call(FILER, "file_doc", args.model_dump(), idempotency_key="k")
        seen.append(inner.code)
        return "outer"

    ex.register(Tool("file_doc", frozenset({Effect.WRITE_FILES}), FileArgs, handler))
    assert ex.call(FILER, "file_doc", {"doc_id": "d", "folder": "earnings"}, idempotency_key="k").ok
    assert seen == [CallCode.IN_PROGRESS]
