"""JSON Schemas as OpenAI-compatible models accept them for a tool's arguments.

Servers differ in how much of JSON Schema they take: references (`$ref` into `$defs`)
break several, `title`s only cost tokens. A schema is sent self-contained: local
references inlined, titles dropped, an object at the top. One that cannot be made so
(a recursive reference, a non-object top) raises `UnsendableSchema`.
"""

from __future__ import annotations

from typing import Any

from bot.errors import ToolError

# Keywords whose value is one schema, a list of schemas, or a mapping of names to schemas.
_ONE_SCHEMA = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties")
_DEFINITIONS = ("$defs", "definitions")


class UnsendableSchema(ToolError):
    """The schema cannot be sent to a model; the message says why."""


def normalise_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` inlined, without titles, as an object with properties."""
    definitions: dict[str, Any] = {}
    for key in _DEFINITIONS:
        found = schema.get(key)
        if isinstance(found, dict):
            definitions.update({f"#/{key}/{name}": value for name, value in found.items()})
    normalised = _node(schema, definitions, ())
    if not isinstance(normalised, dict):
        raise UnsendableSchema("the schema is not an object")
    if normalised.get("type", "object") != "object":
        raise UnsendableSchema(f"the arguments must be an object, not {normalised.get('type')!r}")
    return {"type": "object", "properties": {}, **normalised}


def _node(node: object, definitions: dict[str, Any], following: tuple[str, ...]) -> object:
    if not isinstance(node, dict):
        return node
    reference = node.get("$ref")
    if isinstance(reference, str):
        if reference in following:
            raise UnsendableSchema(f"the schema refers to itself through {reference}")
        if reference not in definitions:
            raise UnsendableSchema(f"the schema refers to {reference}, which it does not define")
        target = _node(definitions[reference], definitions, (*following, reference))
        siblings = _node({key: value for key, value in node.items() if key != "$ref"}, definitions, following)
        # Keywords beside a reference (a description, a default) refine what it points to.
        if isinstance(target, dict) and isinstance(siblings, dict):
            return {**target, **siblings}
        return target
    result: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DEFINITIONS or (key == "title" and isinstance(value, str)):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            result[key] = {name: _node(item, definitions, following) for name, item in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            result[key] = [_node(item, definitions, following) for item in value]
        elif key in _ONE_SCHEMA:
            result[key] = (
                [_node(item, definitions, following) for item in value]
                if isinstance(value, list)
                else _node(value, definitions, following)
            )
        else:
            result[key] = value
    return result
