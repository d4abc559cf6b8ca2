"""Which tools are offered: the deployment's allow and deny lists, a persona's own list, groups.

Only the tools this allows are offered to the model (their schemas sent) and run: a
call of any other tool is answered as unknown. Names match with `*` wildcards
(`mcp_time__*`), and deny wins over every allow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from bot.config import ToolSettings
from bot.tools.base import Tool


def matches(patterns: Iterable[str], name: str) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


@dataclass(frozen=True)
class ToolPolicy:
    settings: ToolSettings

    def allows(self, tool: Tool, *, persona_tools: Sequence[str] | None, group: bool) -> bool:
        """Whether `tool` may be offered to a persona (with its own list, or None) in this chat."""
        settings = self.settings
        name = tool.name
        if not settings.enabled or matches(settings.deny, name) or not matches(settings.allow, name):
            return False
        if persona_tools is not None and not matches(persona_tools, name):
            return False
        return not group or self.allowed_in_groups(tool)

    def allowed_in_groups(self, tool: Tool) -> bool:
        if tool.in_groups is not None:
            return tool.in_groups
        rule = self.settings.in_groups
        if rule == "read_only":
            return tool.read_only
        if rule == "all":
            return True
        if rule == "none":
            return False
        return matches(rule, tool.name)
