"""A separate OS process making one keyed tool call through the ledger-backed executor.

Run as `python -m tests.integration.reflex_worker URL EFFECTS_FILE KEY`: it prints
`ready`, waits for a line on stdin (so two workers start their calls together), then
makes the call and prints the result as one JSON line. The tool's effect is a line
appended to EFFECTS_FILE, which the test counts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from pydantic import BaseModel

from adapters.db import make_engine
from reflexmem.executor import Caller, Effect, Tool, ToolExecutor
from reflexmem.executor_ledger import LedgerIdempotency


class Args(BaseModel):
    doc_id: str


def main() -> None:
    url, effects, key = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    engine = make_engine(url)

    def handler(args: Args) -> dict[str, object]:
        with effects.open("a") as out:
            out.write(f"{os.getpid()} {args.doc_id}\n")
        time.sleep(1.0)  # long enough that the other worker finds the key pending
        return {"filed_by": os.getpid(), "doc_id": args.doc_id}

    tool = Tool("file_doc", frozenset({Effect.WRITE_FILES}), Args, handler)
    executor = ToolExecutor.with_tools([tool], idempotency=LedgerIdempotency(engine, wait_s=20))
    caller = Caller("worker", frozenset({"file_doc"}), frozenset({Effect.WRITE_FILES}))
    print("ready", flush=True)
    sys.stdin.readline()
    result = executor.call(caller, "file_doc", {"doc_id": "d-1"}, idempotency_key=key)
    print(
        json.dumps(
            {
                "pid": os.getpid(),
                "outcome": result.outcome,
                "code": str(result.code),
                "replayed": result.replayed,
                "value": result.value,
            }
        ),
        flush=True,
    )
    engine.dispose()


if __name__ == "__main__":
    main()
