"""A real OpenAI-compatible HTTP server on 127.0.0.1 that tests script request by request.

    async with FakeOpenAI() as server:
        server.script(rate_limited(retry_after="0"), "hello there")
        provider = OpenAICompatibleProvider(server.base_url, "test-key")
        ...
        assert server.requests[1].json["messages"][-1]["content"] == "hi"

Asked for usage (`stream_options.include_usage`), it ends a stream with a chunk of no
choices and `usage` as OpenAI does: `prompt_tokens` a token per four characters of the
tools and messages, `prompt_tokens_details.cached_tokens` the part of that prefix an
earlier request already sent (automatic prefix caching, without OpenAI's 1,024-token floor).
`server.usage_shape` speaks another server's words for the same numbers: "llama.cpp" (no
details; `timings` with `cache_n` reused and `prompt_n` evaluated on the stream's last chunk,
asked for usage or not), "deepseek" (`prompt_cache_hit_tokens` / `prompt_cache_miss_tokens`)
or "bare" (`usage` without a word on the cache, as vLLM without prompt token details).
Each answered `usage` is kept in `server.usages` with the request body it answered, in order.

Each chat request takes the next scripted response; with the script empty, `server.default`
(or `server.summary` for summary calls) turns the parsed request body into reply text. Every
chat request is recorded in order, raw body bytes included (other requests, such as a
provider asking `/v1/models` for the model's window, in `other_requests`). Suites get a
server per test with the `fake_openai` fixture, after this line in their conftest.py:
`from tests.fakes.openai_server import fake_openai_fixture  # noqa: F401`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

import pytest_asyncio
from aiohttp import web

from bot.providers.base import SUMMARY_PURPOSE
from bot.providers.openai import PURPOSE_HEADER
from tests.support.local_server import LocalServer

Responder = Callable[[dict[str, Any]], "str | Scripted"]


@dataclass(frozen=True)
class Reply:
    """A normal answer; streamed in `chunks` (default: word by word), `delay` before each.

    `reasoning` is thinking a server's reasoning parser sends before the text, word by word
    in the delta field `reasoning_field` ("reasoning_content": llama.cpp, DeepSeek;
    "reasoning": vLLM, OpenRouter). Thinking inside the content (`<think>`) goes in `text`.
    """

    text: str
    chunks: list[str] | None = None
    delay: float = 0.0
    finish_reason: str = "stop"
    reasoning: str = ""
    reasoning_field: str = "reasoning_content"


@dataclass(frozen=True)
class HttpError:
    """An error status; a dict `body` is sent as JSON, a str as plain text."""

    status: int
    body: dict[str, Any] | str = ""
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Sends `after_text` (if any), then nothing for `seconds`, then drops the connection."""

    seconds: float = 30.0
    after_text: str = ""


@dataclass(frozen=True)
class Malformed:
    """Sends `after_text` (if any), then an event whose data is `data` (not a valid chunk)."""

    data: str = "{this is not json"
    after_text: str = ""


@dataclass(frozen=True)
class Drop:
    """Sends `after_text`, then cuts the connection; `clean=True` ends the body normally
    instead, but still without a finish_reason or [DONE]."""

    after_text: str
    clean: bool = False


@dataclass(frozen=True)
class StreamError:
    """Sends `after_text` (if any), then `data: {"error": error}` inside a 200 stream."""

    error: dict[str, Any]
    after_text: str = ""


@dataclass(frozen=True)
class ToolCalls:
    """An answer that calls tools, sent the way the Chat Completions API sends one.

    Streamed: `text` first (if any), then each call's first fragment with `id`, `type`
    and `function.name`, then its `function.arguments` in pieces of `piece_chars`; with
    `interleave` the pieces of parallel calls alternate (index 0, 1, 0, 1 …), as some
    servers send them. Then `finish_reason` ("tool_calls"). Not streamed: one message
    with `tool_calls`. `after_pieces` cuts the connection after that many argument pieces.
    `extra_content` holds each call's object of that name, in order, as Gemini 3 signs its
    calls (sent with the call's first fragment; None, or no entry: the call has none).
    """

    calls: list[tuple[str, dict[str, Any] | str]]
    text: str = ""
    piece_chars: int = 5
    interleave: bool = True
    finish_reason: str = "tool_calls"
    after_pieces: int | None = None
    extra_content: tuple[dict[str, Any] | None, ...] = ()

    def call_id(self, index: int) -> str:
        return f"call_{index}_{self.calls[index][0]}"

    def arguments(self, index: int) -> str:
        arguments = self.calls[index][1]
        return arguments if isinstance(arguments, str) else json.dumps(arguments)

    def call_fields(self, index: int) -> dict[str, Any]:
        """The call's `id`, `type` and any `extra_content`: its first fragment and whole call carry them."""
        fields: dict[str, Any] = {"id": self.call_id(index), "type": "function"}
        if index < len(self.extra_content) and self.extra_content[index] is not None:
            fields["extra_content"] = self.extra_content[index]
        return fields


@dataclass(frozen=True)
class Writes:
    """The stream's body exactly as the server writes it: each str is one write, so one HTTP
    chunk on the wire (build them from `FakeOpenAI.event` and `FakeOpenAI.finish`, or cut an
    event in two); at an `asyncio.Event` the server waits until the test sets it."""

    parts: tuple[str | asyncio.Event, ...]


Scripted = Reply | HttpError | Hang | Malformed | Drop | StreamError | ToolCalls | Writes


def rate_limited(retry_after: str | None = "0") -> HttpError:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return HttpError(429, _error_body("Rate limit reached", "rate_limit_exceeded", "requests"), headers)


def overloaded() -> HttpError:
    """529, what Anthropic (and proxies in front of it) answer when the model is overloaded."""
    return HttpError(529, _error_body("Overloaded", "overloaded_error", "overloaded_error"))


def payment_required() -> HttpError:
    """402: the key's account has no credit left."""
    return HttpError(
        402, _error_body("Insufficient credits on this key", "payment_required", "billing_error")
    )


def refused_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens: connecting to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def server_error(status: int = 500) -> HttpError:
    return HttpError(status, _error_body("The server had an error", "server_error", "server_error"))


def context_overflow(status: int = 400) -> HttpError:
    """What OpenAI answers for a prompt beyond the model's window (use 413 for a proxy's)."""
    message = (
        "This model's maximum context length is 8192 tokens. However, your messages "
        "resulted in 9000 tokens. Please reduce the length of the messages."
    )
    return HttpError(status, _error_body(message, "context_length_exceeded"))


def bad_request(message: str = "Invalid value for 'temperature'") -> HttpError:
    return HttpError(400, _error_body(message, "invalid_value"))


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: bytes
    json: Any  # None when the body is not JSON

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.json.get("messages", []) if isinstance(self.json, dict) else []

    @property
    def is_summary(self) -> bool:
        return self.headers.get(PURPOSE_HEADER.lower()) == SUMMARY_PURPOSE


def message_text(message: dict[str, Any]) -> str:
    """A message's text; the text parts joined when content is a list of parts."""
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(part["text"] for part in content if isinstance(part, dict) and "text" in part)
    return content if isinstance(content, str) else ""


def last_user_text(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return message_text(users[-1]) if users else ""


def echo_reply(body: dict[str, Any]) -> str:
    return f"reply to: {last_user_text(body)}"


def first_lines_summary(body: dict[str, Any]) -> str:
    """Names every non-system message briefly, so summaries stay checkable in tests."""
    pieces = [message_text(m)[:60] for m in body.get("messages", []) if m.get("role") != "system"]
    return "summary: " + " | ".join(pieces)


class FakeOpenAI(LocalServer):
    """The server; `base_url` ends with `/v1`, as providers expect."""

    url_path = "/v1"

    def __init__(self, model: str = "fake-model") -> None:
        super().__init__()
        self.model = model
        self.requests: list[RecordedRequest] = []
        self.other_requests: list[RecordedRequest] = []
        self.default: Responder = echo_reply
        self.summary: Responder = first_lines_summary
        self._script: deque[Scripted] = deque()
        self._stopping = asyncio.Event()
        # Some servers answer with one whole completion even when asked to stream.
        self.ignores_stream = False
        # The usage each streamed request was answered with, in order.
        self.usages: list[tuple[dict[str, Any], dict[str, Any]]] = []
        # The prompts seen so far, for the simulated prefix cache.
        self._prompts: list[str] = []
        # Whose words the usage is in: "openai", "llama.cpp", "deepseek" or "bare".
        self.usage_shape = "openai"

    def script(self, *responses: Scripted | str) -> None:
        """Queues responses for the next requests, in order; a str is a `Reply`."""
        self._script.extend(Reply(r) if isinstance(r, str) else r for r in responses)

    @property
    def unused_script(self) -> int:
        """Scripted responses no request has taken yet."""
        return len(self._script)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_route("*", "/{tail:.*}", self._unknown)

    async def before_stop(self) -> None:
        self._stopping.set()

    async def _record(self, request: web.Request, chat: bool = True) -> RecordedRequest:
        body = await request.read()
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        recorded = RecordedRequest(
            method=request.method,
            path=request.path,
            headers={name.lower(): value for name, value in request.headers.items()},
            body=body,
            json=parsed,
        )
        (self.requests if chat else self.other_requests).append(recorded)
        return recorded

    async def _models(self, request: web.Request) -> web.Response:
        # OpenAI's list of models names each model and states no context window.
        await self._record(request, chat=False)
        model = {"id": self.model, "object": "model", "created": 1_700_000_000, "owned_by": "organization"}
        return web.json_response({"object": "list", "data": [model]})

    async def _unknown(self, request: web.Request) -> web.Response:
        await self._record(request, chat=False)
        return web.json_response(_error_body("Unknown path", "not_found"), status=404)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        recorded = await self._record(request)
        if not isinstance(recorded.json, dict):
            return web.json_response(_error_body("Body is not JSON", "invalid_json"), status=400)
        if self._script:
            scripted = self._script.popleft()
        else:
            responder = self.summary if recorded.is_summary else self.default
            answer = responder(recorded.json)
            scripted = Reply(answer) if isinstance(answer, str) else answer
        if isinstance(scripted, HttpError):
            return _error_response(scripted)
        if recorded.json.get("stream") and not self.ignores_stream:
            options = recorded.json.get("stream_options") or {}
            asked = options.get("include_usage") or self.usage_shape == "llama.cpp"
            usage = self._usage(recorded.json) if asked else None
            return await self._stream(request, scripted, usage)
        return await self._answer_whole(request, scripted)

    def _usage(self, body: dict[str, Any]) -> dict[str, Any]:
        """The stream's last chunk's fields: `usage` (and llama.cpp's `timings`)."""
        prompt = json.dumps([body.get("tools", []), body.get("messages", [])], sort_keys=True)
        shared = max((len(os.path.commonprefix([prompt, earlier])) for earlier in self._prompts), default=0)
        self._prompts.append(prompt)
        total, cached = len(prompt) // 4, shared // 4
        usage: dict[str, Any] = {"prompt_tokens": total, "completion_tokens": 1, "total_tokens": total + 1}
        self.usages.append((body, usage))
        if self.usage_shape == "openai":
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        elif self.usage_shape == "deepseek":
            usage |= {"prompt_cache_hit_tokens": cached, "prompt_cache_miss_tokens": total - cached}
        elif self.usage_shape == "llama.cpp":
            timings = {"cache_n": cached, "prompt_n": total - cached, "prompt_ms": 1.5, "predicted_n": 1}
            options = body.get("stream_options") or {}
            return (
                {"usage": usage, "timings": timings} if options.get("include_usage") else {"timings": timings}
            )
        return {"usage": usage}

    async def _stream(
        self, request: web.Request, scripted: Scripted, usage: dict[str, Any] | None = None
    ) -> web.StreamResponse:
        if isinstance(scripted, Writes):
            return await self._write_as_scripted(request, scripted)
        if isinstance(scripted, Hang) and not scripted.after_text:
            await self._hang(scripted.seconds)
            return _drop_connection(request)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        await _send(response, self._chunk({"role": "assistant", "content": ""}))
        match scripted:
            case Reply(text=text, chunks=chunks, delay=delay, finish_reason=finish_reason):
                for piece in split_words(scripted.reasoning):
                    await _send(response, self._chunk({scripted.reasoning_field: piece}))
                for piece in chunks if chunks is not None else split_words(text):
                    if delay:
                        await asyncio.sleep(delay)
                    await _send(response, self._chunk({"content": piece}))
                await self._send_finish(response, finish_reason, usage)
                await _send(response, "[DONE]")
            case Hang(seconds=seconds, after_text=text):
                await self._send_text(response, text)
                await self._hang(seconds)
                return _drop_connection(request)
            case Malformed(data=data, after_text=text):
                await self._send_text(response, text)
                await _send(response, data)
            case Drop(after_text=text, clean=clean):
                await self._send_text(response, text)
                if not clean:
                    return _drop_connection(request)
            case StreamError(error=error, after_text=text):
                await self._send_text(response, text)
                await _send(response, {"error": error})
            case ToolCalls():
                await self._send_text(response, scripted.text)
                if not await self._send_tool_calls(response, scripted):
                    return _drop_connection(request)
                await self._send_finish(response, scripted.finish_reason, usage)
                await _send(response, "[DONE]")
        await response.write_eof()
        return response

    async def _write_as_scripted(self, request: web.Request, scripted: Writes) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        for part in scripted.parts:
            if isinstance(part, asyncio.Event):
                await part.wait()
            else:
                await response.write(part.encode())
        await response.write_eof()
        return response

    def event(self, text: str) -> str:
        """One server-sent event carrying `text` as the reply's next piece."""
        return _event(self._chunk({"content": text}))

    def reasoning_event(self, text: str, field: str = "reasoning_content") -> str:
        """One server-sent event carrying `text` as thinking, in a reasoning parser's `field`."""
        return _event(self._chunk({field: text}))

    def finish(self, finish_reason: str = "stop") -> str:
        """The events that end a reply: the finish reason, then [DONE]."""
        return _event(self._chunk({}, finish_reason)) + _event("[DONE]")

    async def _answer_whole(self, request: web.Request, scripted: Scripted) -> web.Response:
        match scripted:
            case Reply(text=text, finish_reason=finish_reason):
                completion = self._completion(text, finish_reason)
                if scripted.reasoning:
                    completion["choices"][0]["message"][scripted.reasoning_field] = scripted.reasoning
                return web.json_response(completion)
            case Malformed(data=data):
                return web.Response(text=data, content_type="application/json")
            case StreamError(error=error):
                return web.json_response({"error": error}, status=500)
            case Hang(seconds=seconds):
                await self._hang(seconds)
            case ToolCalls():
                return web.json_response(self._tool_completion(scripted))
        return _drop_connection(request)

    async def _send_tool_calls(self, response: web.StreamResponse, answer: ToolCalls) -> bool:
        """The calls' fragments; False when `after_pieces` says to cut the connection."""
        pieces = [
            [
                answer.arguments(i)[at : at + answer.piece_chars]
                for at in range(0, len(answer.arguments(i)), answer.piece_chars)
            ]
            for i in range(len(answer.calls))
        ]
        fragments: list[dict[str, Any]] = []
        for index, (name, _) in enumerate(answer.calls):
            opening = {"name": name, "arguments": ""}
            fragments.append({"index": index, **answer.call_fields(index), "function": opening})
            if not answer.interleave:
                fragments.extend(
                    {"index": index, "function": {"arguments": piece}} for piece in pieces[index]
                )
        if answer.interleave:
            for round_ in range(max((len(p) for p in pieces), default=0)):
                for index, call_pieces in enumerate(pieces):
                    if round_ < len(call_pieces):
                        fragments.append({"index": index, "function": {"arguments": call_pieces[round_]}})
        sent_pieces = 0
        for fragment in fragments:
            if answer.after_pieces is not None and sent_pieces >= answer.after_pieces:
                return False
            await _send(response, self._chunk({"tool_calls": [fragment]}))
            sent_pieces += "id" not in fragment
        return True

    def _tool_completion(self, answer: ToolCalls) -> dict[str, Any]:
        calls = [
            {**answer.call_fields(i), "function": {"name": name, "arguments": answer.arguments(i)}}
            for i, (name, _) in enumerate(answer.calls)
        ]
        completion = self._completion(answer.text, answer.finish_reason)
        message = completion["choices"][0]["message"]
        message["content"] = answer.text or None
        message["tool_calls"] = calls
        return completion

    async def _send_finish(
        self, response: web.StreamResponse, finish_reason: str, usage: dict[str, Any] | None
    ) -> None:
        """The finish chunk, then usage in a chunk of no choices; llama.cpp's `timings` ride on
        whichever of them comes last."""
        if usage is None or "usage" in usage:
            await _send(response, self._chunk({}, finish_reason))
        else:
            await _send(response, {**self._chunk({}, finish_reason), **usage})
        if usage is not None and "usage" in usage:
            await _send(response, {**self._chunk({}), "choices": [], **usage})

    async def _send_text(self, response: web.StreamResponse, text: str) -> None:
        for piece in split_words(text):
            await _send(response, self._chunk({"content": piece}))

    async def _hang(self, seconds: float) -> None:
        with suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), seconds)

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
        }

    def _completion(self, text: str, finish_reason: str) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish_reason,
                }
            ],
        }


# Named apart from the fixture so a test's `fake_openai` parameter never shadows the import.
@pytest_asyncio.fixture(name="fake_openai")
async def fake_openai_fixture() -> AsyncIterator[FakeOpenAI]:
    async with FakeOpenAI() as server:
        yield server


def split_words(text: str) -> list[str]:
    """Word-sized pieces that join back to exactly `text`."""
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def _error_body(message: str, code: str, error_type: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": error_type, "code": code}}


def _error_response(error: HttpError) -> web.Response:
    if isinstance(error.body, dict):
        return web.json_response(error.body, status=error.status, headers=error.headers)
    return web.Response(text=error.body, status=error.status, headers=error.headers)


def _event(data: dict[str, Any] | str) -> str:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {text}\n\n"


async def _send(response: web.StreamResponse, data: dict[str, Any] | str) -> None:
    """One event, written on its own (so one HTTP chunk)."""
    await response.write(_event(data).encode())


def _drop_connection(request: web.Request) -> web.StreamResponse:
    """Closes the socket under the response, the way a crashed upstream or proxy does."""
    if request.transport is not None:
        request.transport.close()
    return web.StreamResponse()
