"""Real MCP servers for tests: the SDK-built test server over HTTP as a process, and helpers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from bot.config import ToolSettings
from bot.providers.base import ToolCall
from bot.storage.models import ChatSession
from bot.tools.base import ReportProgress, ToolContext, ToolResult
from bot.tools.mcp import McpServers
from bot.tools.policy import ToolPolicy
from bot.tools.registry import ToolRegistry
from bot.tools.runner import run_call
from tests.durable.serve_process import free_port
from tests.support.peers import npm_mcp_server
from tests.support.process import LoggedProcess

SERVER_SCRIPT = Path(__file__).with_name("mcp_server.py")
# A loaded two-core machine takes seconds to import the SDK and start a server.
READY_SECONDS = 120.0
# `tools.timeout_seconds` of these calls: a restart under load fits in it.
CALL_SECONDS = 60.0


def stdio_test_server(**extra: Any) -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(SERVER_SCRIPT), "--stdio"], **extra}


def time_server(**extra: Any) -> dict[str, Any]:
    """`mcp-server-time` from PyPI, as an operator would configure it."""
    return {"command": sys.executable, "args": ["-m", "mcp_server_time"], **extra}


def npm_server(name: str, *args: str, **extra: Any) -> dict[str, Any]:
    """The npm MCP reference server `name` (`everything`, `filesystem`, `memory`) over stdio;
    the test skips (and fails under CI=true) when it is not installed."""
    return {"command": npm_mcp_server(name)[0], "args": list(args), **extra}


class HttpMcpServer(LoggedProcess):
    """The test server on streamable HTTP at 127.0.0.1:<port>, a process a test may kill -9."""

    def __init__(self, workdir: Path, token: str | None = None, sse: bool = False) -> None:
        self.port = free_port()
        super().__init__(workdir / f"mcp-http-{self.port}.log")
        self.sse = sse
        self.environ = {**os.environ, **({"MCP_TEST_TOKEN": token} if token else {})}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'sse' if self.sse else 'mcp'}"

    async def start(self) -> None:
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    str(SERVER_SCRIPT),
                    "--port",
                    str(self.port),
                    *(["--sse"] if self.sse else []),
                ],
                env=self.environ,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + READY_SECONDS
        async with httpx.AsyncClient() as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise AssertionError(f"the MCP test server exited:\n{self.log()}")
                try:
                    # Any answer means it listens (the SSE endpoint's is a stream: only its head is read).
                    async with client.stream("GET", self.url):
                        return
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        raise AssertionError(f"the MCP test server did not start:\n{self.log()}")


async def serve(running: list[HttpMcpServer], tmp_path: Path, **options: Any) -> HttpMcpServer:
    """A started HTTP test server, added to `running` (the `http_servers` fixture kills them)."""
    server = HttpMcpServer(tmp_path, **options)
    running.append(server)
    await server.start()
    return server


def registry_of(servers: McpServers, settings: ToolSettings) -> ToolRegistry:
    return ToolRegistry([servers], ToolPolicy(settings))


def tool_settings(**servers: dict[str, Any]) -> ToolSettings:
    return ToolSettings.model_validate({"mcp_servers": servers})


def context(on_progress: ReportProgress | None = None) -> ToolContext:
    session = ChatSession(id="s1", kind="private", owner_kind="person", owner_id="p1")
    return ToolContext(
        session=session, persona_id="ada", chat=None, group=False, call_id="call-1", on_progress=on_progress
    )


async def call(
    registry: ToolRegistry, tool_name: str, /, on_progress: ReportProgress | None = None, **arguments: Any
) -> ToolResult:
    """One call the way a turn runs it: among the offered tools, through `run_call`."""
    offered = {tool.name: tool for tool in registry.offered(persona_tools=None, audience="members")}
    request = ToolCall(id="call-1", name=tool_name, arguments=json.dumps(arguments))
    return await run_call(request, offered, context(on_progress), CALL_SECONDS)


async def until(
    read: Callable[[], Awaitable[Any]], done: Callable[[Any], bool], what: str, timeout: float = READY_SECONDS
) -> Any:
    """`read()` again and again until `done` says yes of what it gave; that value."""
    deadline = time.monotonic() + timeout
    while not done(value := await read()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; last seen: {value!r}")
        await asyncio.sleep(0.1)
    return value


def child_pid(marker: str) -> int:
    """The pid of this process's one child whose command line holds `marker` (a stdio server)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            parent = int((entry / "stat").read_text().split(")")[-1].split()[1])
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and marker in command:
            found.append(int(entry.name))
    assert len(found) == 1, f"children running {marker}: {found}"
    return found[0]


def process_gone(pid: int) -> bool:
    """True once `pid` has exited (a zombie waiting for its parent has exited too)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"
