import logging
from pathlib import Path

import pytest

from reflexmem.settings import MemoryMode, Settings, parse_mode


@pytest.mark.parametrize(
    ("raw", "mode"), [("shadow", "shadow"), ("ACTIVE", "active"), (None, "shadow")]
)
def test_mode_parses_known_values(raw: str | None, mode: str) -> None:
    assert parse_mode(raw) == MemoryMode(mode)


def test_invalid_mode_warns_naming_the_value_and_falls_back_to_shadow(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        assert parse_mode("turbo") is MemoryMode.SHADOW
    assert "'turbo'" in caplog.text


def test_settings_read_mode_from_role_memory_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROLE_MEMORY_MODE", "active")
    assert Settings().role_memory_mode is MemoryMode.ACTIVE
    monkeypatch.setenv("ROLE_MEMORY_MODE", "bogus")
    assert Settings().role_memory_mode is MemoryMode.SHADOW


def test_settings_are_frozen() -> None:
    settings = Settings()
    with pytest.raises(ValueError, match="frozen"):
        settings.home = settings.home


def test_embedded_defaults_live_under_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("REFLEX_HOME", str(tmp_path))
    monkeypatch.delenv("REFLEX_DATABASE_URL", raising=False)
    settings = Settings()
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    assert settings.resolved_tracking_uri == f"sqlite:///{tmp_path / 'mlflow.sqlite'}"
    assert settings.backend == "sqlite"


def test_a_postgresql_url_selects_postgres(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REFLEX_DATABASE_URL", "postgresql://postgres@127.0.0.1/x")
    assert Settings().backend == "postgresql"


def test_runtime_mode_is_frozen_after_the_first_read(monkeypatch: pytest.MonkeyPatch) -> None:
    from reflexmem.settings import runtime_mode

    runtime_mode.cache_clear()
    monkeypatch.setenv("ROLE_MEMORY_MODE", "active")
    try:
        assert runtime_mode() is MemoryMode.ACTIVE
        monkeypatch.setenv("ROLE_MEMORY_MODE", "shadow")
        assert runtime_mode() is MemoryMode.ACTIVE
    finally:
        runtime_mode.cache_clear()
