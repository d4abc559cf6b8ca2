"""The tools Chorus itself offers the model, over the same functions as the chat commands.

`/recall`, `/context`, `/snip`, `/unsnip` format their results for people; the tools
return the same results as JSON. Which of them a turn offers is the policy's decision.
"""

from __future__ import annotations

from bot.context.maintenance import ContextMaintainer
from bot.memory.service import MemoryService
from bot.tools.base import Tool
from bot.tools.builtin.context import context_tools
from bot.tools.builtin.memory import memory_tools


def builtin_tools(memory: MemoryService | None, maintainer: ContextMaintainer | None) -> list[Tool]:
    """The built-in tools this process can run (none of memory's when memory is off)."""
    tools: list[Tool] = []
    if memory is not None and memory.settings.enabled:
        tools += memory_tools(memory)
    if maintainer is not None:
        tools += context_tools(maintainer)
    return tools
