"""`chorus tools`: every tool this configuration offers, where it comes from, and who may call it.

The MCP servers are started (as `chorus serve` would), listed once every one is ready
or down, and closed again. A column per audience (admins, members, public, groups) says
what the policy answers for the default persona: allow, ask or deny (docs/access.md).
"""

from __future__ import annotations

import json
from typing import Any

from bot.config import AUDIENCES
from bot.runtime import Runtime


async def describe_tools(runtime: Runtime) -> dict[str, Any]:
    persona = runtime.engine.personas.default
    runtime.mcp_servers.start()
    await runtime.mcp_servers.settled()
    # Before the registry is asked: asking starts a down server again once its backoff passed.
    servers = runtime.mcp_servers.health()
    registry = runtime.tools
    decisions = {
        audience: registry.decisions(persona_tools=persona.tools, audience=audience) for audience in AUDIENCES
    }
    return {
        "persona": persona.id,
        "tools": [
            {
                "name": tool.name,
                "source": tool.source,
                "read_only": tool.read_only,
                "audiences": {audience: decisions[audience][tool.name] for audience in AUDIENCES},
                "description": tool.description,
            }
            for tool in registry.all()
        ],
        "mcp_servers": [
            {
                "name": server.name,
                "transport": server.transport,
                "state": server.state,
                "tools": len(server.tools),
                "last_error": server.last_error,
            }
            for server in servers
        ],
    }


def render(described: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(described, indent=2, ensure_ascii=False)
    tools = described["tools"]
    lines = [f"Tools for persona {described['persona']}, per audience:"]
    if not tools:
        lines.append("  none (tools.enabled, tools.allow and tools.mcp_servers decide)")
    width = max((len(tool["name"]) for tool in tools), default=0)
    source_width = max((len(tool["source"]) for tool in tools), default=0)
    if tools:
        heading = "  ".join(f"{audience:<7}" for audience in AUDIENCES)
        lines.append(f"  {'':<{width}}  {'':<{source_width}}  {heading}".rstrip())
    for tool in tools:
        columns = "  ".join(f"{tool['audiences'][audience]:<7}" for audience in AUDIENCES)
        lines.append(f"  {tool['name']:<{width}}  {tool['source']:<{source_width}}  {columns}".rstrip())
    if described["mcp_servers"]:
        lines.append("MCP servers:")
    for server in described["mcp_servers"]:
        line = f"  {server['name']} ({server['transport']}): {server['state']}, {server['tools']} tools"
        if server["last_error"]:
            line += f" — {server['last_error']}"
        lines.append(line)
    return "\n".join(lines)
