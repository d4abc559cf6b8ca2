"""A provider for any server that speaks OpenAI's streaming chat-completions API."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import replace
from typing import Any

import httpx

from bot.errors import (
    ConfigError,
    ContextOverflowError,
    ProviderProtocolError,
    ProviderRejected,
    RetryableFailure,
)
from bot.metrics import PROVIDER_RETRIES
from bot.providers.base import (
    PURPOSE_KEY,
    ChatRequest,
    Finish,
    ModelEvent,
    ProviderBlocks,
    ReasoningDelta,
    TextDelta,
    Usage,
    collect_text,
    tool_name,
)
from bot.providers.discovery import discover_window
from bot.providers.extra_content import PROVIDER, extra_content_blocks, with_extra_content
from bot.providers.http_failures import (
    broke_off,
    error_details,
    refused_message,
    retry_after_seconds,
    unavailable,
)
from bot.providers.overflow import overflow_numbers
from bot.providers.prompt_cache import chat_completions_usage
from bot.providers.reasoning import ContentDelta, ThinkSplitter
from bot.providers.sse import iter_event_batches
from bot.providers.tool_calls import ToolCallAssembler
from bot.retries import RetryPolicy, retrying_stream

log = logging.getLogger(__name__)

# The call's purpose travels as a header: real providers ignore it, and an unknown body field
# would make strict servers (OpenAI itself) reject the request.
PURPOSE_HEADER = "X-Chorus-Purpose"

# Providers agree on no code for "the prompt does not fit", so the error's code, type and
# message are searched (lower-cased) for the phrases OpenAI, Anthropic-style proxies, vLLM,
# llama.cpp and others use.
_OVERFLOW_MARKERS = (
    "context_length_exceeded",
    "exceed_context_size",
    "maximum model length",
    "context length",
    "context window",
    "context size",
    "too many tokens",
    "prompt is too long",
    "input is too long",
    "request too large",
)

# In-stream error objects rarely carry an HTTP status; their type says which one they mean.
# Anything unrecognised counts as a server failure, which is retried.
_STATUS_BY_ERROR_TYPE = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "overloaded_error": 503,
}

# How servers that cannot call tools refuse a request with `tools`: OpenAI-style 400s naming
# `tools` or `tool_choice` (vLLM without a tool parser, Ollama for models without tool
# support, 422s of strict proxies) and llama.cpp's 500 ("tools param requires --jinja flag").
_TOOLS_REFUSED_STATUSES = (400, 422, 500)
_NAMES_TOOLS = re.compile(r"\btools?\b|tool_choice|tool choice|function call", re.IGNORECASE)
# Gemini 3's refusal of one call sent back without its thought signature names a "function
# call" too, but the server takes tools: that request is refused, nothing is learned.
_NAMES_SIGNATURE = re.compile(r"thought_signature|thought signature", re.IGNORECASE)
# Servers that predate `stream_options` (or proxies that validate strictly) refuse it by name.
_NAMES_STREAM_OPTIONS = re.compile(r"stream_options|include_usage", re.IGNORECASE)

_SAMPLING_FIELDS = ("temperature", "top_p", "max_tokens")
# Where servers with a reasoning parser put a delta's thinking, in the order they are read.
REASONING_FIELDS = ("reasoning_content", "reasoning")
# /think levels as OpenAI's `reasoning_effort`: its reasoning models cannot stop thinking,
# so "off" asks for the least they do.
REASONING_EFFORT = {"off": "minimal", "low": "low", "high": "high"}
_MESSAGE_LIMIT = 300


class OpenAICompatibleProvider:
    """Streams chat completions from `{base_url}/chat/completions` with retries.

    Failures before anything of the answer arrived are retried (`max_retries` extra
    attempts, exponential backoff with jitter, `Retry-After` honoured) and end in
    `ProviderUnavailable`; a stream that breaks after text or a tool-call fragment raises
    `StreamInterrupted` carrying the text, since asking again could run a tool twice.
    A server that refuses `tools` is remembered per model: that model is asked without them.
    A call's `extra_content` (Gemini 3's thought signature) comes as the answer's
    `ProviderBlocks` and goes back on that call to the same model (`bot.providers.extra_content`).
    """

    name = PROVIDER

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        max_retries: int = 3,
        backoff_base: float = 0.5,
        max_backoff: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"The model base URL must start with http:// or https://, got {base_url!r}.")
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._read_timeout = read_timeout
        self._retries = RetryPolicy(max_retries, backoff_base, max_backoff, PROVIDER_RETRIES)
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout),
            transport=transport,
        )
        self._base_url = base_url
        # Models whose server answered a request with tools by refusing them.
        self._without_tools: set[str] = set()
        # Models whose server refused `stream_options`: their usage goes unreported.
        self._without_usage: set[str] = set()

    def left_out_settings(self, model: str) -> tuple[str, ...]:
        return ()

    def accepts_tools(self, model: str) -> bool:
        return model not in self._without_tools

    async def stream(self, request: ChatRequest) -> AsyncGenerator[ModelEvent, None]:
        headers = self._headers(request)
        answer = _Answer()
        attempts = retrying_stream(
            self._retries,
            lambda: self._attempt(request, headers, answer),
            started=lambda: answer.started,
            interrupted=lambda failure: broke_off(failure, "".join(answer.text)),
            exhausted=unavailable,
        )
        async with aclosing(attempts) as deltas:
            async for delta in deltas:
                yield delta
        for call in answer.tool_calls.calls():
            yield call
        if answer.usage is not None:
            yield answer.usage
        extra_contents = answer.tool_calls.extra_contents()
        if extra_contents:
            yield ProviderBlocks(PROVIDER, extra_content_blocks(extra_contents, request.model))
        yield Finish(answer.finish_reason)

    async def complete(self, request: ChatRequest) -> str:
        return await collect_text(self.stream(request))

    async def discover_window(self, model: str) -> int | None:
        """The context window the server states for `model` (see `bot.providers.discovery`)."""
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        return await discover_window(self._client, self._base_url, model, headers)

    def _asks_usage(self, model: str) -> bool:
        return model not in self._without_usage

    async def aclose(self) -> None:
        await self._client.aclose()

    def _headers(self, request: ChatRequest) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        if request.purpose:
            headers[PURPOSE_HEADER] = request.purpose
        return headers

    async def _read_stream(
        self, body: bytes, headers: dict[str, str], answer: _Answer, *, with_tools: bool
    ) -> AsyncGenerator[ContentDelta, None]:
        """One attempt, its text and thinking as they come and the rest into `answer`.

        Raises `RetryableFailure` for anything another attempt could fix.
        """
        try:
            async with self._client.stream("POST", self._url, content=body, headers=headers) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise _failure_for_response(
                        response, with_tools=with_tools, with_usage=_asked_usage(body), secret=self._api_key
                    )
                if _is_json(response):
                    # A server that ignores `stream` answers with one whole completion.
                    await response.aread()
                    for delta in answer.take_completion(response.text):
                        yield delta
                    return
                async for batch in iter_event_batches(response.aiter_text()):
                    # The tokens of one chunk go on as one delta of each kind in turn.
                    pieces: list[ContentDelta] = []
                    done = False
                    failure: Exception | None = None
                    for data in batch:
                        if data == "[DONE]":
                            done = True
                            break
                        try:
                            pieces += answer.take_chunk(data)
                        except Exception as error:
                            failure = error
                            break
                    # What came before [DONE] or a failing event is still the reply's.
                    for delta in merged(pieces):
                        yield delta
                    if failure is not None:
                        raise failure
                    if done:
                        break
        except httpx.TransportError as error:
            # After finish_reason the reply is complete; a lost [DONE] costs nothing.
            if not answer.finished:
                kind = "timeout" if isinstance(error, httpx.TimeoutException) else "unreachable"
                raise RetryableFailure(self._describe(error), busy=False, kind=kind) from error
        if not answer.finished:
            raise RetryableFailure("the stream ended before the reply was complete", busy=False)

    def _describe(self, error: httpx.TransportError) -> str:
        if isinstance(error, httpx.ReadTimeout):
            return f"no answer within {self._read_timeout:g} seconds"
        if isinstance(error, httpx.ConnectTimeout | httpx.ConnectError):
            return "could not connect"
        return "the connection dropped"

    async def _attempt(
        self, request: ChatRequest, headers: dict[str, str], answer: _Answer
    ) -> AsyncGenerator[ContentDelta, None]:
        """One attempt; a server that refuses tools or `stream_options` is asked again without them.

        Those two are what the server cannot take, not failures: they are learned for the
        model and cost no retry.
        """
        while True:
            if request.tools and not self.accepts_tools(request.model):
                request = replace(request, tools=(), tool_choice=None)
            body = encode_body(request, usage=self._asks_usage(request.model))
            try:
                async with aclosing(
                    self._read_stream(body, headers, answer, with_tools=bool(request.tools))
                ) as deltas:
                    async for delta in deltas:
                        yield delta
                return
            except _ToolsRefused as refusal:
                self._without_tools.add(request.model)
                log.warning(
                    "The model server refused tools for %s (%s); it is asked without them from now on.",
                    request.model,
                    refusal,
                )
            except _UsageRefused as refusal:
                self._without_usage.add(request.model)
                log.info("The model server refused stream_options for %s (%s).", request.model, refusal)


class _Answer:
    """What one answer brought so far, across the attempts of one request."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thought = False
        self.tool_calls = ToolCallAssembler()
        self.finish_reason: str | None = None
        self.finished = False
        self.usage: Usage | None = None
        self._usage: dict[str, Any] = {}
        self._timings: dict[str, Any] = {}
        self._content = ThinkSplitter()

    @property
    def started(self) -> bool:
        # Thinking counts: asking again would stream it to the person a second time.
        return bool(self.text) or self.thought or self.tool_calls.started

    def take_chunk(self, data: str) -> list[ContentDelta]:
        """A stream chunk: its text and thinking are returned, its tool-call fragments and finish kept."""
        payload = _payload(data)
        choices = payload.get("choices")
        self._take_usage(payload)
        # With stream_options.include_usage the last chunk carries usage and no choices.
        if choices == [] and "usage" in payload:
            return []
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _protocol_error(data)
        delta = choices[0].get("delta") or {}
        if not isinstance(delta, dict):
            raise _protocol_error(data)
        self.tool_calls.add(delta.get("tool_calls"))
        deltas = self._take_content(delta, data)
        return deltas + self._finish(choices[0].get("finish_reason"))

    def take_completion(self, data: str) -> list[ContentDelta]:
        """A whole (non-streamed) completion: its text and thinking are returned, its tool calls kept."""
        payload = _payload(data)
        choices = payload.get("choices")
        self._take_usage(payload)
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise _protocol_error(data)
        message = choices[0].get("message") or {}
        if not isinstance(message, dict):
            raise _protocol_error(data)
        self.tool_calls.add_whole(message)
        deltas = self._take_content(message, data)
        return deltas + self._finish(choices[0].get("finish_reason") or "stop")

    def _take_usage(self, payload: dict[str, Any]) -> None:
        """The server's own count of the call (OpenAI's `usage`, llama.cpp's `timings`), when sent."""
        usage = payload.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        timings = payload.get("timings")
        if isinstance(timings, dict):
            self._timings = timings
        self.usage = chat_completions_usage(self._usage, self._timings)

    def _take_content(self, message: dict[str, Any], data: str) -> list[ContentDelta]:
        """The thinking a server parsed out (`reasoning_content`: llama.cpp, DeepSeek;
        `reasoning`: vLLM, OpenRouter), then the content, split at any `<think>` in it."""
        deltas: list[ContentDelta] = []
        for name in REASONING_FIELDS:
            reasoning = message.get(name)
            if reasoning is not None and not isinstance(reasoning, str):
                raise _protocol_error(data)
            if reasoning:
                deltas.append(ReasoningDelta(reasoning))
                break
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise _protocol_error(data)
        if content:
            deltas += self._content.feed(content)
        return self._took(deltas)

    def _finish(self, reason: object) -> list[ContentDelta]:
        if reason is None:
            return []
        self.finished = True
        self.finish_reason = str(reason)
        return self._took(self._content.close())

    def _took(self, deltas: list[ContentDelta]) -> list[ContentDelta]:
        for delta in deltas:
            if isinstance(delta, TextDelta):
                self.text.append(delta.text)
            else:
                self.thought = True
        return deltas


def merged(deltas: list[ContentDelta]) -> list[ContentDelta]:
    """Neighbouring deltas of one kind joined: the tokens of one network read go on together."""
    joined: list[ContentDelta] = []
    for delta in deltas:
        if joined and type(joined[-1]) is type(delta):
            joined[-1] = type(delta)(joined[-1].text + delta.text)
        else:
            joined.append(delta)
    return joined


def _payload(data: str) -> dict[str, Any]:
    try:
        payload = json.loads(data)
    except json.JSONDecodeError as error:
        raise _protocol_error(data) from error
    if not isinstance(payload, dict):
        raise _protocol_error(data)
    if "error" in payload:
        raise _failure_for_error_object(payload["error"])
    return payload


def _is_json(response: httpx.Response) -> bool:
    content_type = str(response.headers.get("content-type", ""))
    return content_type.split(";")[0].strip() == "application/json"


def encode_body(request: ChatRequest, *, usage: bool = True) -> bytes:
    """The request body; identical requests give identical bytes (tests and caches rely on it).

    Tools are sorted by name, so the same tools give the same bytes whatever order they
    were gathered in. Provider blocks stay out of the messages; a call gets back only the
    `extra_content` this model attached to it. `request.extra` adds fields, but never
    overrides the request's own. `usage` asks the server to end the stream with its token
    count, which calibrates Chorus's own (`bot.windows`).
    """
    body: dict[str, Any] = {
        "model": request.model,
        "messages": [with_extra_content(message, request.model) for message in request.messages],
        "stream": True,
    }
    if usage:
        # The last chunk then says what the call cost, prompt cache included.
        body["stream_options"] = {"include_usage": True}
    for name in _SAMPLING_FIELDS:
        value = getattr(request, name)
        if value is not None:
            body[name] = value
    if request.thinking is not None:
        body["reasoning_effort"] = REASONING_EFFORT[request.thinking]
    if request.tools:
        body["tools"] = sorted(request.tools, key=tool_name)
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
    for name, value in request.extra.items():
        if name != PURPOSE_KEY and name not in body:
            body[name] = value
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


class _ToolsRefused(Exception):
    """The server refused the request because it holds `tools`; the message says how."""


class _UsageRefused(Exception):
    """The server refused the request because it asks for usage (`stream_options`)."""


def _asked_usage(body: bytes) -> bool:
    return b'"stream_options":' in body


def _protocol_error(data: str) -> ProviderProtocolError:
    return ProviderProtocolError(
        "The model provider sent a reply Chorus cannot read "
        f"(unexpected stream data {data[:80]!r}). Try again, or check the provider."
    )


def _failure_for_response(
    response: httpx.Response, *, with_tools: bool, with_usage: bool, secret: str | None
) -> Exception:
    try:
        payload: Any = response.json()
    except ValueError:
        payload = response.text
    message, code = error_details(payload)
    # Servers echo a refused key in their message ("Incorrect API key provided: sk-…"); people never see it.
    if secret:
        message = message.replace(secret, "[key]")
    refusable = response.status_code in _TOOLS_REFUSED_STATUSES
    if with_usage and refusable and _NAMES_STREAM_OPTIONS.search(message):
        return _UsageRefused(message[:_MESSAGE_LIMIT])
    if with_tools and refusable and _NAMES_TOOLS.search(message) and not _NAMES_SIGNATURE.search(message):
        return _ToolsRefused(message[:_MESSAGE_LIMIT])
    retry_after = retry_after_seconds(response.headers.get("Retry-After"))
    return _failure_for_status(
        response.status_code, message or response.reason_phrase, code, retry_after, _error_object(payload)
    )


def _error_object(payload: Any) -> dict[str, Any] | None:
    error = payload.get("error") if isinstance(payload, dict) else None
    return error if isinstance(error, dict) else None


def _failure_for_error_object(error: Any) -> Exception:
    details = error if isinstance(error, dict) else {"message": str(error)}
    message, code = error_details(details)
    status = details.get("status") or details.get("code")
    if not isinstance(status, int):
        status = _STATUS_BY_ERROR_TYPE.get(str(details.get("type")), 500)
    return _failure_for_status(status, message or "error in the reply stream", code, None, details)


def _failure_for_status(
    status: int, message: str, code: str, retry_after: float | None, details: dict[str, Any] | None = None
) -> Exception:
    searchable = f"{code} {message}".lower()
    if status == 413 or any(marker in searchable for marker in _OVERFLOW_MARKERS):
        return ContextOverflowError(
            f"The conversation is too long for the model's context window ({message[:_MESSAGE_LIMIT]}).",
            overflow_numbers(message, details),
        )
    message = message[:_MESSAGE_LIMIT]
    # OpenAI answers 429 both for "slow down" and for "out of credit"; only the first passes.
    if status == 429 and "insufficient_quota" in searchable:
        return ProviderRejected(refused_message(None, message), reason="payment")
    if status in (408, 429) or status >= 500:
        kind = "server_error" if status >= 500 else "timeout" if status == 408 else "rate_limited"
        return RetryableFailure(f"HTTP {status}", busy=True, retry_after=retry_after, kind=kind)
    return ProviderRejected(refused_message(status, message), reason="payment" if status == 402 else None)
