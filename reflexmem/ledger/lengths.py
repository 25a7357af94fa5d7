"""Column lengths of the ingested ledger tables, declared once.

The file contracts (`reflexmem.ingest.schemas`) refuse a longer value at ingest, naming
file, row and column, and the SQLAlchemy models (`reflexmem.ledger.models`,
`market_models`) size their columns from the same constants, so SQLite (which would
store anything) and PostgreSQL (which would raise a raw database error) behave alike.
This module imports nothing: both sides can depend on it without an import cycle.
"""

from __future__ import annotations

ID_CHARS = 64
"""Identifiers: decision, preview, execution, fill, position, agent, role, account."""
CODE_CHARS = 32
"""Short codes: market and symbol."""
SCENARIO_CHARS = 64
"""A decision's scenario label."""
