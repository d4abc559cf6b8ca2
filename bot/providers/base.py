"""What the engine needs from a model provider."""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

# `extra["purpose"]` tells Chorus what a call is for (e.g. SUMMARY_PURPOSE for compaction).
# It describes the call to Chorus, not to the model, so providers never put it in the body.
PURPOSE_KEY = "purpose"
SUMMARY_PURPOSE = "summary"


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions call: OpenAI-format messages plus sampling settings."""

    messages: list[dict[str, Any]]
    model: str
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    # The persona speaking this turn; the demo provider names it in its reply.
    persona_id: str | None = None
    persona_name: str | None = None
    # The messages' tokens as the context builder already counted them (for metrics);
    # None makes whoever needs the number count it.
    prompt_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def purpose(self) -> str | None:
        """What the caller uses this call for, such as `SUMMARY_PURPOSE`; None for a chat turn."""
        return self.extra.get(PURPOSE_KEY)


class ChatProvider(Protocol):
    """Streams a reply as text deltas; raises `bot.errors.ProviderError` subclasses."""

    name: str

    def stream(self, request: ChatRequest) -> AsyncGenerator[str, None]: ...

    async def complete(self, request: ChatRequest) -> str: ...

    async def aclose(self) -> None: ...


async def collect_text(deltas: AsyncIterator[str]) -> str:
    """Joins a reply stream into one string; how every provider implements `complete`."""
    return "".join([delta async for delta in deltas])


def shown_model(provider: ChatProvider, model: str) -> str:
    """The model as /status and /context name it: the offline demo model names itself."""
    return "demo" if provider.name == "demo" else model
