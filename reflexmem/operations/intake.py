"""Stages that bring input in: ingest files or records, a drop folder, consume previews, admit.

Each function is one stage of the cycle over `Resources` and returns its report; the
CLI, the flows and the tests call these and nothing below them.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from reflexmem.admission.admit import AdmissionResult
from reflexmem.admission.admit import admit as admit_batch
from reflexmem.ingest.load import IngestReport, ingest_files, load_records
from reflexmem.ingest.read import ROW, SUFFIXES, IngestError, detect_kind
from reflexmem.ingest.rows import RECORD_KINDS, rows_file
from reflexmem.ingest.schemas import INGEST_ORDER, SCHEMAS
from reflexmem.ledger.enums import QuarantineReason
from reflexmem.ledger.previews import (
    DecisionNotFound,
    PreviewAlreadyConsumed,
    PreviewError,
    consume_preview,
    record_refused_consumption,
)
from reflexmem.ledger.statistics import refresh_statistics
from reflexmem.operations.resources import Resources

ADMISSION_TABLES = ("role_cases", "quarantine", "case_revocations")
"""What an admission batch writes in bulk (its statistics are refreshed after it)."""


def ingest(res: Resources, paths: Sequence[Path], kind: str | None = None) -> IngestReport:
    """Validate and load ledger files in one transaction: all of them or nothing.

    Unparseable input raises `IngestError` and writes nothing; market bars that parse but
    fail their expectation suite are quarantined and the rest load.
    """
    with res.engine.begin() as conn:
        report = ingest_files(
            conn,
            paths,
            kinds=[kind] * len(paths) if kind else None,
            validate_bars=res.validate_bars,
        )
    written = [SCHEMAS[k].table for k, n in report.added.items() if n]
    refresh_statistics(res.engine, written, report.total_added)
    return report


def record(res: Resources, kind: str, rows: Sequence[Mapping[str, object]]) -> IngestReport:
    """Record rows an agent sends (decisions, previews, executions, fills), all or none.

    The rows are validated by the same contract and loaded by the same staged path as a
    file of that kind (`reflexmem.ingest.rows`); bad input raises `IngestError` naming
    the row and field and writes nothing. A preview is recorded unconsumed: it is
    consumed only by `consume`, which keeps exactly-once.
    """
    if kind not in RECORD_KINDS:
        raise ValueError(f"cannot record {kind!r}; use one of {', '.join(RECORD_KINDS)}")
    file = rows_file(kind, rows)
    if kind == "previews":
        for name in ("consumed_at", "consumed_by_decision_id"):
            given = file.frame.filter(file.frame[name].is_not_null())
            if given.height:
                raise IngestError(
                    file.path,
                    "a preview is recorded unconsumed; consume it with `consume`",
                    row=int(given[ROW][0]),
                    column=name,
                )
    with res.engine.begin() as conn:
        return load_records(conn, [file])


@dataclass(frozen=True)
class DropReport:
    """What ingesting a drop folder did, file by file."""

    folder: str
    loaded: dict[str, int] = field(default_factory=dict)
    unchanged: tuple[str, ...] = ()
    rejected: dict[str, str] = field(default_factory=dict)

    @property
    def rows_added(self) -> int:
        """Rows written over every loaded file."""
        return sum(self.loaded.values())


def ingest_drop(res: Resources, folder: Path) -> DropReport:
    """Ingest every ledger file of `folder`, each in its own transaction.

    A bad file is reported (with the reason that names its row and column) and writes
    nothing, without blocking the good ones; a file ingested before is skipped by its
    checksum, so the scheduled flow can run over the same folder again and again.
    Files of one kind depend on earlier kinds (executions on decisions), so files are
    loaded in dependency order of their kinds, then by name.
    """
    if not folder.is_dir():
        return DropReport(folder=str(folder))
    files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SUFFIXES)
    loaded: dict[str, int] = {}
    unchanged: list[str] = []
    rejected: dict[str, str] = {}
    for path in _dependency_order(files):
        try:
            report = ingest(res, [path])
        except IngestError as exc:
            rejected[path.name] = str(exc)
            continue
        if report.skipped_files:
            unchanged.append(path.name)
        else:
            loaded[path.name] = report.total_added
    return DropReport(str(folder), loaded, tuple(unchanged), rejected)


def _dependency_order(files: list[Path]) -> list[Path]:
    def rank(path: Path) -> tuple[int, str]:
        try:
            return INGEST_ORDER.index(detect_kind(path)), path.name
        except (IngestError, ValueError):
            return len(INGEST_ORDER), path.name

    return sorted(files, key=rank)


@dataclass(frozen=True)
class ConsumeReport:
    """A preview consumption: done, or refused and kept in quarantine."""

    preview_id: str
    decision_id: str
    consumed: bool
    reason: str | None = None
    code: str | None = None
    """Why it was refused: the quarantine reason (`preview_double_consume`, ...)."""


def consume(res: Resources, preview_id: str, decision_id: str) -> ConsumeReport:
    """Consume a manual preview exactly once; every refused attempt is kept in quarantine."""
    try:
        with res.engine.begin() as conn:
            consume_preview(conn, preview_id, decision_id)
    except PreviewError as exc:
        code = QuarantineReason.PREVIEW_MISSING
        if isinstance(exc, PreviewAlreadyConsumed):
            code = QuarantineReason.PREVIEW_DOUBLE_CONSUME
        elif isinstance(exc, DecisionNotFound):
            code = QuarantineReason.UNKNOWN_DECISION
        with res.engine.begin() as conn:
            record_refused_consumption(
                conn, f"consume-{uuid.uuid4().hex[:16]}", preview_id, decision_id, str(exc), code
            )
        return ConsumeReport(
            preview_id, decision_id, consumed=False, reason=str(exc), code=code.value
        )
    return ConsumeReport(preview_id, decision_id, consumed=True)


def admit(res: Resources) -> AdmissionResult:
    """One fail-closed admission batch over every execution not judged yet.

    Serialised by the admission lock: a batch that waited `res.admission_lock_wait_s`
    without getting it judges nothing and reports `busy` (the CLI exits 0 saying
    "another admission is running").
    """
    with res.engine.begin() as conn:
        result = admit_batch(
            conn,
            res.registry.ids,
            res.validate_admission,
            min_points=res.min_evaluation_points,
            lock_wait_s=res.admission_lock_wait_s,
        )
    refresh_statistics(res.engine, ADMISSION_TABLES, result.rows_in)
    return result
