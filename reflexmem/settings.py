"""One settings object for every entry point, read from `REFLEX_*` environment variables.

Entry points (CLI, flows, notebooks) build a `Settings` once and pass it down; nothing
below them reads the environment. Settings that are or hold secrets are marked
(`SecretStr`, or `SECRET_URL` for URLs with credentials) so that redaction finds them
all (`reflexmem.redact.secret_values`). `adapters/resources.py` turns a `Settings` into the
resources the operations need (engine, registry, price source, tracker, reflector,
embedder), so every choice of implementation is made in one place from these fields.

The role-memory mode is the exception that proves the rule: it is read once per process
by `runtime_mode()` and then frozen, because a mode switch must take a restart
(docs/design.md §9), never a hot reload.
"""

from __future__ import annotations

import functools
import logging
from enum import StrEnum
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, JsonValue, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

log = logging.getLogger(__name__)

DEFAULT_BENCH_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SECRET_URL: dict[str, JsonValue] = {"secret": "url"}
"""Marks a URL setting whose credentials (user-info password, secret query parameters)
are secrets: `reflexmem.redact.secret_values` collects them, and every MLflow tag,
param and artifact, Prefect artifact and log line masks them."""


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


class LLMSettings(BaseSettings):
    """The reflector and its model budget, from `REFLEX_LLM_*`.

    The default reflector is the rule-based one (no network); `openai` selects the
    OpenAI-compatible adapter, which then needs `base_url` and `model`. The budget
    limits apply to model calls only.
    """

    model_config = SettingsConfigDict(env_prefix="REFLEX_LLM_", frozen=True, extra="ignore")

    reflector: Literal["rules", "openai"] = "rules"
    base_url: str | None = Field(default=None, json_schema_extra=SECRET_URL)
    model: str | None = None
    api_key: SecretStr | None = None
    """Secret: never logged, tagged or stored (`reflexmem.redact`)."""
    timeout_s: float = Field(default=30.0, gt=0)
    """Wall-clock limit of one model response: connect, headers and the whole body."""
    max_response_bytes: int = Field(default=262_144, gt=0)
    """Largest response body read from the model (a valid answer is under 4 KiB)."""
    max_retries: int = Field(default=2, ge=0)
    calls_per_batch: int = Field(default=200, ge=0)
    tokens_per_batch: int = Field(default=300_000, ge=0)
    calls_per_day: int = Field(default=2000, ge=0)
    tokens_per_day: int = Field(default=3_000_000, ge=0)
    tokens_per_call: int = Field(default=1500, gt=0)
    batch_limit: int = Field(default=100_000, ge=1)


class Settings(BaseSettings):
    """Embedded defaults: a SQLite ledger and a SQLite MLflow store under `home`."""

    model_config = SettingsConfigDict(env_prefix="REFLEX_", frozen=True, extra="ignore")

    home: Path = Path(".reflex")
    database_url: str | None = Field(default=None, json_schema_extra=SECRET_URL)
    mlflow_tracking_uri: str | None = Field(default=None, json_schema_extra=SECRET_URL)
    artifact_root: Path | None = None
    """Where MLflow artifacts of new experiments go (None: `home/mlartifacts`)."""
    mlflow_ui_url: str = "http://127.0.0.1:5000"
    """Base URL of the MLflow UI, for the links lineage, reports and Prefect artifacts print."""
    bench_postgres_url: str = Field(
        default=DEFAULT_BENCH_POSTGRES_URL, json_schema_extra=SECRET_URL
    )
    role_memory_mode: MemoryMode = Field(
        default=MemoryMode.SHADOW,
        validation_alias=AliasChoices("REFLEX_ROLE_MEMORY_MODE", "ROLE_MEMORY_MODE"),
    )
    min_evaluation_points: int = Field(default=3, ge=1)
    admission_lock_wait_s: float = Field(default=30.0, ge=0)
    """How long an admission batch waits for another one to finish before it gives up."""
    prices: str = "ledger"
    """`ledger` (the `market_bars` table) or the path of a price panel file."""
    embedder: Literal["none", "hashing", "minilm"] = "none"
    profile: str = "spy_daily"
    profile_version: int | None = Field(default=None, ge=1)
    drop_dir: Path | None = None
    """Folder the scheduled `admission` flow ingests files from (None: `home/drop`)."""
    memory_seed: int = 0
    api_token: SecretStr | None = None
    """Secret: the bearer token every request to `reflexmem api` must carry (no token,
    no service: the command refuses to start without one)."""
    api_host: str = "127.0.0.1"
    """Interface `reflexmem api` listens on (loopback unless deliberately exposed)."""
    api_port: int = Field(default=8765, ge=0, le=65535)
    api_max_body_bytes: int = Field(default=1_048_576, ge=1024)
    """Largest request body `reflexmem api` reads; a larger one gets 413 unparsed."""
    api_write_wait_s: float = Field(default=10.0, gt=0)
    """On SQLite, how long a write to `reflexmem api` waits for its turn before a 503."""
    api_threads: int = Field(default=4, ge=1, le=256)
    """Requests one `reflexmem api` process works on at once; the rest wait in arrival
    order. A handful overlaps the store's round trips; dozens only queue on the
    interpreter lock, where a request's latency is set by the scheduler, not by the
    order it came in (docs/api.md, the concurrent benchmark)."""
    api_rate_per_s: float = Field(default=500.0, ge=0)
    """Requests a second one bearer token may send `reflexmem api` (0: no limit); past
    it, 429 with `Retry-After`. The default is above what this service serves on two
    cores, so it only stops a runaway loop."""
    api_rate_burst: int = Field(default=1000, ge=1)
    """How many requests one token may send at once before the rate applies."""
    prefect_api_url: str | None = Field(default=None, json_schema_extra=SECRET_URL)
    """Prefect API the doctor checks the schedule on (None: no schedule check)."""
    task_runner: Literal["threads", "dask"] = "threads"
    """How flows fan out per-role, per-namespace and per-seed tasks: the flow's threads,
    or Dask (`dask`: a local cluster of `dask_workers` processes unless `dask_address`)."""
    dask_address: str | None = None
    """Scheduler address of a running Dask cluster (`tcp://host:8786`); implies Dask."""
    dask_workers: int = Field(default=2, ge=1)
    """Worker processes of the local Dask cluster a flow starts when no address is set."""
    stack_postgres_url: str = Field(
        default=DEFAULT_BENCH_POSTGRES_URL, json_schema_extra=SECRET_URL
    )
    """Maintenance URL `reflexmem stack up` creates its databases with (ledger, MLflow)."""
    llm: LLMSettings = Field(default_factory=LLMSettings)

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
    def resolved_artifact_root(self) -> Path:
        """The MLflow artifact root (absolute), never the working directory's `./mlruns`."""
        return (self.artifact_root or self.home / "mlartifacts").resolve()

    @property
    def resolved_drop_dir(self) -> Path:
        """The admission flow's drop folder (absolute)."""
        return (self.drop_dir or self.home / "drop").resolve()

    @property
    def uses_dask(self) -> bool:
        """Whether fan-out tasks go to Dask (a scheduler address, or `task_runner=dask`)."""
        return self.task_runner == "dask" or bool(self.dask_address)

    @property
    def backend(self) -> str:
        """`postgresql` or `sqlite`, from the ledger URL's scheme."""
        return "postgresql" if self.resolved_database_url.startswith("postgresql") else "sqlite"

    def pinned(self) -> Settings:
        """A copy with every location made absolute, for a deployment or another process.

        A deployment served from another folder, or a worker started elsewhere, must
        reach the same ledger and tracking store as the process that created it.
        """
        prices = self.prices
        if prices != "ledger":
            prices = str(Path(prices).resolve())
        return self.model_copy(
            update={
                "home": self.home.resolve(),
                "database_url": self.resolved_database_url,
                "mlflow_tracking_uri": self.resolved_tracking_uri,
                "drop_dir": self.resolved_drop_dir,
                "artifact_root": self.resolved_artifact_root,
                "prices": prices,
            }
        )


@functools.cache
def runtime_mode() -> MemoryMode:
    """The process's role-memory mode: the first reading of the settings, then frozen."""
    return Settings().role_memory_mode
