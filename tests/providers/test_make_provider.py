from __future__ import annotations

import pytest

from bot.config import ModelSettings
from bot.errors import ConfigError
from bot.providers import OpenAICompatibleProvider
from bot.providers.router import make_router


async def test_base_url_gives_the_openai_provider() -> None:
    router = make_router(ModelSettings(base_url="http://127.0.0.1:9/v1", api_key="key"))

    [target] = router.targets_for("gpt-4o-mini")
    assert isinstance(target.provider, OpenAICompatibleProvider)
    assert router.name == "openai"
    await router.aclose()


def test_base_url_without_scheme_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="must start with http:// or https://"):
        make_router(ModelSettings(base_url="api.example.com/v1"))
