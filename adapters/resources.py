"""Resources chosen in one place: settings in, the operations' `Resources` out.

Like a dagster `definitions.py`, this module is the only place that decides which
implementation backs each seam of the core: the ledger engine (SQLite or PostgreSQL),
the role registry, the price source (the ledger's `market_bars`, or a panel file), the
MLflow trackers (evaluation runs, skill and structure versions), the reflector (rules,
or an OpenAI-compatible model) and the recall embedder. CLI commands, Prefect tasks,
the demo and the benchmarks all get their resources from here, so a deployment and a
shell command given the same settings work on the same ledger with the same parts.

Building resources never migrates: a ledger that is not at the code's revision raises
`SchemaNotCurrent` naming `reflexmem db upgrade`.
"""

from __future__ import annotations

import functools
from pathlib import Path

from adapters import migrate
from adapters.db import make_engine
from reflexmem.executor import ToolExecutor
from reflexmem.operations.resources import ReflectionSetup, Resources
from reflexmem.prices.providers import LedgerPrices, PanelPrices, PriceProvider
from reflexmem.recall.embeddings import Embedder, HashingEmbedder
from reflexmem.redact import env_secrets, install_log_redaction, register_secrets, secret_values
from reflexmem.reflection import BudgetLimits, LLMConfig, OpenAIReflector, Reflector
from reflexmem.registry import load_registry
from reflexmem.settings import LLMSettings, Settings


def reflection_setup(llm: LLMSettings) -> ReflectionSetup:
    """The configured reflector: rules (no network, no budget) or the model adapter."""
    if llm.reflector == "rules":
        return ReflectionSetup(name="rules", batch_limit=llm.batch_limit)
    if not llm.base_url or not llm.model:
        raise ValueError("REFLEX_LLM_BASE_URL and REFLEX_LLM_MODEL are required for openai")
    config = LLMConfig(
        base_url=llm.base_url,
        model=llm.model,
        api_key=llm.api_key.get_secret_value() if llm.api_key is not None else None,
        timeout_s=llm.timeout_s,
        max_retries=llm.max_retries,
        max_response_bytes=llm.max_response_bytes,
    )

    def build(executor: ToolExecutor) -> Reflector:
        return OpenAIReflector(config, executor=executor)

    budget = BudgetLimits(
        calls_per_batch=llm.calls_per_batch,
        tokens_per_batch=llm.tokens_per_batch,
        calls_per_day=llm.calls_per_day,
        tokens_per_day=llm.tokens_per_day,
        tokens_per_call=llm.tokens_per_call,
    )
    return ReflectionSetup(
        name="openai", build=build, model=llm.model, budget=budget, batch_limit=llm.batch_limit
    )


def make_embedder(name: str) -> Embedder | None:
    """`none`, the deterministic `hashing` embedder, or MiniLM from the `embeddings` extra."""
    if name == "none":
        return None
    if name == "hashing":
        return HashingEmbedder()
    if name == "minilm":
        from reflexmem.recall.embeddings import MiniLMEmbedder

        return MiniLMEmbedder()
    raise ValueError(f"unknown embedder {name!r}: use none, hashing or minilm")


def make_prices(settings: Settings, engine: object) -> PriceProvider:
    """The ledger's bars (`REFLEX_PRICES=ledger`, the default) or a panel file's."""
    if settings.prices == "ledger":
        return LedgerPrices(engine)  # type: ignore[arg-type]
    return PanelPrices(Path(settings.prices))


def protect(settings: Settings) -> None:
    """Register the settings' secrets (and secret environment variables) for redaction.

    Also makes every log record of the process pass the redacting filter.
    """
    register_secrets(secret_values(settings))
    register_secrets(env_secrets())
    install_log_redaction()


def build_resources(settings: Settings) -> Resources:
    """Every resource the operations need, for these settings (never migrates)."""
    protect(settings)
    from adapters.tracking.eval import EvaluationTracker
    from adapters.tracking.skills import SkillTracker
    from adapters.tracking.structures import StructureTracker
    from expectations.bars import validate_bars
    from expectations.runner import validate_admission

    engine = make_engine(settings.resolved_database_url)
    try:
        migrate.require_current(engine)
    except BaseException:
        engine.dispose()
        raise
    registry = load_registry()
    return Resources(
        engine=engine,
        registry=registry,
        prices=make_prices(settings, engine),
        validate_admission=validate_admission,
        validate_bars=validate_bars,
        tracker=EvaluationTracker(
            settings.resolved_tracking_uri,
            ledger_url=settings.resolved_database_url,
            artifact_root=settings.resolved_artifact_root,
            registry=registry,
        ),
        skill_tracker=SkillTracker(
            settings.resolved_tracking_uri, artifact_root=settings.resolved_artifact_root
        ),
        structure_tracker=StructureTracker(
            settings.resolved_tracking_uri, settings.resolved_artifact_root.as_uri()
        ),
        reflection=reflection_setup(settings.llm),
        embedder=make_embedder(settings.embedder),
        min_evaluation_points=settings.min_evaluation_points,
        admission_lock_wait_s=settings.admission_lock_wait_s,
        profile=settings.profile,
        profile_version=settings.profile_version,
        memory_seed=settings.memory_seed,
    )


@functools.lru_cache(maxsize=8)
def resources_for(settings: Settings) -> Resources:
    """`build_resources`, once per process per settings (tasks of one worker share them)."""
    return build_resources(settings)
