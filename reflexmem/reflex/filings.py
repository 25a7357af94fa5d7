"""The filing-classification task of Experiment A: its tool, its verifier, its inputs.

A valuation role files each incoming filing as `earnings_report`, `guidance_update` or
`analyst_note` in a local evidence folder. The tool writes `<root>/<kind>/<doc_id>.txt`;
its verifier reads the file back and checks the folder and the SHA-256 of the content,
so "filed" is judged by what is on disk, not by what the tool said.

The labelled filings are generated from fixed templates over a fixed ticker list, so
every run sees the same inputs: `corpus(purpose)` gives disjoint sets for replay (past
inputs), shadow comparison (new inputs) and the sticky rollout. None of them is in any
skill's examples or source experiences.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from reflexmem.executor import Effect, Tool

TASK_FAMILY = "classify_filing"
ENVIRONMENT = "filings-v1"
KINDS = ("earnings_report", "guidance_update", "analyst_note")
VERIFIER_VERSION = "filing-on-disk-v1"
TICKERS = (
    "AAPL", "MSFT", "NVDA", "AMZN", "GOOG", "META", "JPM", "GS", "JNJ", "PFE",
    "XOM", "CVX", "CAT", "DE", "NEE", "DUK", "KO", "PEP", "WMT", "COST",
    "HD", "LOW", "UNH", "CVS", "BA", "LMT", "INTC", "AMD", "ORCL", "CRM",
    "V", "MA", "DIS", "NFLX", "T", "VZ", "MRK", "ABBV", "NKE", "SBUX",
)  # fmt: skip


class FilingArgs(BaseModel):
    """Arguments of `file_filing`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    doc_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    kind: str = Field(min_length=1)
    content: str


def filing_tool(root: Path, *, cost: float = 0.0) -> Tool[FilingArgs]:
    """`file_filing` writing under `root`, verified by reading the file back."""

    def handler(args: FilingArgs) -> dict[str, Any]:
        folder = root / args.kind
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{args.doc_id}.txt"
        path.write_text(args.content, encoding="utf-8")
        digest = hashlib.sha256(args.content.encode()).hexdigest()
        return {"path": str(path), "kind": args.kind, "sha256": digest}

    def landed(args: FilingArgs, result: object) -> bool:
        path = root / args.kind / f"{args.doc_id}.txt"
        if not path.is_file() or not isinstance(result, dict):
            return False
        on_disk = hashlib.sha256(path.read_bytes()).hexdigest()
        sent = hashlib.sha256(args.content.encode()).hexdigest()
        return bool(on_disk == sent == result.get("sha256"))

    return Tool(
        "file_filing",
        frozenset({Effect.WRITE_FILES}),
        FilingArgs,
        handler,
        verify=landed,
        max_attempts=3,
        verifier_version=VERIFIER_VERSION,
        cost=cost,
    )


def _earnings(t: str, i: int) -> dict[str, Any]:
    form = ("10-Q", "10-K", "8-K")[i % 3]
    title = f"{t} second quarter results" if form == "8-K" else f"{t} quarterly report"
    body = f"{t} revenue for the quarter rose {3 + i % 9} percent and earnings per share grew."
    return {"form_type": form, "title": title, "body": body, "source": "sec"}


def _guidance(t: str, i: int) -> dict[str, Any]:
    verb = ("raises", "lowers", "reaffirms")[i % 3]
    title = (f"{t} {verb} full-year guidance", f"{t} business update")[i % 2]
    body = f"{t} management {verb} its outlook and now expects revenue growth this year."
    return {"form_type": "8-K", "title": title, "body": body, "source": "company"}


def _note(t: str, i: int) -> dict[str, Any]:
    move = ("upgrade", "downgrade", "initiate coverage of")[i % 3]
    title = f"We {move} {t}"
    body = f"We {move} {t} with a new rating and move our price target to {100 + i}."
    return {"form_type": "NOTE", "title": title, "body": body, "source": "broker"}


_MAKERS = {"earnings_report": _earnings, "guidance_update": _guidance, "analyst_note": _note}
_OFFSETS = {"replay": 0, "shadow": 1, "rollout": 2}


def corpus(purpose: str, n: int) -> list[dict[str, Any]]:
    """`n` labelled filings for `purpose` (replay, shadow or rollout): input, expected, ids."""
    offset = _OFFSETS[purpose]
    items: list[dict[str, Any]] = []
    for i in range(n):
        kind = KINDS[(i + offset) % len(KINDS)]
        ticker = TICKERS[(i * 7 + offset * 3) % len(TICKERS)]
        doc = f"{purpose}-{i:04d}"
        item = {"doc_id": doc, **_MAKERS[kind](ticker, i // 3 + offset)}
        items.append(
            {
                "input": item,
                "expected": kind,
                "episode_id": f"exp-a-{doc}",
                "account": f"acct-{i % 17:02d}",
                "symbol": ticker,
            }
        )
    return items
