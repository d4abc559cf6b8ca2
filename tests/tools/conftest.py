from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest
import pytest_asyncio

from bot.config import ToolSettings
from bot.tools.mcp import McpServers
from tests.tools.mcp_support import HttpMcpServer

StartServers = Callable[[ToolSettings], Awaitable[McpServers]]


@pytest_asyncio.fixture
async def start_servers() -> AsyncIterator[StartServers]:
    """Starts the MCP servers of some settings and waits until each is ready or down;
    every one started is closed after the test, whatever happened."""
    opened: list[McpServers] = []

    async def start(settings: ToolSettings) -> McpServers:
        servers = McpServers(settings)
        opened.append(servers)
        servers.start()
        await servers.settled()
        return servers

    yield start
    for servers in opened:
        await servers.aclose()


@pytest.fixture
def http_servers() -> Iterator[list[HttpMcpServer]]:
    """The HTTP test servers a test started (`mcp_support.serve`), killed after it."""
    running: list[HttpMcpServer] = []
    yield running
    for server in running:
        server.kill()
