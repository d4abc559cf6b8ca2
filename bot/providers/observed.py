"""A provider wrapper that counts tokens and errors, remembers the recent errors, and
teaches each model's window what its answers and overflows say.

The runtime wraps whichever provider it built, so every model call (turns, summaries,
memory distillation) is counted the same way, and every one of them calibrates the
model's count (`usage.prompt_tokens`) or, overflowing, stores the window the server named.
The recent errors are what the operator's health page shows: when, which kind, and the
message the person chatting was given.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime

from bot.errors import ContextOverflowError, OverflowNumbers, ProviderError
from bot.metrics import MODEL_PROMPT_TOKENS, PROMPT_REUSE_TOKENS, PROVIDER_ERRORS, TOKENS
from bot.providers.base import (
    ChatProvider,
    ChatRequest,
    ModelEvent,
    ReasoningDelta,
    Served,
    TextDelta,
    ToolCall,
    Usage,
)
from bot.windows import ModelWindows
from transcript import count_message_tokens, count_tokens

log = logging.getLogger(__name__)

RECENT_ERRORS = 20


@dataclass(frozen=True)
class ProviderFailure:
    at: datetime
    kind: str  # the error class, e.g. ProviderUnavailable, ContextOverflowError
    message: str
    purpose: str | None  # None for a chat turn, "summary" for compaction …


class ObservedProvider:
    def __init__(self, inner: ChatProvider, windows: ModelWindows) -> None:
        self.inner = inner
        self.name = inner.name
        self.windows = windows
        self.recent_errors: deque[ProviderFailure] = deque(maxlen=RECENT_ERRORS)

    async def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]:
        counted = _count_in(request)
        received: list[str] = []
        thought: list[str] = []
        # The model that answers: a fallback's when the router named one (`Served`).
        answering = request.model
        try:
            async with aclosing(self.inner.stream(request)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        received.append(event.text)
                    elif isinstance(event, ToolCall):
                        received.append(event.name + event.arguments)
                    elif isinstance(event, ReasoningDelta):
                        thought.append(event.text)
                    elif isinstance(event, Served):
                        answering = event.model
                        self.windows.answered_by(request.model, answering)
                    elif isinstance(event, Usage):
                        _count_billed(event)
                        await self._calibrate(answering, counted, event.prompt_tokens)
                    yield event
        except ContextOverflowError as error:
            await self._overflowed(request, error, counted)
            raise
        except ProviderError as error:
            self._failed(request, error)
            raise
        finally:
            _count_out("".join(received))
            _count_out("".join(thought), "reasoning")

    async def complete(self, request: ChatRequest) -> str:
        counted = _count_in(request)
        try:
            text = await self.inner.complete(request)
        except ContextOverflowError as error:
            await self._overflowed(request, error, counted)
            raise
        except ProviderError as error:
            self._failed(request, error)
            raise
        _count_out(text)
        return text

    def accepts_tools(self, model: str) -> bool:
        return self.inner.accepts_tools(model)

    def left_out_settings(self, model: str) -> tuple[str, ...]:
        return self.inner.left_out_settings(model)

    async def discover_window(self, model: str) -> int | None:
        return await self.inner.discover_window(model)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def _calibrate(self, model: str, counted: int, served: int) -> None:
        # A lesson that cannot be stored now is learned from a later answer; the turn goes on.
        try:
            await self.windows.observe(model, counted, served)
        except Exception:
            log.warning("Could not store the token count of %s's answer.", model, exc_info=True)

    async def _overflowed(self, request: ChatRequest, error: ContextOverflowError, counted: int) -> None:
        # Summaries and distillation learn as turns do: their next call is fitted too.
        self._failed(request, error)
        numbers = error.numbers or OverflowNumbers(window=None, requested=None)
        # A fallback's refusal teaches the fallback's model, never the one the request named.
        refused = error.model or request.model
        self.windows.answered_by(request.model, refused)
        try:
            await self.windows.learn_overflow(refused, numbers, counted)
        except Exception:
            # The overflow itself is what the caller must hear of; the lesson waits for the next.
            log.warning("Could not store the window %s's overflow named.", refused, exc_info=True)

    def _failed(self, request: ChatRequest, error: ProviderError) -> None:
        kind = type(error).__name__
        PROVIDER_ERRORS.labels(kind).inc()
        self.recent_errors.append(ProviderFailure(datetime.now(UTC), kind, str(error), request.purpose))


def _count_in(request: ChatRequest) -> int:
    """The request's size in Chorus's tokens, counted into the metrics."""
    # A turn's request was counted while its context was built; counting again costs a full
    # tokenisation of the window on every turn.
    tokens = request.prompt_tokens
    if tokens is None:
        tokens = sum(count_message_tokens(message) for message in request.messages)
        tokens += sum(count_tokens(json.dumps(tool, ensure_ascii=False)) for tool in request.tools)
    TOKENS.labels("in").inc(tokens)
    return tokens


def _count_billed(usage: Usage) -> None:
    if usage.cached_tokens is None or usage.evaluated_tokens is None:
        MODEL_PROMPT_TOKENS.labels("unknown").inc(usage.prompt_tokens)
        PROMPT_REUSE_TOKENS.labels("unknown").inc(usage.prompt_tokens)
        return
    uncached = usage.evaluated_tokens - usage.cache_write_tokens
    MODEL_PROMPT_TOKENS.labels("read").inc(usage.cached_tokens)
    MODEL_PROMPT_TOKENS.labels("write").inc(usage.cache_write_tokens)
    MODEL_PROMPT_TOKENS.labels("none").inc(max(uncached, 0))
    PROMPT_REUSE_TOKENS.labels("reused").inc(usage.cached_tokens)
    PROMPT_REUSE_TOKENS.labels("evaluated").inc(usage.evaluated_tokens)


def _count_out(text: str, direction: str = "out") -> None:
    """Received tokens; the model's thinking is counted apart, as direction "reasoning"."""
    if text:
        TOKENS.labels(direction).inc(count_tokens(text))
