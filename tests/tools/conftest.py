from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest_asyncio

from bot.config import ToolSettings
from bot.tools.mcp import McpServers

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
