from __future__ import annotations

import pytest

from bot.errors import ConfigError
from bot.providers import DemoProvider, OpenAICompatibleProvider, make_provider


@pytest.mark.parametrize("base_url", [None, "", "   "])
async def test_no_base_url_gives_the_demo(base_url: str | None) -> None:
    provider = make_provider(base_url, "ignored")

    assert isinstance(provider, DemoProvider)
    assert provider.name == "demo"


async def test_base_url_gives_the_openai_provider() -> None:
    provider = make_provider("http://127.0.0.1:9/v1", "key", read_timeout=5.0, max_retries=1)

    assert isinstance(provider, OpenAICompatibleProvider)
    assert provider.name == "openai"
    await provider.aclose()


def test_base_url_without_scheme_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="must start with http:// or https://"):
        make_provider("api.example.com/v1", None)
