"""A provider wrapper that counts tokens and errors and remembers the recent errors.

The runtime wraps whichever provider it built, so every model call (turns, summaries,
memory distillation) is counted the same way. The recent errors are what the operator's
health page shows: when, which kind, and the message the person chatting was given.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.errors import ProviderError
from bot.metrics import MODEL_PROMPT_TOKENS, PROVIDER_ERRORS, TOKENS
from bot.providers.base import ChatProvider, ChatRequest, ModelEvent, TextDelta, ToolCall, Usage
from transcript import count_message_tokens, count_tokens

RECENT_ERRORS = 20


@dataclass(frozen=True)
class ProviderFailure:
    at: datetime
    kind: str  # the error class, e.g. ProviderUnavailable, ContextOverflowError
    message: str
    purpose: str | None  # None for a chat turn, "summary" for compaction …


class ObservedProvider:
    def __init__(self, inner: ChatProvider) -> None:
        self.inner = inner
        self.name = inner.name
        self.recent_errors: deque[ProviderFailure] = deque(maxlen=RECENT_ERRORS)

    async def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]:
        _count_in(request)
        received: list[str] = []
        try:
            async with aclosing(self.inner.stream(request)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        received.append(event.text)
                    elif isinstance(event, ToolCall):
                        received.append(event.name + event.arguments)
                    elif isinstance(event, Usage):
                        _count_billed(event)
                    yield event
        except ProviderError as error:
            self._failed(request, error)
            raise
        finally:
            _count_out("".join(received))

    async def complete(self, request: ChatRequest) -> str:
        _count_in(request)
        try:
            text = await self.inner.complete(request)
        except ProviderError as error:
            self._failed(request, error)
            raise
        _count_out(text)
        return text

    def accepts_tools(self, model: str) -> bool:
        return self.inner.accepts_tools(model)

    async def aclose(self) -> None:
        await self.inner.aclose()

    def _failed(self, request: ChatRequest, error: ProviderError) -> None:
        kind = type(error).__name__
        PROVIDER_ERRORS.labels(kind).inc()
        self.recent_errors.append(ProviderFailure(datetime.now(UTC), kind, str(error), request.purpose))


def _count_in(request: ChatRequest) -> None:
    # A turn's request was counted while its context was built; counting again costs a full
    # tokenisation of the window on every turn.
    tokens = request.prompt_tokens
    if tokens is None:
        tokens = sum(count_message_tokens(message) for message in request.messages)
        tokens += sum(count_tokens(json.dumps(tool, ensure_ascii=False)) for tool in request.tools)
    TOKENS.labels("in").inc(tokens)


def _count_billed(usage: Usage) -> None:
    uncached = usage.prompt_tokens - usage.cached_tokens - usage.cache_write_tokens
    MODEL_PROMPT_TOKENS.labels("read").inc(usage.cached_tokens)
    MODEL_PROMPT_TOKENS.labels("write").inc(usage.cache_write_tokens)
    MODEL_PROMPT_TOKENS.labels("none").inc(max(uncached, 0))


def _count_out(text: str) -> None:
    if text:
        TOKENS.labels("out").inc(count_tokens(text))
