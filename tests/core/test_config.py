"""Settings: config.yaml, then CHORUS_* environment overrides."""

from __future__ import annotations

import pytest

from bot.config import environment_names, load_settings
from bot.errors import ConfigError
from tests.support.runtime import REPO_CONFIG


def test_shipped_config_has_three_personas_and_no_secrets():
    settings = load_settings(REPO_CONFIG, {})
    assert [p.id for p in settings.personas] == ["ada", "captain", "sage"]
    assert settings.default_persona == "ada"
    assert settings.model.base_url is None and settings.model.api_key is None
    assert settings.channels.telegram.token is None and settings.channels.discord.token is None
    assert settings.database_url == "sqlite:///./data/chorus.db"


def test_environment_overrides_every_setting_by_path_and_alias():
    settings = load_settings(
        REPO_CONFIG,
        {
            "CHORUS_DATABASE_URL": "postgresql://chorus@db/chorus",
            "CHORUS_MODEL_BASE_URL": "http://127.0.0.1:9999/v1",
            "CHORUS_MODEL_API_KEY": "sk-secret",
            "CHORUS_TELEGRAM_TOKEN": "123:abc",
            "CHORUS_DISCORD_TOKEN": "discord-token",
            "CHORUS_CHANNELS_WEB_PORT": "9090",
            "CHORUS_CHANNELS_WEB_CORS_ORIGINS": '["https://example.org"]',
            "CHORUS_MODEL_CONTEXT_WINDOWS": '{"small": 4000}',
        },
    )
    assert settings.database_url == "postgresql://chorus@db/chorus"
    assert settings.model.api_key.get_secret_value() == "sk-secret"
    assert settings.channels.telegram.token.get_secret_value() == "123:abc"
    assert settings.channels.discord.token.get_secret_value() == "discord-token"
    assert settings.channels.web.port == 9090
    assert settings.channels.web.cors_origins == ["https://example.org"]
    assert settings.model.context_windows == {"small": 4000}
    assert settings.model.context_window is None  # other models': asked of the server, or learned
    assert "CHORUS_MEMORY_TURNS_THRESHOLD" in environment_names()


def test_invalid_values_name_the_setting(tmp_path):
    with pytest.raises(ConfigError, match="channels.web.port"):
        load_settings(REPO_CONFIG, {"CHORUS_CHANNELS_WEB_PORT": "not-a-port"})
    broken = tmp_path / "broken.yaml"
    broken.write_text("model: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(broken, {})


def test_keys_written_as_variables_are_read_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FIRST_KEY", "sk-first")
    monkeypatch.setenv("SPARE_KEY", "sk-spare")
    config = tmp_path / "config.yaml"
    config.write_text(
        "model:\n"
        "  api_key: ${FIRST_KEY}\n"
        "  api_keys: ['${SPARE_KEY}', '${FIRST_KEY}']\n"
        "  fallbacks: [{base_url: 'http://127.0.0.1:9/v1', api_key: '${SPARE_KEY}'}]\n"
        "models: [{name: deep, model: o4-mini, api_key: '${SPARE_KEY}'}]\n",
        encoding="utf-8",
    )

    settings = load_settings(config, {})

    assert settings.model.keys() == ["sk-first", "sk-spare"]  # each key once, in order
    assert settings.model.fallbacks[0].keys() == ["sk-spare"]
    spare = settings.models[0].api_key
    assert spare is not None and spare.get_secret_value() == "sk-spare"
    assert "sk-" not in repr(settings.model)


def test_a_key_naming_a_missing_variable_is_a_config_error(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  api_key: ${NO_SUCH_KEY}\n", encoding="utf-8")

    with pytest.raises(ConfigError, match="model.api_key: .*NO_SUCH_KEY named for a key is not set"):
        load_settings(config, {})
