"""A tool a test holds open: it runs until the test lets it finish, so a lane's progress shows."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pydantic import BaseModel

from bot.runtime import Runtime
from bot.tools.base import FunctionTool, ToolContext
from bot.tools.registry import StaticTools

# The result a held tool gives back: raw output a visitor must never see.
RAW_RESULT = "RAW-TOOL-OUTPUT: the dentist is on Tuesday at 9"


class Query(BaseModel):
    query: str


@dataclass
class HeldTool:
    """`lookup {query}`: waits for `release`, then answers with RAW_RESULT."""

    name: str = "lookup"
    release: asyncio.Event = field(default_factory=asyncio.Event)
    asked: list[str] = field(default_factory=list)

    def tool(self) -> FunctionTool[Query]:
        async def lookup(context: ToolContext, arguments: Query) -> object:
            self.asked.append(arguments.query)
            await self.release.wait()
            return RAW_RESULT

        return FunctionTool(self.name, "Look something up.", Query, lookup, read_only=True)

    def install(self, runtime: Runtime) -> HeldTool:
        runtime.tools.add_source(StaticTools([self.tool()]))
        return self
