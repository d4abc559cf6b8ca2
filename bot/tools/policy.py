"""What each audience may do with each tool: allow, ask or deny (docs/access.md).

The one place that answers it. The deployment's allow and deny lists and a persona's own
list come first (a tool they exclude is denied to everyone); then `tools.approve` (the
first name matching decides, per audience); then the defaults: admins and members every
tool, the public read-only tools only (built-in ones and MCP tools marked `readOnlyHint`),
groups as `tools.in_groups` says. Denied tools are not offered to the model (a call of one
is answered as unknown); `ask` tools are offered, and a call of one waits for approval.
Names match with `*` wildcards (`mcp_time__*`), and deny wins over every allow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from bot.config import Audience, Decision, ToolSettings
from bot.tools.base import Tool


def matches(patterns: Iterable[str], name: str) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


@dataclass(frozen=True)
class ToolPolicy:
    settings: ToolSettings

    def decide(self, tool: Tool, *, persona_tools: Sequence[str] | None, audience: Audience) -> Decision:
        """What `audience` may do with `tool` when a persona (with its own list, or None) speaks."""
        settings = self.settings
        name = tool.name
        if not settings.enabled or matches(settings.deny, name) or not matches(settings.allow, name):
            return "deny"
        if persona_tools is not None and not matches(persona_tools, name):
            return "deny"
        for pattern, decisions in settings.approve.items():
            if fnmatchcase(name, pattern) and audience in decisions:
                return decisions[audience]
        if audience == "public":
            return "allow" if tool.read_only else "deny"
        if audience == "groups":
            return "allow" if self.allowed_in_groups(tool) else "deny"
        return "allow"

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
