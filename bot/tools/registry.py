"""Every tool this process knows, from every source: the built-ins and each MCP server's."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from bot.config import Audience, Decision
from bot.tools.base import Tool
from bot.tools.policy import ToolPolicy

log = logging.getLogger(__name__)


class ToolSource(Protocol):
    """Tools from one place; an MCP server's list changes while the process runs."""

    def tools(self) -> Sequence[Tool]: ...


class StaticTools:
    """A fixed list of tools (the built-ins)."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = tuple(tools)

    def tools(self) -> Sequence[Tool]:
        return self._tools


class ToolRegistry:
    def __init__(self, sources: Sequence[ToolSource], policy: ToolPolicy) -> None:
        self.sources = list(sources)
        self.policy = policy
        self._shadowed: set[str] = set()

    def add_source(self, source: ToolSource) -> None:
        self.sources.append(source)

    def all(self) -> list[Tool]:
        """Every tool, sorted by name; a name two sources share keeps the first source's tool."""
        found: dict[str, Tool] = {}
        for source in self.sources:
            for tool in source.tools():
                if tool.name not in found:
                    found[tool.name] = tool
                elif tool.name not in self._shadowed:
                    self._shadowed.add(tool.name)
                    log.warning(
                        "two tools are named %s (%s and %s); the first is used",
                        tool.name,
                        found[tool.name].source,
                        tool.source,
                    )
        return [found[name] for name in sorted(found)]

    def decisions(self, *, persona_tools: Sequence[str] | None, audience: Audience) -> dict[str, Decision]:
        """What the policy answers for every tool, by name, sorted by name."""
        return {
            tool.name: self.policy.decide(tool, persona_tools=persona_tools, audience=audience)
            for tool in self.all()
        }

    def offered(self, *, persona_tools: Sequence[str] | None, audience: Audience) -> list[Tool]:
        """The tools this persona offers this audience (allowed or asking), sorted by name."""
        return [
            tool
            for tool in self.all()
            if self.policy.decide(tool, persona_tools=persona_tools, audience=audience) != "deny"
        ]
