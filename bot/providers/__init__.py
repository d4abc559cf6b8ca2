"""Model providers: turn a `ChatRequest` into a stream of reply text.

The runtime builds one provider (`router.make_router`: every key and fallback endpoint
behind one `ChatProvider`, or the offline demo) and the engine and compaction use the
`ChatProvider` protocol; failures surface as `bot.errors.ProviderError` subclasses with
messages fit for the person chatting. Providers know nothing of sessions, storage or lanes,
and never retry or fail over a stream that already produced text: that belongs to the engine.
"""

from __future__ import annotations

from bot.providers.base import ChatProvider, ChatRequest
from bot.providers.demo import DemoProvider
from bot.providers.openai import OpenAICompatibleProvider

__all__ = [
    "ChatProvider",
    "ChatRequest",
    "DemoProvider",
    "OpenAICompatibleProvider",
]
