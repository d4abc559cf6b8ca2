"""Which tools a turn offers: the policy's choice for the persona and chat, if the model can call tools."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.config import Audience
from bot.providers.base import ToolSchema
from bot.tools.base import Tool, function_schema
from bot.tools.registry import ToolRegistry
from persona import Persona
from transcript import count_tokens


@dataclass(frozen=True)
class OfferedTools:
    """The tools a turn offers, by name, sorted by name; `asking`: those whose calls need approval."""

    tools: dict[str, Tool]
    asking: frozenset[str] = frozenset()


class ToolOffer:
    def __init__(self, registry: ToolRegistry, accepts_tools: Callable[[str], bool]) -> None:
        self.registry = registry
        # False for a model whose server refused tools: it is offered none.
        self.accepts_tools = accepts_tools

    def tools_for(self, persona: Persona, *, audience: Audience, model: str) -> OfferedTools:
        if not self.accepts_tools(model):
            return OfferedTools({})
        tools = {tool.name: tool for tool in self.registry.all()}
        decisions = self.registry.decisions(persona_tools=persona.tools, audience=audience)
        return OfferedTools(
            {name: tools[name] for name, decision in decisions.items() if decision != "deny"},
            frozenset(name for name, decision in decisions.items() if decision == "ask"),
        )


def schemas_of(tools: dict[str, Tool]) -> tuple[ToolSchema, ...]:
    return tuple(function_schema(tool) for tool in tools.values())


# Every model call of every turn counts its schemas. The sets offered are few (by persona,
# chat kind and model), counting one costs about a millisecond and even serialising it to
# look the count up about 0.2 ms; each tool's parameters are one long-lived dict, so a set
# is known by its names, descriptions and those dicts' identities.
_COUNTED_SETS = 64
# Assembly runs on the database threads, several of them on PostgreSQL.
_counted_lock = threading.Lock()
_counted: OrderedDict[tuple[tuple[str, str, int], ...], tuple[tuple[object, ...], int]] = OrderedDict()


def schema_tokens(schemas: Sequence[ToolSchema]) -> int:
    """What the schemas cost in the request (they travel as JSON beside the messages)."""
    if not schemas:
        return 0
    functions = [schema["function"] for schema in schemas]
    key = tuple(
        (function["name"], function["description"], id(function["parameters"])) for function in functions
    )
    with _counted_lock:
        counted = _counted.get(key)
        if counted is not None:
            _counted.move_to_end(key)
            return counted[1]
    tokens = count_tokens(json.dumps(list(schemas), ensure_ascii=False))
    with _counted_lock:
        # The parameters are held with the count, so no other dict can take their identities.
        _counted[key] = (tuple(function["parameters"] for function in functions), tokens)
        if len(_counted) > _COUNTED_SETS:
            _counted.popitem(last=False)
    return tokens
