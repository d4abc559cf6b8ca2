"""Tools of Model Context Protocol servers, through the official `mcp` SDK.

Owns connecting to each server of `tools.mcp_servers` (stdio, streamable HTTP,
legacy SSE), listing its tools as `<server>__<tool>`, keeping the list fresh, calling
them, and restarting a server that died. The SDK is imported only when a server
starts (`sdk`); the registry, the policy and the runner treat these tools like built-ins.
"""

from bot.tools.mcp.connection import McpServerStatus
from bot.tools.mcp.servers import McpServers

__all__ = ["McpServerStatus", "McpServers"]
