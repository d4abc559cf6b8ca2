"""A real Anthropic Messages API server on 127.0.0.1 that tests script request by request.

    async with FakeAnthropic() as server:
        server.script(overloaded(), Answer(text="hello there"))
        provider = AnthropicProvider("test-key", base_url=server.base_url)
        ...
        assert server.requests[1].json["messages"][-1]["role"] == "user"

Written from the Messages API reference: POST /v1/messages streams server-sent events
(message_start with usage, content_block_start / content_block_delta / content_block_stop
for text, thinking with thinking_delta and signature_delta, redacted_thinking whole in its
content_block_start (encrypted `data`, no deltas), tool_use with input_json_delta, then
message_delta with stop_reason and usage, message_stop; pings anywhere), and errors as
{"type": "error", "error": {"type": ..., "message": ...}} (429 rate_limit_error with
retry-after, 529 overloaded_error, 400 "prompt is too long: N tokens > M maximum").

Like the API it
- takes at most 4 `cache_control` breakpoints, and simulates the prompt cache: the prefix
  (tools, then system, then messages, block by block) up to each breakpoint is written
  (when it is at least `min_cacheable_tokens` long), and a later request reads the longest
  written prefix that ends at one of its breakpoints or up to 20 blocks before one (the
  API's lookback), reporting those tokens as `cache_read_input_tokens` and the rest up to
  its last breakpoint as `cache_creation_input_tokens`;
- with thinking enabled, refuses (400) a tool round's continuation whose assistant message
  does not start with the thinking block this server signed for it, signature unchanged,
  followed by every other thinking or redacted_thinking block it sent, each unchanged.

Tokens are counted as one per four characters of each block's JSON, enough to compare.
Each request takes the next scripted answer; with the script empty, `server.default` turns
the parsed body into one (by default it echoes the newest user text).
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest_asyncio
from aiohttp import web

from tests.support.local_server import LocalServer


@dataclass(frozen=True)
class Answer:
    """An answer: `thinking` (signed) first if set, then `redacted_thinking` (its encrypted
    data) if set, then `text`, then the tool calls.

    `drop_after_text` cuts the connection once the text is sent, before the answer ends.
    """

    text: str = ""
    thinking: str | None = None
    redacted_thinking: str | None = None
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    drop_after_text: bool = False

    @property
    def stop_reason(self) -> str:
        return "tool_use" if self.tool_calls else "end_turn"


@dataclass(frozen=True)
class ApiError:
    status: int
    error_type: str
    message: str
    retry_after: str | None = None


def overloaded() -> ApiError:
    return ApiError(529, "overloaded_error", "Overloaded")


def rate_limited(retry_after: str | None = "0") -> ApiError:
    return ApiError(
        429, "rate_limit_error", "Number of request tokens has exceeded your rate limit.", retry_after
    )


def prompt_too_long(requested: int = 208_310, maximum: int = 200_000) -> ApiError:
    return ApiError(
        400, "invalid_request_error", f"prompt is too long: {requested} tokens > {maximum} maximum"
    )


Scripted = Answer | ApiError
Responder = Callable[[dict[str, Any]], Scripted]

MAX_BREAKPOINTS = 4
# How many blocks before a breakpoint the API looks for an earlier cached prefix.
LOOKBACK_BLOCKS = 20


@dataclass(frozen=True)
class RecordedRequest:
    headers: dict[str, str]  # names lower-cased
    json: dict[str, Any]
    # What the server reported for it (None for refused requests).
    usage: dict[str, int] | None = None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.json.get("messages", []))


def block_tokens(block: Any) -> int:
    """The stand-in's token count of one block: a token per four characters of its JSON."""
    return max(1, len(json.dumps(_without_cache_control(block), sort_keys=True)) // 4)


def newest_user_text(body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [block.get("text", "") for block in content if block.get("type") == "text"]
        if texts:
            return texts[-1]
    return ""


def echo(body: dict[str, Any]) -> Answer:
    return Answer(text=f"reply to: {newest_user_text(body)}")


class FakeAnthropic(LocalServer):
    """The server; `base_url` is its root, as the SDK expects (it adds /v1/messages)."""

    def __init__(self, *, min_cacheable_tokens: int = 0) -> None:
        super().__init__()
        # The shortest prefix the cache keeps (1,024 tokens for most Claude models).
        self.min_cacheable_tokens = min_cacheable_tokens
        self.requests: list[RecordedRequest] = []
        self.default: Responder = echo
        # The one key this server takes, when set; any other is refused as the API does.
        self.accepted_key: str | None = None
        self._script: deque[Scripted] = deque()
        self._cached_prefixes: set[str] = set()
        # The signature this server gave each thinking block, by the thinking's text.
        self._signatures: dict[str, str] = {}
        # The thinking blocks of each answer that called tools, by its first tool_use id.
        self._round_thinking: dict[str, list[dict[str, Any]]] = {}
        self._tool_ids = 0
        # False: usage leaves the cache fields out, as an Anthropic-compatible server may.
        self.reports_cache = True

    def script(self, *answers: Scripted | str) -> None:
        self._script.extend(Answer(text=a) if isinstance(a, str) else a for a in answers)

    @property
    def unused_script(self) -> int:
        return len(self._script)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        headers = {name.lower(): value for name, value in request.headers.items()}
        body = await request.json()
        if not headers.get("x-api-key") and not headers.get("authorization", "").startswith("Bearer "):
            self.requests.append(RecordedRequest(headers, body))
            return _error(
                ApiError(401, "authentication_error", "x-api-key or authorization header is required")
            )
        if self.accepted_key is not None and headers.get("x-api-key") != self.accepted_key:
            self.requests.append(RecordedRequest(headers, body))
            return _error(ApiError(401, "authentication_error", "invalid x-api-key"))
        refusal = self._refusal(body)
        scripted = refusal or (self._script.popleft() if self._script else self.default(body))
        if isinstance(scripted, ApiError):
            self.requests.append(RecordedRequest(headers, body))
            return _error(scripted)
        usage = self._usage(body)
        self.requests.append(RecordedRequest(headers, body, usage))
        return await self._stream(request, scripted, usage, body.get("model", "claude-fake"))

    def _refusal(self, body: dict[str, Any]) -> ApiError | None:
        """What the API refuses before answering: too many breakpoints, thinking not replayed."""
        breakpoints = sum("cache_control" in block for block in _blocks(body))
        if breakpoints > MAX_BREAKPOINTS:
            return ApiError(
                400,
                "invalid_request_error",
                f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. "
                f"Found {breakpoints}.",
            )
        if body.get("thinking", {}).get("type") == "enabled":
            return self._thinking_refusal(body.get("messages", []))
        return None

    def _thinking_refusal(self, messages: list[dict[str, Any]]) -> ApiError | None:
        # A tool round's continuation: the last assistant message used tools and the user
        # answers with their results. That message must start with its signed thinking.
        if len(messages) < 2 or messages[-2].get("role") != "assistant":
            return None
        content = messages[-2].get("content")
        blocks = content if isinstance(content, list) else []
        if not any(block.get("type") == "tool_use" for block in blocks):
            return None
        index = len(messages) - 2
        first = blocks[0]
        if first.get("type") not in ("thinking", "redacted_thinking"):
            return ApiError(
                400,
                "invalid_request_error",
                f"messages.{index}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                f"`{first.get('type')}`. When `thinking` is enabled, a final `assistant` message must "
                "start with a thinking block.",
            )
        if first.get("type") == "thinking" and self._signatures.get(first.get("thinking", "")) != first.get(
            "signature"
        ):
            return ApiError(
                400,
                "invalid_request_error",
                f"messages.{index}.content.0: Invalid `signature` in `thinking` block",
            )
        first_call = next(block.get("id") for block in blocks if block.get("type") == "tool_use")
        sent = self._round_thinking.get(first_call)
        if sent is not None and _thinking_blocks(blocks) != sent:
            return ApiError(
                400,
                "invalid_request_error",
                f"messages.{index}.content: `thinking` or `redacted_thinking` blocks in the latest "
                "assistant message cannot be modified. These blocks must remain as they were in the "
                "original response.",
            )
        return None

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks = _blocks(body)
        tokens = [block_tokens(block) for block in blocks]
        keys = _prefix_keys(blocks)  # keys[n]: the prefix of the first n blocks
        ends = [i + 1 for i, block in enumerate(blocks) if "cache_control" in block]
        looked_at = {end - back for end in ends for back in range(LOOKBACK_BLOCKS) if end - back > 0}
        read_end = max((end for end in looked_at if keys[end] in self._cached_prefixes), default=0)
        written_end = max(ends, default=0)
        read = sum(tokens[:read_end])
        written = sum(tokens[read_end:written_end]) if written_end > read_end else 0
        self._cached_prefixes.update(
            keys[end] for end in ends if sum(tokens[:end]) >= self.min_cacheable_tokens
        )
        if written_end > read_end and sum(tokens[:written_end]) < self.min_cacheable_tokens:
            written = 0  # too short to cache: billed as plain input
        if not self.reports_cache:
            return {"input_tokens": sum(tokens), "output_tokens": 1}
        return {
            "input_tokens": sum(tokens) - read - written,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
            "output_tokens": 1,
        }

    async def _stream(
        self, request: web.Request, answer: Answer, usage: dict[str, int], model: str
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        message = {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        await _send(response, "message_start", {"message": message})
        await _send(response, "ping", {})
        index = 0
        output_tokens = 0
        thinking: list[dict[str, Any]] = []
        if answer.thinking is not None:
            signature = hashlib.sha256(answer.thinking.encode()).hexdigest()
            self._signatures[answer.thinking] = signature
            await self._block(
                response,
                index,
                {"type": "thinking", "thinking": "", "signature": ""},
                [{"type": "thinking_delta", "thinking": piece} for piece in _pieces(answer.thinking)]
                + [{"type": "signature_delta", "signature": signature}],
            )
            thinking.append({"type": "thinking", "thinking": answer.thinking, "signature": signature})
            index += 1
            output_tokens += len(answer.thinking) // 4
        if answer.redacted_thinking is not None:
            redacted = {"type": "redacted_thinking", "data": answer.redacted_thinking}
            await self._block(response, index, redacted, [])
            thinking.append(redacted)
            index += 1
        if answer.text:
            await self._block(
                response,
                index,
                {"type": "text", "text": ""},
                [{"type": "text_delta", "text": piece} for piece in _pieces(answer.text)],
                end=not answer.drop_after_text,
            )
            index += 1
            output_tokens += len(answer.text) // 4
            if answer.drop_after_text:
                if request.transport is not None:
                    request.transport.close()
                return response
        if answer.tool_calls:
            self._round_thinking[f"toolu_{self._tool_ids + 1:04d}"] = thinking
        for name, arguments in answer.tool_calls:
            self._tool_ids += 1
            text = json.dumps(arguments)
            await self._block(
                response,
                index,
                {"type": "tool_use", "id": f"toolu_{self._tool_ids:04d}", "name": name, "input": {}},
                [
                    {"type": "input_json_delta", "partial_json": text[at : at + 7]}
                    for at in range(0, len(text), 7)
                ],
            )
            index += 1
            output_tokens += len(text) // 4
        await _send(
            response,
            "message_delta",
            {
                "delta": {"stop_reason": answer.stop_reason, "stop_sequence": None},
                "usage": {"output_tokens": max(1, output_tokens)},
            },
        )
        await _send(response, "message_stop", {})
        await response.write_eof()
        return response

    async def _block(
        self,
        response: web.StreamResponse,
        index: int,
        opening: dict[str, Any],
        deltas: list[dict[str, Any]],
        *,
        end: bool = True,
    ) -> None:
        await _send(response, "content_block_start", {"index": index, "content_block": opening})
        for delta in deltas:
            await _send(response, "content_block_delta", {"index": index, "delta": delta})
        if end:
            await _send(response, "content_block_stop", {"index": index})


@pytest_asyncio.fixture(name="fake_anthropic")
async def fake_anthropic_fixture() -> AsyncIterator[FakeAnthropic]:
    async with FakeAnthropic() as server:
        yield server


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Tools, system and message blocks in the order the prompt cache sees them."""
    blocks: list[dict[str, Any]] = list(body.get("tools", []))
    system = body.get("system", [])
    blocks += [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            blocks.append({"role": message["role"], "type": "text", "text": content})
        else:
            blocks += [{"role": message["role"], **block} for block in content]
    return blocks


def _thinking_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [block for block in blocks if block.get("type") in ("thinking", "redacted_thinking")]


def _without_cache_control(block: Any) -> Any:
    return {key: value for key, value in block.items() if key != "cache_control"}


def _prefix_keys(blocks: list[dict[str, Any]]) -> list[str]:
    """A key for each prefix of `blocks` (the empty one first), chained block by block."""
    keys = [""]
    for block in blocks:
        text = json.dumps(_without_cache_control(block), sort_keys=True)
        keys.append(hashlib.sha256((keys[-1] + text).encode()).hexdigest())
    return keys


def _pieces(text: str) -> list[str]:
    return [text[at : at + 8] for at in range(0, len(text), 8)] or [text]


def _error(error: ApiError) -> web.Response:
    headers = {"retry-after": error.retry_after} if error.retry_after is not None else {}
    body = {"type": "error", "error": {"type": error.error_type, "message": error.message}}
    return web.json_response(body, status=error.status, headers=headers)


async def _send(response: web.StreamResponse, event: str, data: dict[str, Any]) -> None:
    payload = json.dumps({"type": event, **data})
    await response.write(f"event: {event}\ndata: {payload}\n\n".encode())
