"""One settings object for every entry point, read from `REFLEX_*` environment variables.

Entry points (CLI, flows, notebooks) build a `Settings` once and pass it down; nothing
below them reads the environment. The role-memory mode is the exception that proves the
rule: it is read once per process by `runtime_mode()` and then frozen, because a mode
switch must take a restart (SPEC 4.6), never a hot reload.
"""

from __future__ import annotations

import functools
import logging
from enum import StrEnum
from pathlib import Path

from pydantic import AliasChoices, Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

log = logging.getLogger(__name__)

DEFAULT_BENCH_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


class MemoryMode(StrEnum):
    """Whether decision prompts may see role cases (`active`) or not (`shadow`)."""

    SHADOW = "shadow"
    ACTIVE = "active"


def parse_mode(raw: str | None) -> MemoryMode:
    """Parse a mode string; anything unknown falls back to shadow with a warning (fail-closed)."""
    if raw is None or raw.strip() == "":
        return MemoryMode.SHADOW
    value = raw.strip().lower()
    try:
        return MemoryMode(value)
    except ValueError:
        log.warning("ROLE_MEMORY_MODE=%r is not 'shadow' or 'active'; falling back to shadow", raw)
        return MemoryMode.SHADOW


class Settings(BaseSettings):
    """Embedded defaults: a SQLite ledger and a SQLite MLflow store under `home`."""

    model_config = SettingsConfigDict(env_prefix="REFLEX_", frozen=True, extra="ignore")

    home: Path = Path(".reflex")
    database_url: str | None = None
    mlflow_tracking_uri: str | None = None
    bench_postgres_url: str = DEFAULT_BENCH_POSTGRES_URL
    role_memory_mode: MemoryMode = Field(
        default=MemoryMode.SHADOW,
        validation_alias=AliasChoices("REFLEX_ROLE_MEMORY_MODE", "ROLE_MEMORY_MODE"),
    )
    min_evaluation_points: int = Field(default=3, ge=1)

    @field_validator("role_memory_mode", mode="before")
    @classmethod
    def _lenient_mode(cls, value: object) -> MemoryMode:
        if isinstance(value, MemoryMode):
            return value
        return parse_mode(None if value is None else str(value))

    @property
    def resolved_database_url(self) -> str:
        """The ledger URL: the override, else a SQLite file inside `home`."""
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.home / 'ledger.sqlite').resolve()}"

    @property
    def resolved_tracking_uri(self) -> str:
        """The MLflow tracking URI: the override, else a SQLite store inside `home`."""
        if self.mlflow_tracking_uri:
            return self.mlflow_tracking_uri
        return f"sqlite:///{(self.home / 'mlflow.sqlite').resolve()}"

    @property
    def backend(self) -> str:
        """`postgresql` or `sqlite`, from the ledger URL's scheme."""
        return "postgresql" if self.resolved_database_url.startswith("postgresql") else "sqlite"


@functools.cache
def runtime_mode() -> MemoryMode:
    """The process's role-memory mode: the first reading of the settings, then frozen."""
    return Settings().role_memory_mode
