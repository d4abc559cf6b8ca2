"""Every configured MCP server of this process, as one source of tools.

Only `tools.mcp_servers` in the settings starts a server: nothing said in a chat
adds or changes one. Each `chorus serve` process holds its own connections.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence

from bot.config import ToolSettings
from bot.tools.base import Tool
from bot.tools.mcp.connection import McpConnection, McpServerStatus


class McpServers:
    """The `ToolSource` of every enabled server, with their start, health and close."""

    def __init__(self, settings: ToolSettings, environ: Mapping[str, str] | None = None) -> None:
        environment = os.environ if environ is None else environ
        self.connections = [
            McpConnection(name, server, environment)
            for name, server in settings.mcp_servers.items()
            if server.enabled
        ]

    def tools(self) -> Sequence[Tool]:
        """The tools of every server that listed some; a down server whose backoff has
        passed is started again meanwhile, for a later turn."""
        tools: list[Tool] = []
        for connection in self.connections:
            connection.retry_if_due()
            tools.extend(connection.tools)
        return tools

    def start(self) -> None:
        """Every server connects in the background: nothing waits for them here."""
        for connection in self.connections:
            connection.start()

    async def settled(self) -> None:
        """Until every server is ready or down (for `chorus tools`)."""
        await asyncio.gather(*(connection.settled() for connection in self.connections))

    async def aclose(self) -> None:
        await asyncio.gather(*(connection.aclose() for connection in self.connections))

    def health(self) -> list[McpServerStatus]:
        return [connection.status() for connection in self.connections]
