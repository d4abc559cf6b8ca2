"""An MCP server built with the SDK's own server (`MCPServer`, formerly FastMCP), for tests.

Run as a process, over stdio (`--stdio`) or streamable HTTP on 127.0.0.1 (`--port N`;
`--sse` for the legacy HTTP+SSE transport),
so a test can kill it with SIGKILL mid-conversation. Its tools cover what Chorus must
handle: text, an image, an `isError` result, structured content only (an image in it too), a tool added at
run time (with the list-changed notification), its own environment (what a stdio
server was given) and a recursive schema no model can take. With MCP_TEST_TOKEN set, HTTP
requests without `Authorization: Bearer <token>` are refused with 401.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.utilities.types import Image
from mcp_types import CallToolResult, TextContent
from pydantic import BaseModel

# A 1×1 PNG.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("chorus-test")


@server.tool()
def echo(text: str) -> str:
    """Say `text` back."""
    return text


@server.tool()
def process_id() -> int:
    """This server process's id."""
    return os.getpid()


@server.tool()
def environment() -> dict[str, str]:
    """The environment this server process was started with."""
    return dict(os.environ)


@server.tool(structured_output=False)
def picture() -> list[Any]:
    """A tiny picture with a caption."""
    return ["a red pixel", Image(data=PIXEL, format="png")]


@server.tool(structured_output=False)
def structured_picture() -> CallToolResult:
    """The tiny picture in structured content alone, as a content block and as a data: URL."""
    return CallToolResult(
        content=[],
        structured_content={
            "content": [{"type": "image", "data": base64.b64encode(PIXEL).decode(), "mimeType": "image/png"}],
            "thumbnail": f"data:image/png;base64,{base64.b64encode(PIXEL * 4).decode()}",
        },
    )


@server.tool(structured_output=False)
def refuse() -> CallToolResult:
    """Always fails, as a tool result with isError."""
    return CallToolResult(content=[TextContent(type="text", text="the vault is locked")], is_error=True)


@server.tool(structured_output=False)
def measure() -> CallToolResult:
    """Structured content only, no text block."""
    return CallToolResult(content=[], structured_content={"width": 3, "height": 4})


@server.tool()
async def pause(seconds: float) -> str:
    """Wait `seconds`, then answer."""
    await anyio.sleep(seconds)
    return f"waited {seconds:g} s"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool named `name` while the server runs, and say the list changed."""

    def added() -> str:
        return f"{name} ran"

    server.add_tool(added, name=name, description=f"Added at run time: {name}.")
    await ctx.notify_tools_changed()
    return f"added {name}"


class Outline(BaseModel):
    """A heading and the headings under it: a schema that refers to itself."""

    heading: str
    children: list[Outline] = []


@server.tool()
def count_headings(outline: Outline) -> int:
    """Count the headings of an outline. Its recursive schema cannot be sent to a model."""
    return 1 + sum(count_headings(child) for child in outline.children)


def bearer_guard(app: Any, token: str) -> Any:
    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    # The legacy HTTP+SSE transport (GET /sse, POST /messages/) instead of streamable HTTP.
    parser.add_argument("--sse", action="store_true")
    arguments = parser.parse_args()
    if arguments.stdio:
        server.run("stdio")
        return
    import uvicorn

    app: Any = server.sse_app() if arguments.sse else server.streamable_http_app()
    token = os.environ.get("MCP_TEST_TOKEN")
    if token:
        app = bearer_guard(app, token)
    print(f"serving on {arguments.port}", file=sys.stderr, flush=True)
    uvicorn.run(app, host="127.0.0.1", port=arguments.port, log_level="warning")


if __name__ == "__main__":
    main()
