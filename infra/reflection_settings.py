"""Settings of the reflection stage, read from `REFLEX_LLM_*` environment variables.

Kept apart from `reflexmem.settings.Settings` so that the model endpoint, its key and
the budget live in one place the reflection wiring owns. The default reflector is the
rule-based one (no network); `REFLEX_LLM_REFLECTOR=openai` switches to the
OpenAI-compatible adapter, which then needs `REFLEX_LLM_BASE_URL` and `REFLEX_LLM_MODEL`
(and usually `REFLEX_LLM_API_KEY`). The budget limits apply to model calls only.

| variable | default | meaning |
|---|---|---|
| `REFLEX_LLM_REFLECTOR` | `rules` | `rules` (L0/L1) or `openai` (L3) |
| `REFLEX_LLM_BASE_URL` | - | e.g. `http://127.0.0.1:8000/v1` |
| `REFLEX_LLM_MODEL` | - | model name sent to the endpoint |
| `REFLEX_LLM_API_KEY` | - | bearer token (never logged) |
| `REFLEX_LLM_TIMEOUT_S` | 30 | per request |
| `REFLEX_LLM_MAX_RETRIES` | 2 | attempts after the first |
| `REFLEX_LLM_CALLS_PER_BATCH` / `_TOKENS_PER_BATCH` | 200 / 300000 | per role batch |
| `REFLEX_LLM_CALLS_PER_DAY` / `_TOKENS_PER_DAY` | 2000 / 3000000 | per UTC day |
| `REFLEX_LLM_TOKENS_PER_CALL` | 1500 | estimate reserved per call |
| `REFLEX_LLM_BATCH_LIMIT` | 100000 | cases offered per role batch |
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from reflexmem.executor import ToolExecutor
from reflexmem.reflection import BudgetLimits, LLMConfig, OpenAIReflector, Reflector, RuleReflector


class ReflectionSettings(BaseSettings):
    """Which reflector to use, where the model lives, and the model budget."""

    model_config = SettingsConfigDict(env_prefix="REFLEX_LLM_", frozen=True, extra="ignore")

    reflector: Literal["rules", "openai"] = "rules"
    base_url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    timeout_s: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    calls_per_batch: int = Field(default=200, ge=0)
    tokens_per_batch: int = Field(default=300_000, ge=0)
    calls_per_day: int = Field(default=2000, ge=0)
    tokens_per_day: int = Field(default=3_000_000, ge=0)
    tokens_per_call: int = Field(default=1500, gt=0)
    batch_limit: int = Field(default=100_000, ge=1)

    def llm_config(self) -> LLMConfig:
        """The adapter's configuration; an error names the missing variable."""
        if not self.base_url or not self.model:
            raise ValueError("REFLEX_LLM_BASE_URL and REFLEX_LLM_MODEL are required for openai")
        key = self.api_key.get_secret_value() if self.api_key is not None else None
        return LLMConfig(
            base_url=self.base_url,
            model=self.model,
            api_key=key,
            timeout_s=self.timeout_s,
            max_retries=self.max_retries,
        )

    def budget(self) -> BudgetLimits | None:
        """Budget limits for model reflection; rules cost nothing and are not gated."""
        if self.reflector == "rules":
            return None
        return BudgetLimits(
            calls_per_batch=self.calls_per_batch,
            tokens_per_batch=self.tokens_per_batch,
            calls_per_day=self.calls_per_day,
            tokens_per_day=self.tokens_per_day,
            tokens_per_call=self.tokens_per_call,
        )

    def build_reflector(self, executor: ToolExecutor) -> Reflector:
        """The configured reflector; the model adapter routes tool requests to `executor`."""
        if self.reflector == "rules":
            return RuleReflector()
        return OpenAIReflector(self.llm_config(), executor=executor)
