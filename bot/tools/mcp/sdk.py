"""Everything that speaks to an MCP server, through the official `mcp` SDK.

Importing the SDK takes seconds on a busy machine (hundreds of pydantic models), so
`bot.tools.mcp.connection` loads this module in a thread the first time a server
starts, never on the event loop and never when no server is configured.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial
from typing import Any

import anyio
import httpx2
import mcp_types as types
from anyio.abc import ObjectReceiveStream
from jsonschema import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import SubscriptionLost
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from bot.config import McpServerSettings
from bot.errors import ToolError
from bot.tools.base import ReportProgress, ToolImage, ToolProgress, ToolResult
from bot.tools.mcp.expansion import Secrets
from bot.tools.mcp.server_log import server_stderr
from bot.tools.mcp.tool import ListedTool
from transcript.attachments import format_size

CLIENT_INFO = types.Implementation(name="chorus", version="0.1.0")
# A string of structured content this long in base64's alphabet alone (or a base64 data: URL)
# is binary data, not words.
_BASE64 = re.compile(r"(data:(?P<type>[\w.+/-]*);base64,)?(?P<data>[A-Za-z0-9+/_-]{256,}={0,2})")
# Tool lists longer than this many pages are a server bug, not a list to walk forever.
MAX_LIST_PAGES = 100

OnListChanged = Callable[[], None]


class ConnectionLost(ToolError):
    """The server went away (exited, closed the stream, stopped answering HTTP)."""


@asynccontextmanager
async def connected(
    name: str,
    settings: McpServerSettings,
    secrets: Secrets,
    on_list_changed: OnListChanged,
    on_http_error: Callable[[str], None],
    on_closed: Callable[[str], None],
) -> AsyncIterator[Client]:
    """A client connected to the server `settings` describe, with the handshake done.

    `on_http_error` hears of each HTTP error status, which the SDK's errors leave out;
    `on_closed` hears why the server ended the connection (a stdio child that exited)
    the moment the transport sees it, not when a call next fails.
    """

    async def notified(message: IncomingMessage) -> None:
        # Handshake-era servers send the notification unasked; 2026 servers through `listen`.
        if isinstance(message, types.ToolListChangedNotification):
            on_list_changed()
        await anyio.lowlevel.checkpoint()

    client = Client(
        _watched(_transport(name, settings, secrets, on_http_error), settings, on_closed),
        message_handler=notified,
        client_info=CLIENT_INFO,
        cache=None,
    )
    async with client:
        yield client


@asynccontextmanager
async def _watched(
    transport: AbstractAsyncContextManager[Any], settings: McpServerSettings, on_closed: Callable[[str], None]
) -> AsyncIterator[Any]:
    """`transport` entered, its read stream telling `on_closed` when the server ends it."""
    stdio = settings.transport == "stdio"
    reason = "the server process exited" if stdio else "the server closed the connection"
    async with transport as (read_stream, write_stream):
        yield _EndWatched(read_stream, partial(on_closed, reason)), write_stream


class _EndWatched(ObjectReceiveStream[Any]):
    """A transport's read stream that calls `on_end` when the server ends it.

    A stdio server's stdout ends when its process exits; the SDK's session then only
    fails the calls waiting on it. Closing the stream ourselves (a shutdown) is no end.
    """

    def __init__(self, stream: ObjectReceiveStream[Any], on_end: Callable[[], None]) -> None:
        self._stream = stream
        self._on_end = on_end

    async def receive(self) -> Any:
        try:
            return await self._stream.receive()
        except anyio.EndOfStream:
            self._on_end()
            raise

    async def aclose(self) -> None:
        await self._stream.aclose()


@asynccontextmanager
async def _transport(
    name: str, settings: McpServerSettings, secrets: Secrets, on_http_error: Callable[[str], None]
) -> AsyncIterator[Any]:
    """The SDK's transport for the server, entered: its read and write streams."""
    if settings.transport == "stdio":
        assert settings.command is not None
        parameters = StdioServerParameters(
            command=settings.command,
            args=settings.args,
            # The SDK adds its short list of safe variables (PATH, HOME, …), nothing else.
            env=secrets.expand_all(settings.env, "env"),
            cwd=settings.cwd,
        )
        with server_stderr(name) as errlog:
            async with stdio_client(parameters, errlog=errlog) as streams:
                yield streams
        return
    assert settings.url is not None
    url = secrets.expand(settings.url, "url")

    async def heard(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            on_http_error(f"HTTP {response.status_code} {response.reason_phrase}")

    def http_client(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        http = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        http.event_hooks["response"].append(heard)
        return http

    headers = secrets.expand_all(settings.headers, "headers")
    if settings.transport == "sse":
        async with sse_client(url, headers=headers, httpx_client_factory=http_client) as streams:
            yield streams
        return
    async with http_client(headers=headers) as http, streamable_http_client(url, http_client=http) as streams:
        yield streams


async def list_tools(client: Client) -> list[ListedTool]:
    """Every tool the server lists, page after page."""
    listed: list[ListedTool] = []
    cursor: str | None = None
    for _ in range(MAX_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        listed.extend(_listed(tool) for tool in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return listed


def _listed(tool: types.Tool) -> ListedTool:
    annotations = tool.annotations
    return ListedTool(
        name=tool.name,
        description=tool.description or tool.title or (annotations.title if annotations else None) or "",
        input_schema=dict(tool.input_schema),
        read_only=bool(annotations and annotations.read_only_hint),
        # Only a server's own word: a tool without annotations runs as before.
        destructive=bool(annotations and annotations.destructive_hint and not annotations.read_only_hint),
    )


async def watch_tool_list(client: Client, changed: Callable[[], Awaitable[None]]) -> None:
    """Calls `changed` whenever the server says its tool list changed; returns if it never will.

    A 2026 server delivers the change on a `subscriptions/listen` stream (its frames are
    `notifications/tools/list_changed`); its loss means the connection is gone.
    Handshake-era servers notify unasked, through the client's message handler.
    """
    capability = client.server_capabilities.tools
    if capability is None or not capability.list_changed:
        return
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        await anyio.sleep_forever()
    try:
        async with client.listen(tools_list_changed=True) as subscription:
            async for _event in subscription:
                await changed()
    except SubscriptionLost as error:
        raise ConnectionLost("the server closed its notification stream") from error
    raise ConnectionLost("the server ended its notification stream")


async def call_tool(
    client: Client, name: str, arguments: dict[str, Any], on_progress: ReportProgress | None = None
) -> ToolResult:
    """One call: the server's answer as a result; `ConnectionLost` if it cannot be asked.

    With `on_progress`, the request carries a progress token, and each
    `notifications/progress` the server sends for it is reported there.
    """
    progressed = _reporting_to(on_progress) if on_progress is not None else None
    try:
        answer = await client.call_tool(name, arguments, progress_callback=progressed)
    except MCPError as error:
        if error.code == types.CONNECTION_CLOSED:
            raise ConnectionLost(error.message) from error
        # The server answered, with a protocol error (an unknown tool, bad arguments).
        return ToolResult.error(f"The server answered with an error: {error.message}")
    except (OSError, httpx2.TransportError, anyio.ClosedResourceError, anyio.BrokenResourceError) as error:
        raise ConnectionLost(describe(error)) from error
    return to_result(answer)


def _reporting_to(on_progress: ReportProgress) -> ProgressFnT:
    """The SDK's progress callback, reporting each notification to `on_progress`."""

    async def progressed(progress: float, total: float | None, message: str | None) -> None:
        on_progress(ToolProgress(progress, total, message))

    return progressed


def to_result(answer: types.CallToolResult) -> ToolResult:
    """Text blocks as the text, images as images, structured content as JSON when no content came.

    Binary data never reaches the text as base64: images become the result's images
    (the engine stores them as attachments), audio and other binary resources a short
    placeholder, whichever of `content` and `structuredContent` carries them.
    """
    texts: list[str] = []
    images: list[ToolImage] = []
    for block in answer.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.ImageContent):
            _add_image(block.data, block.mime_type, texts, images)
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            if isinstance(resource, types.TextResourceContents):
                texts.append(resource.text)
            elif (resource.mime_type or "").startswith("image/"):
                _add_image(resource.blob, resource.mime_type or "", texts, images)
            else:
                named = f"resource {resource.uri}"
                texts.append(_binary_placeholder(named, resource.mime_type, resource.blob))
        elif isinstance(block, types.ResourceLink):
            texts.append(f"[resource link: {block.name} {block.uri}]")
        elif isinstance(block, types.AudioContent):
            texts.append(_binary_placeholder("audio", block.mime_type, block.data))
    # Structured content repeats what the content says; it is the answer only when no content came.
    if not answer.content and answer.structured_content is not None:
        structured = _without_binary(answer.structured_content, images)
        texts.append(json.dumps(structured, ensure_ascii=False))
    content = "\n".join(texts)
    if answer.is_error:
        return ToolResult(content or "The tool reported an error without saying which.", is_error=True)
    return ToolResult(content, images=tuple(images))


def _add_image(data: str, mime_type: str, texts: list[str], images: list[ToolImage]) -> None:
    try:
        images.append(ToolImage(data=base64.b64decode(data, validate=True), mime_type=mime_type))
    except (binascii.Error, ValueError):
        texts.append(f"[an image that could not be read ({mime_type or 'no type'}): it is not valid base64]")


def _binary_placeholder(what: str, mime_type: str | None, data: str) -> str:
    """What the model reads instead of binary data Chorus cannot pass on."""
    size = format_size(_base64_size(data))
    return f"[{what} ({mime_type or 'binary'}, {size}), which Chorus cannot pass on]"


def _base64_size(data: str) -> int:
    """The bytes `data` encodes, counted without decoding it."""
    stripped = "".join(data.split())
    padding = len(stripped) - len(stripped.rstrip("="))
    return len(stripped) * 3 // 4 - padding


def _without_binary(value: Any, images: list[ToolImage]) -> Any:
    """Structured content with its binary data out of the text: a content block holding an
    image (`{"type": "image", "data": …}`) joins the result's images, other binary becomes a
    placeholder."""
    if isinstance(value, dict):
        data, mime_type = value.get("data"), value.get("mimeType")
        if value.get("type") in ("image", "audio") and isinstance(data, str) and isinstance(mime_type, str):
            if value["type"] == "audio":
                return _binary_placeholder("audio", mime_type, data)
            refused: list[str] = []
            _add_image(data, mime_type, refused, images)
            return refused[0] if refused else f"[image ({mime_type}): attached to this result]"
        blob = value.get("blob")
        if isinstance(blob, str) and "uri" in value:
            return _binary_placeholder(f"resource {value['uri']}", value.get("mimeType"), blob)
        return {key: _without_binary(item, images) for key, item in value.items()}
    if isinstance(value, list):
        return [_without_binary(item, images) for item in value]
    if isinstance(value, str) and (binary := _BASE64.fullmatch(value)):
        return _binary_placeholder("data", binary["type"], binary["data"])
    return value


def validator(schema: dict[str, Any]) -> Validator | None:
    """A JSON Schema validator for a tool's arguments; None when the schema itself is invalid
    (the server then judges the arguments alone)."""
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
    except SchemaError:
        return None
    checker: Validator = cls(schema)
    return checker


def describe(error: BaseException) -> str:
    """One line saying what went wrong, from the innermost error of a task group's."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    if isinstance(error, MCPError):
        return error.message
    if isinstance(error, ConnectionLost):
        return str(error)
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
