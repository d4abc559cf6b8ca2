"""What each audience may do with each tool: allow, ask or deny (docs/access.md).

The one place that answers it; the offer, the runner, approvals and `chorus tools` all ask
here. The deployment's allow and deny lists and a persona's own list come first (a tool
they exclude is denied to everyone); then `tools.approve` (of the names that match and
list the audience, the most specific decides); then the defaults:

- public: read-only tools only (built-in ones and MCP tools marked `readOnlyHint`);
- members: read-only tools and the built-ins (they change only the asker's own memory,
  reminders and context) run; any other MCP tool asks;
- admins: every tool runs, but one its server marks `destructiveHint` asks;
- groups: the tools `tools.in_groups` lets in, as members get them.

Denied tools are not offered to the model (a call of one is answered as unknown); `ask`
tools are offered, and a call of one waits for a yes (`bot.turns.approvals`). Names match
with `*` wildcards (`mcp_time__*`), and deny wins over every allow.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from bot.config import Audience, Decision, ToolSettings
from bot.tools.base import BUILTIN_SOURCE, Tool


def matches(patterns: Iterable[str], name: str) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def specificity(pattern: str) -> tuple[int, int]:
    """Sorts the most specific pattern first: fewer wildcards, then longer (`fs__read` before `fs__*`)."""
    return pattern.count("*"), -len(pattern)


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
        named = [
            pattern
            for pattern, decisions in settings.approve.items()
            if audience in decisions and fnmatchcase(name, pattern)
        ]
        if named:
            return settings.approve[min(named, key=specificity)][audience]
        return self.default(tool, audience)

    def default(self, tool: Tool, audience: Audience) -> Decision:
        """The answer when `tools.approve` names neither the tool nor the audience."""
        if audience == "public":
            return "allow" if tool.read_only else "deny"
        if audience == "groups" and not self.allowed_in_groups(tool):
            return "deny"
        if tool.read_only:
            return "allow"
        if tool.destructive:
            return "ask"
        if audience == "admins" or tool.source == BUILTIN_SOURCE:
            return "allow"
        return "ask"

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
