"""A provider for Anthropic's Messages API, on the official `anthropic` SDK, with prompt caching."""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import AsyncGenerator
from contextlib import aclosing
from typing import Any

import anthropic

from bot.errors import (
    ConfigError,
    ContextOverflowError,
    OverflowNumbers,
    ProviderRejected,
    RetryableFailure,
)
from bot.metrics import PROVIDER_RETRIES
from bot.providers.anthropic_messages import (
    DEFAULT_BASE_URL,
    PROVIDER,
    SAMPLING_SETTINGS,
    request_params,
    sendable_params,
)
from bot.providers.base import (
    ChatRequest,
    Finish,
    ModelEvent,
    ProviderBlocks,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    Usage,
    collect_text,
)
from bot.providers.http_failures import broke_off, refused_message, retry_after_seconds, unavailable
from bot.providers.prompt_cache import messages_usage
from bot.retries import RetryPolicy, retrying_stream

# The Messages API's stop reasons in the words Chorus (and OpenAI) use.
_FINISH_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}

# "prompt is too long: 208310 tokens > 200000 maximum"
_TOO_LONG = re.compile(r"prompt is too long: (\d+) tokens > (\d+) maximum", re.IGNORECASE)

# Error types another attempt may fix (an error event inside a stream has no HTTP status).
_BUSY_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error"})

_MESSAGE_LIMIT = 300

log = logging.getLogger(__name__)


class AnthropicProvider:
    """Streams Messages API answers; retries like `OpenAICompatibleProvider`.

    429 and 529 (overloaded) answers and lost connections before anything of the answer
    arrived are retried (`Retry-After` honoured), then end in `ProviderUnavailable`; a
    stream that breaks after text raises `StreamInterrupted`. Requests mark their stable
    prefix for the prompt cache (`cache=False` turns that off, for comparisons).
    """

    name = PROVIDER

    def __init__(
        self,
        api_key: str | None,
        *,
        base_url: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        max_backoff: float = 30.0,
        cache: bool = True,
    ) -> None:
        base_url = (base_url or DEFAULT_BASE_URL).strip()
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"The model base URL must start with http:// or https://, got {base_url!r}.")
        if not api_key:
            raise ConfigError(
                "model.provider is anthropic but no API key is set: set model.api_key "
                "(for example ${ANTHROPIC_API_KEY}) or CHORUS_MODEL_API_KEY."
            )
        # The SDK's own retries are off: these retries count in metrics and stop once text came.
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url.rstrip("/"),
            max_retries=0,
            timeout=anthropic.Timeout(read_timeout, connect=connect_timeout),
        )
        self._api_key = api_key
        self._read_timeout = read_timeout
        self._retries = RetryPolicy(max_retries, backoff_base, max_backoff, PROVIDER_RETRIES)
        self._cache = cache
        # What this SDK's `messages.create` takes (versions differ: 2.17 has no temperature):
        # anything else raises TypeError in the SDK, before a request is sent.
        self._accepted = frozenset(inspect.signature(self._client.messages.create).parameters)
        self._said_left_out: set[str] = set()

    def accepts_tools(self, model: str) -> bool:
        return True

    def left_out_settings(self, model: str) -> tuple[str, ...]:
        return tuple(name for name in SAMPLING_SETTINGS if name not in self._accepted)

    async def discover_window(self, model: str) -> int | None:
        # The Models API names no window; the first "prompt is too long: N tokens > M
        # maximum" teaches it (bot.windows).
        return None

    async def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]:
        params, left_out = sendable_params(request_params(request, cache=self._cache), self._accepted)
        self._say_left_out(left_out)
        # Each attempt reads into an answer of its own; the last one is the reply.
        answers: list[_Answer] = []

        def attempt() -> AsyncGenerator[ModelEvent, None]:
            answers.append(_Answer())
            return self._read_stream(params, answers[-1])

        async with aclosing(
            retrying_stream(
                self._retries,
                attempt,
                started=lambda: answers[-1].started,
                interrupted=lambda failure: broke_off(failure, "".join(answers[-1].text)),
                exhausted=unavailable,
            )
        ) as events:
            async for event in events:
                yield event
        answer = answers[-1]
        for call in answer.tool_calls():
            yield call
        if answer.usage is not None:
            yield answer.usage
        if answer.has_thinking:
            yield ProviderBlocks(PROVIDER, answer.blocks())
        yield Finish(answer.finish_reason)

    async def complete(self, request: ChatRequest) -> str:
        return await collect_text(self.stream(request))

    async def aclose(self) -> None:
        await self._client.close()

    def _say_left_out(self, names: list[str]) -> None:
        """Logs each setting the SDK cannot send, once a process (/status names them too)."""
        for name in names:
            if name not in self._said_left_out:
                self._said_left_out.add(name)
                log.warning(
                    "The installed anthropic SDK (%s) takes no %r in messages.create: requests go without.",
                    anthropic.__version__,
                    name,
                )

    async def _read_stream(self, params: dict[str, Any], answer: _Answer) -> AsyncGenerator[ModelEvent, None]:
        """One attempt: its text and thinking as they come, the rest into `answer`."""
        try:
            events = await self._client.messages.create(**params, stream=True)
            async with events:
                async for event in events:
                    if (delta := answer.take(event)) is not None:
                        yield delta
        except anthropic.APIStatusError as error:
            raise _failure_for_status(error, secret=self._api_key) from error
        except anthropic.APITimeoutError as error:
            raise RetryableFailure(
                f"no answer within {self._read_timeout:g} seconds", busy=False, kind="timeout"
            ) from error
        except anthropic.APIConnectionError as error:
            raise RetryableFailure("the connection dropped", busy=False) from error
        if not answer.finished:
            raise RetryableFailure("the stream ended before the reply was complete", busy=False)


class _Answer:
    """One attempt's answer, block by block as the stream builds it."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self._blocks: dict[int, dict[str, Any]] = {}
        self._json: dict[int, list[str]] = {}
        self._usage: dict[str, int] = {}
        self.stop_reason: str | None = None
        self.finished = False

    @property
    def started(self) -> bool:
        return bool(self.text) or any(block["type"] == "tool_use" for block in self._blocks.values())

    @property
    def has_thinking(self) -> bool:
        return any(block["type"] in ("thinking", "redacted_thinking") for block in self._blocks.values())

    @property
    def finish_reason(self) -> str | None:
        return _FINISH_REASONS.get(self.stop_reason or "", self.stop_reason)

    @property
    def usage(self) -> Usage | None:
        return messages_usage(self._usage)

    def take(self, event: Any) -> TextDelta | ReasoningDelta | None:
        """Keeps what `event` adds; returns the text or thinking it carries, if any."""
        kind = event.type
        if kind == "message_start":
            self._add_usage(event.message.usage)
        elif kind == "content_block_start":
            block = event.content_block.model_dump(exclude_none=True)
            block.pop("citations", None)
            self._blocks[event.index] = block
        elif kind == "content_block_delta":
            return self._take_delta(event.index, event.delta)
        elif kind == "message_delta":
            self.stop_reason = event.delta.stop_reason or self.stop_reason
            self._add_usage(event.usage)
        elif kind == "message_stop":
            self.finished = True
        return None

    def _take_delta(self, index: int, delta: Any) -> TextDelta | ReasoningDelta | None:
        block = self._blocks.setdefault(index, {"type": "text", "text": ""})
        if delta.type == "text_delta":
            block["text"] = block.get("text", "") + delta.text
            self.text.append(delta.text)
            return TextDelta(delta.text)
        if delta.type == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.thinking
            return ReasoningDelta(delta.thinking)
        if delta.type == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.signature
        elif delta.type == "input_json_delta":
            self._json.setdefault(index, []).append(delta.partial_json)
        return None

    def _add_usage(self, usage: Any) -> None:
        # message_delta's counts are cumulative: the newest non-empty value is the total.
        for key in (
            "input_tokens",
            "output_tokens",
            "cache_read_input_tokens",
            "cache_creation_input_tokens",
        ):
            value = getattr(usage, key, None)
            if value is not None:
                self._usage[key] = int(value)

    def _arguments(self, index: int) -> str:
        text = "".join(self._json.get(index, ()))
        return text or json.dumps(self._blocks[index].get("input") or {})

    def tool_calls(self) -> list[ToolCall]:
        return [
            ToolCall(block["id"], block["name"], self._arguments(index))
            for index, block in sorted(self._blocks.items())
            if block["type"] == "tool_use"
        ]

    def blocks(self) -> list[dict[str, Any]]:
        """The answer's content blocks as the API wants them back (tool inputs parsed)."""
        blocks = []
        for index, block in sorted(self._blocks.items()):
            if block["type"] == "tool_use":
                try:
                    block = {**block, "input": json.loads(self._arguments(index))}
                except ValueError:
                    block = {**block, "input": {}}
            blocks.append(block)
        return blocks


def _failure_for_status(error: anthropic.APIStatusError, *, secret: str) -> Exception:
    status = error.status_code
    # A server may echo a refused key in its message; people never see it.
    message = str(error.api_message or error.message).replace(secret, "[key]")[:_MESSAGE_LIMIT]
    if (too_long := _TOO_LONG.search(message)) is not None or status == 413:
        numbers = (
            OverflowNumbers(window=int(too_long.group(2)), requested=int(too_long.group(1)))
            if too_long is not None
            else None
        )
        return ContextOverflowError(
            f"The conversation is too long for the model's context window ({message}).", numbers
        )
    # An error event inside a 200 stream says only its type.
    if status in (429, 529) or status >= 500 or error.type in _BUSY_TYPES:
        retry_after = retry_after_seconds(error.response.headers.get("retry-after"))
        label = error.type or f"HTTP {status}"
        kind = "rate_limited" if status == 429 or error.type == "rate_limit_error" else "server_error"
        return RetryableFailure(label, busy=True, retry_after=retry_after, kind=kind)
    return ProviderRejected(
        refused_message(status, message),
        reason="payment" if status == 402 or error.type == "billing_error" else None,
    )
