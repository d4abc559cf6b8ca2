"""The tokens of the offered tools' schemas are counted once per set, and a changed set afresh."""

from __future__ import annotations

import json
from typing import Any

from bot.tools.offer import schema_tokens
from transcript import count_tokens


def _schema(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def test_each_set_of_schemas_is_counted_as_its_json() -> None:
    small = {"type": "object", "properties": {}}
    large = {"type": "object", "properties": {f"field_{i}": {"type": "string"} for i in range(40)}}
    sets = [
        (_schema("lookup", "Look a word up.", small),),
        # The same name and description with other parameters: a server's tool that changed.
        (_schema("lookup", "Look a word up.", large),),
        (_schema("lookup", "Look a word up in the dictionary of this chat.", small),),
        (_schema("lookup", "Look a word up.", small), _schema("define", "Define a word.", small)),
    ]
    for _ in range(2):  # the second pass answers from what the first counted
        for schemas in sets:
            assert schema_tokens(schemas) == count_tokens(json.dumps(list(schemas), ensure_ascii=False))
    assert len({schema_tokens(schemas) for schemas in sets}) == len(sets)
    assert schema_tokens(()) == 0
