"""Whether a call runs at once, waits for a person's yes (`ask`), or is refused; and who may say yes.

The one seam between the tool policy and approvals (`bot.turns.approvals`): `tools.approve`
names tools (`*` wildcards, the most specific pattern wins), an MCP tool its server marks
destructive asks unless named there, and anything else is allowed. The person who asked
decides their own calls; `tools.approvers` may decide anyone's.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Literal

from bot.config import ToolSettings
from bot.tools.base import Tool

CallDecision = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class ApprovalPolicy:
    settings: ToolSettings

    def decision(self, tool: Tool | None) -> CallDecision:
        """What a call of `tool` needs; an unknown tool is allowed to fail as unknown."""
        if tool is None:
            return "allow"
        named = [pattern for pattern in self.settings.approve if fnmatchcase(tool.name, pattern)]
        if named:
            # The pattern with the fewest wildcards is the most specific: `files__read` over `files__*`.
            return self.settings.approve[min(named, key=lambda pattern: (pattern.count("*"), -len(pattern)))]
        return "ask" if tool.destructive else "allow"

    def may_decide(self, decider: str, asker: str | None) -> bool:
        """Whether `decider` (`<lane>:<platform user id>`) may answer a call `asker` made."""
        return decider == asker or decider in self.settings.approvers
