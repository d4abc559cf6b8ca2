"""A loopback proxy in front of a model server that counts what Chorus asks of it.

Every request goes through unchanged (streams as they stream) and is recorded: its path, the
purpose Chorus named (`X-Chorus-Purpose`; none for a turn's own call), the status, and whether
the server refused it as larger than its window. With `hide_window` the proxy answers 404 to
the places a server names its window (llama.cpp's `/props`, `/v1/models`), as servers that
do not say it do, so discovering the window can be tested both ways.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field

import httpx
from aiohttp import web

from bot.providers.openai import PURPOSE_HEADER
from tests.support.local_server import LocalServer

WINDOW_PATHS = frozenset({"/props", "/models", "/v1/models"})
# What llama.cpp says when a prompt is larger than its window (HTTP 400).
OVERFLOW_MARKERS = (b"exceed_context_size_error", b"exceeds the available context size")
FORWARDED_HEADERS = ("Content-Type", "Accept", "Authorization", PURPOSE_HEADER)


@dataclass(frozen=True)
class ModelCall:
    path: str
    purpose: str | None
    status: int
    overflow: bool
    # What was asked (the JSON request body), empty for a request the proxy answered itself.
    body: bytes = b""
    # What the server answered, as streamed (filled while it streams; the SSE text of a stream).
    response: bytearray = field(default_factory=bytearray)

    @property
    def is_chat(self) -> bool:
        return self.path.endswith("/chat/completions")


class ModelProxy(LocalServer):
    def __init__(self, upstream: str, *, hide_window: bool = False) -> None:
        super().__init__()
        self.upstream = upstream.rstrip("/")
        self.hide_window = hide_window
        self.calls: list[ModelCall] = []
        self._client: httpx.AsyncClient | None = None

    @property
    def api_url(self) -> str:
        """The OpenAI-compatible base URL through the proxy, for `model.base_url`."""
        return f"{self.base_url}/v1"

    def chat_calls(self, since: int = 0) -> list[ModelCall]:
        """The chat completions asked for since the `since`-th recorded request."""
        return [call for call in self.calls[since:] if call.is_chat]

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{path:.*}", self._forward)

    async def start(self) -> None:
        # Replies are generated on one thread: no read deadline of the proxy's own.
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0))
        await super().start()

    async def stop(self) -> None:
        await super().stop()
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._client is not None
        path = request.path
        if self.hide_window and path in WINDOW_PATHS:
            self.calls.append(ModelCall(path, None, 404, False))
            return web.json_response({"error": {"code": 404, "message": "Not Found"}}, status=404)
        headers = {name: request.headers[name] for name in FORWARDED_HEADERS if name in request.headers}
        body = await request.read()
        upstream_request = self._client.build_request(
            request.method, self.upstream + request.path_qs, content=body, headers=headers
        )
        upstream = await self._client.send(upstream_request, stream=True)
        content_type = upstream.headers.get("content-type", "application/json").split(";")[0]
        purpose = request.headers.get(PURPOSE_HEADER)
        try:
            if upstream.status_code >= 400:
                # A refusal is one small JSON answer: passed on whole.
                refused = await upstream.aread()
                overflow = any(marker in refused for marker in OVERFLOW_MARKERS)
                self.calls.append(ModelCall(path, purpose, upstream.status_code, overflow, body))
                return web.Response(body=refused, status=upstream.status_code, content_type=content_type)
            call = ModelCall(path, purpose, upstream.status_code, False, body)
            self.calls.append(call)
            response = web.StreamResponse(status=upstream.status_code)
            response.content_type = content_type
            await response.prepare(request)
            # Chorus may stop reading once the reply is complete; the rest is not needed.
            with suppress(ConnectionResetError):
                async for chunk in upstream.aiter_raw():
                    call.response.extend(chunk)
                    await response.write(chunk)
                await response.write_eof()
            return response
        finally:
            await upstream.aclose()
