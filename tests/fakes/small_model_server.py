"""A small local model's server on 127.0.0.1, as llama.cpp's server behaves (its README and errors).

- `POST /v1/chat/completions` streams a short answer; with `stream_options.include_usage` the
  last chunk (empty `choices`) carries `usage.prompt_tokens` as this server counts them.
- It counts with its own tokenizer, not tiktoken: one token per `BYTES_PER_TOKEN` bytes of
  the request's messages and tools, as JSON — so Chorus's count is off, as with real models.
- A prompt larger than `n_ctx` is refused as llama.cpp refuses it: status 400, type
  `exceed_context_size_error`, "request (N tokens) exceeds the available context size (M
  tokens), try increasing it", with `n_prompt_tokens` and `n_ctx` in the error object.
- `GET /props` states `default_generation_settings.n_ctx` — the window, or `stated_window`
  when a test wants it to lie — unless `hide_window` (404, as behind a proxy that only
  forwards `/v1`). `GET /v1/models` names the model with no window.
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.support.local_server import LocalServer

BYTES_PER_TOKEN = 3


class SmallModelServer(LocalServer):
    url_path = "/v1"

    def __init__(self, n_ctx: int, *, hide_window: bool = False, stated_window: int | None = None) -> None:
        super().__init__()
        self.n_ctx = n_ctx
        self.hide_window = hide_window
        self.stated_window = stated_window
        # Each chat request's prompt tokens as this server counted them, and whether it was refused.
        self.prompts: list[tuple[int, bool]] = []
        self.tools_offered: list[int] = []

    @property
    def refusals(self) -> int:
        return sum(refused for _, refused in self.prompts)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/props", self._props)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "small", "object": "model"}]})

    async def _props(self, request: web.Request) -> web.Response:
        if self.hide_window:
            return web.json_response({"error": {"code": 404, "message": "File Not Found"}}, status=404)
        window = self.stated_window or self.n_ctx
        return web.json_response({"default_generation_settings": {"n_ctx": window}, "total_slots": 1})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        tools = body.get("tools") or []
        prompt = server_tokens(body.get("messages", []), tools)
        refused = prompt > self.n_ctx
        self.prompts.append((prompt, refused))
        self.tools_offered.append(len(tools))
        if refused:
            message = (
                f"request ({prompt} tokens) exceeds the available context size "
                f"({self.n_ctx} tokens), try increasing it"
            )
            error = {
                "code": 400,
                "message": message,
                "type": "exceed_context_size_error",
                "n_prompt_tokens": prompt,
                "n_ctx": self.n_ctx,
            }
            return web.json_response({"error": error}, status=400)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        words = ["Noted", " —", " thanks."]
        for word in words:
            await _send(response, _chunk({"content": word}))
        await _send(response, _chunk({}, "stop"))
        if (body.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": prompt, "completion_tokens": len(words), "total_tokens": prompt + 3}
            await _send(response, {"object": "chat.completion.chunk", "choices": [], "usage": usage})
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


def server_tokens(messages: list[Any], tools: list[Any]) -> int:
    """The prompt's size as this server's tokenizer counts it."""
    size = len(json.dumps(messages, ensure_ascii=False).encode())
    size += len(json.dumps(tools, ensure_ascii=False).encode()) if tools else 0
    return size // BYTES_PER_TOKEN


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return {"object": "chat.completion.chunk", "model": "small", "choices": [choice]}


async def _send(response: web.StreamResponse, data: dict[str, Any]) -> None:
    await response.write(f"data: {json.dumps(data)}\n\n".encode())
