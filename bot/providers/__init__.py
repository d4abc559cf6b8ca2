"""Model providers: turn a `ChatRequest` into a stream of reply text.

The engine and compaction call `make_provider` once and use the `ChatProvider` protocol;
failures surface as `bot.errors.ProviderError` subclasses with messages fit for the person
chatting. Providers know nothing of sessions, storage or lanes, and never retry a
stream that already produced text: that decision belongs to the engine.
"""

from __future__ import annotations

from typing import Any

from bot.providers.base import ChatProvider, ChatRequest
from bot.providers.demo import DemoProvider
from bot.providers.openai import OpenAICompatibleProvider

__all__ = [
    "ChatProvider",
    "ChatRequest",
    "DemoProvider",
    "OpenAICompatibleProvider",
    "make_provider",
]


def make_provider(
    base_url: str | None, api_key: str | None, *, demo_window: int | None = None, **options: Any
) -> ChatProvider:
    """The configured provider, or the offline demo (with `demo_window`) when no base URL is set.

    `options` are `OpenAICompatibleProvider`'s keyword settings (timeouts, retries, backoff).
    """
    if not base_url or not base_url.strip():
        return DemoProvider(demo_window)
    return OpenAICompatibleProvider(base_url.strip(), api_key, **options)
