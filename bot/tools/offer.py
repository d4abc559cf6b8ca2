"""Which tools a turn offers: the policy's choice for the persona and chat, if the model can call tools."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence

from bot.providers.base import ToolSchema
from bot.tools.base import Tool, function_schema
from bot.tools.registry import ToolRegistry
from persona import Persona
from transcript import count_tokens


class ToolOffer:
    def __init__(self, registry: ToolRegistry, accepts_tools: Callable[[str], bool]) -> None:
        self.registry = registry
        # False for a model whose server refused tools: it is offered none.
        self.accepts_tools = accepts_tools

    def tools_for(self, persona: Persona, *, group: bool, model: str) -> dict[str, Tool]:
        """The tools offered, by name, sorted by name."""
        if not self.accepts_tools(model):
            return {}
        offered = self.registry.offered(persona_tools=persona.tools, group=group)
        return {tool.name: tool for tool in offered}


def schemas_of(tools: dict[str, Tool]) -> tuple[ToolSchema, ...]:
    return tuple(function_schema(tool) for tool in tools.values())


def schema_tokens(schemas: Sequence[ToolSchema]) -> int:
    """What the schemas cost in the request (they travel as JSON beside the messages)."""
    return _json_tokens(json.dumps(list(schemas), ensure_ascii=False)) if schemas else 0


# Every model call of every turn counts its schemas; the sets offered are few (by
# persona, chat kind and model), and counting one costs about a millisecond.
@functools.lru_cache(maxsize=64)
def _json_tokens(text: str) -> int:
    return count_tokens(text)
