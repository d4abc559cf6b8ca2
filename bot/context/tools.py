"""`context_inspect`, `snip` and `unsnip`: the model looks at its own context and trims it.

The seed's context-collapse spec gives the model these two tools (an inspection and a
snip); they share `/context` and `/snip`'s implementation, and a snip the model makes
is undone by `/unsnip` like a person's.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from bot.context.inspection import context_overview
from bot.context.maintenance import ContextMaintainer
from bot.context.snipping import snip, unsnip
from bot.tools.base import FunctionTool, Tool, ToolContext
from transcript import context_data

CONTEXT_DESCRIPTION = (
    "See how full your context is: tokens by part against the budget, which messages (by seq) are "
    "in the window, what is summarised, collapsed or snipped."
)
SNIP_DESCRIPTION = (
    "Leave stored messages from_seq..to_seq out of your context to free room (for example a long "
    "tool result you no longer need). They stay stored, and the person can undo it with /unsnip."
)
UNSNIP_DESCRIPTION = (
    "Bring snipped messages back into your context: the snips touching from_seq..to_seq, or the "
    "newest snip when no range is given."
)


class NoArguments(BaseModel):
    pass


class SnipArguments(BaseModel):
    from_seq: int = Field(ge=1, description="The first message to leave out (its seq).")
    to_seq: int = Field(ge=1, description="The last message to leave out (its seq).")


class UnsnipArguments(BaseModel):
    from_seq: int | None = Field(default=None, ge=1, description="Start of the range to bring back.")
    to_seq: int | None = Field(default=None, ge=1, description="End of the range to bring back.")


def context_tools(maintainer: ContextMaintainer) -> list[Tool]:
    async def inspect(context: ToolContext, arguments: NoArguments) -> object:
        return context_data(await context_overview(maintainer, context.session))

    async def snip_range(context: ToolContext, arguments: SnipArguments) -> object:
        snipped = await snip(maintainer, context.session, arguments.from_seq, arguments.to_seq)
        return {
            "snipped": {"from_seq": snipped.first_seq, "to_seq": snipped.last_seq},
            "summary_covers_up_to": snipped.summarised_up_to,
        }

    async def unsnip_range(context: ToolContext, arguments: UnsnipArguments) -> object:
        edges = [seq for seq in (arguments.from_seq, arguments.to_seq) if seq is not None]
        overlapping = (min(edges), max(edges)) if edges else None
        undone = await unsnip(maintainer, context.session, overlapping=overlapping)
        return {"brought_back": [{"from_seq": s.first_seq, "to_seq": s.last_seq} for s in undone]}

    return [
        FunctionTool("context_inspect", CONTEXT_DESCRIPTION, NoArguments, inspect, read_only=True),
        FunctionTool("snip", SNIP_DESCRIPTION, SnipArguments, snip_range, read_only=False),
        FunctionTool("unsnip", UNSNIP_DESCRIPTION, UnsnipArguments, unsnip_range, read_only=False),
    ]
