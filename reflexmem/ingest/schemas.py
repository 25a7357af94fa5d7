"""The file contracts of `reflexmem ingest`, one per ledger table.

A schema is data, so that the README's tables, the validator and the loader can never
disagree about a column. Ledger kinds fail the whole file on any bad row; a kind with a
`suite` (market bars) fails only on what cannot be parsed and leaves rows that parse but
break an expectation to that suite, which quarantines them.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from reflexmem.ledger.enums import Direction, Instrument, Origin, PositionStatus
from reflexmem.ledger.lengths import CODE_CHARS, ID_CHARS, SCENARIO_CHARS

ColumnType = Literal["str", "float", "int", "bool", "timestamp", "json"]


@dataclass(frozen=True)
class Column:
    """One column of a file contract."""

    name: str
    type: ColumnType = "str"
    required: bool = True
    enum: builtins.type[StrEnum] | None = None
    references: str | None = None
    default: str | float | int | bool | None = None
    doc: str = ""
    max_length: int | None = None
    empty_ok: bool = False
    """The column must be present, but an empty value is for the kind's suite to judge."""
    day_end: bool = False
    """A bare date (no time) means the last microsecond of that UTC day, not its start."""
    minimum: float | None = None
    """Numbers: the smallest allowed value (ledger kinds refuse anything below)."""
    exclusive: bool = False
    """Numbers: `minimum` itself is refused too (a quantity or a price must be positive)."""


@dataclass(frozen=True)
class FileSchema:
    """The contract of one kind of file and the table it loads into."""

    kind: str
    table: str
    key: str | tuple[str, ...]
    columns: tuple[Column, ...]
    doc: str = ""
    depends_on: tuple[str, ...] = field(default=())
    suite: str | None = None
    """Expectation suite that quarantines rows of this kind (None: a bad row fails the file)."""

    def column(self, name: str) -> Column:
        """The column called `name`."""
        return next(c for c in self.columns if c.name == name)

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The key as a tuple of column names (one for ledger kinds, two for bars)."""
        return (self.key,) if isinstance(self.key, str) else self.key

    @property
    def single_key(self) -> str:
        """The key column of a kind that other kinds may refer to."""
        if not isinstance(self.key, str):
            raise TypeError(f"{self.kind} has a composite key {self.key}")
        return self.key


ID = ID_CHARS
CODE = CODE_CHARS

DECISIONS = FileSchema(
    kind="decisions",
    table="trading_decisions",
    key="decision_id",
    doc="What an agent decided, in which declared role, with its evidence.",
    columns=(
        Column("decision_id", max_length=ID, doc="unique decision ID"),
        Column("agent_id", max_length=ID, doc="the deciding agent"),
        Column(
            "role_id",
            max_length=ID,
            doc="declared analysis role, compared exactly (checked at admission, not here)",
        ),
        Column("account", max_length=ID),
        Column("market", max_length=CODE, doc="venue or market, e.g. `US`"),
        Column("symbol", max_length=CODE, doc="the asset"),
        Column("direction", enum=Direction),
        Column("decided_at", "timestamp"),
        Column("scenario", required=False, max_length=SCENARIO_CHARS),
        Column("rationale", required=False, default=""),
        Column(
            "evidence",
            "json",
            required=False,
            doc="JSON list of {kind, as_of, value} known at decision time",
        ),
    ),
)

PREVIEWS = FileSchema(
    kind="previews",
    table="trade_previews",
    key="preview_id",
    depends_on=("decisions",),
    doc="Manual trade previews and whether they were consumed.",
    columns=(
        Column("preview_id", max_length=ID),
        Column("decision_id", max_length=ID, references="decisions"),
        Column("account", max_length=ID),
        Column("market", max_length=CODE),
        Column("symbol", max_length=CODE),
        Column("direction", enum=Direction),
        Column("created_at", "timestamp"),
        Column("consumed_at", "timestamp", required=False),
        Column("consumed_by_decision_id", required=False, max_length=ID, references="decisions"),
    ),
)

EXECUTIONS = FileSchema(
    kind="executions",
    table="trade_executions",
    key="execution_id",
    depends_on=("decisions", "previews"),
    doc="Orders that reached the market, with origin and automation markers.",
    columns=(
        Column("execution_id", max_length=ID),
        Column("decision_id", max_length=ID, references="decisions"),
        Column("preview_id", required=False, max_length=ID, references="previews"),
        Column("account", max_length=ID),
        Column("market", max_length=CODE),
        Column("symbol", max_length=CODE),
        Column("direction", enum=Direction),
        Column("instrument", enum=Instrument, required=False, default="spot"),
        Column("origin", enum=Origin, doc="compared exactly: no trimming, no case folding"),
        Column("origin_verified", "bool", required=False, default=False),
        Column(
            "automation_markers",
            "json",
            required=False,
            doc="JSON list of markers (job IDs, bot tags); any marker means automated; "
            "any other JSON value is quarantined at admission as `malformed_markers`",
        ),
        Column("executed_at", "timestamp"),
    ),
)

FILLS = FileSchema(
    kind="fills",
    table="trade_fills",
    key="fill_id",
    depends_on=("executions",),
    doc="Fills of executions.",
    columns=(
        Column("fill_id", max_length=ID),
        Column("execution_id", max_length=ID, references="executions"),
        Column("quantity", "float", minimum=0.0, exclusive=True, doc="greater than 0"),
        Column("price", "float", minimum=0.0, exclusive=True, doc="greater than 0"),
        Column("fee", "float", required=False, default=0.0, minimum=0.0, doc="0 or more"),
        Column("filled_at", "timestamp"),
    ),
)

OUTCOMES = FileSchema(
    kind="outcomes",
    table="position_lifecycles",
    key="position_id",
    depends_on=("decisions", "executions"),
    doc="Position lifecycles: open, or settled with a realized return.",
    columns=(
        Column("position_id", max_length=ID),
        Column("decision_id", max_length=ID, references="decisions"),
        Column(
            "execution_id",
            required=False,
            max_length=ID,
            references="executions",
            doc="the execution this position belongs to (an execution of this decision); "
            "empty: the decision's only position",
        ),
        Column("status", enum=PositionStatus),
        Column("opened_at", "timestamp"),
        Column("settled_at", "timestamp", required=False),
        Column("entry_price", "float", required=False, minimum=0.0, exclusive=True),
        Column("exit_price", "float", required=False, minimum=0.0, exclusive=True),
        Column("realized_return", "float", required=False),
        Column(
            "evaluation_points",
            "int",
            required=False,
            default=0,
            minimum=0.0,
            doc="price observations available to evaluate the outcome",
        ),
    ),
)

BARS = FileSchema(
    kind="bars",
    table="market_bars",
    key=("symbol", "ts"),
    suite="bars",
    doc="Market bars, daily or intraday: the prices positions settle on.",
    columns=(
        Column("symbol", max_length=CODE, doc="the asset, spelled as decisions spell it"),
        Column(
            "ts",
            "timestamp",
            day_end=True,
            doc="when the bar closed; a bare date means the end of that UTC day",
        ),
        Column("open", "float", required=False),
        Column("high", "float", required=False),
        Column("low", "float", required=False),
        Column(
            "close",
            "float",
            empty_ok=True,
            doc="the price of record; an empty or non-positive close is quarantined",
        ),
        Column("volume", "float", required=False),
    ),
)

SCHEMAS: dict[str, FileSchema] = {
    s.kind: s for s in (DECISIONS, PREVIEWS, EXECUTIONS, FILLS, OUTCOMES, BARS)
}
LOAD_ORDER: tuple[str, ...] = ("decisions", "previews", "executions", "fills", "outcomes")
"""The ledger kinds in dependency order."""
INGEST_ORDER: tuple[str, ...] = ("bars", *LOAD_ORDER)
"""Every kind in the order one ingest loads them; bars depend on nothing."""
