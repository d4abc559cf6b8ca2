from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from bot.providers.openai import OpenAICompatibleProvider
from tests.fakes.openai_server import FakeOpenAI, fake_openai_fixture  # noqa: F401

ProviderFactory = Callable[..., OpenAICompatibleProvider]


@pytest.fixture
async def make_provider(fake_openai: FakeOpenAI) -> AsyncIterator[ProviderFactory]:
    """Providers aimed at the fake server; tiny backoff unless a test sets its own."""
    providers: list[OpenAICompatibleProvider] = []

    def make(**options: Any) -> OpenAICompatibleProvider:
        settings: dict[str, Any] = {"api_key": "test-key", "backoff_base": 0.001, **options}
        provider = OpenAICompatibleProvider(fake_openai.base_url, **settings)
        providers.append(provider)
        return provider

    yield make
    for provider in providers:
        await provider.aclose()
