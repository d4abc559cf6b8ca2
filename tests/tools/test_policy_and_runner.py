"""Which tools are offered, and how one call runs: every failure is a result the model can read."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from pydantic import BaseModel, Field

from bot.config import ToolSettings
from bot.providers.base import ToolCall
from bot.storage.models import ChatSession
from bot.tools.base import ChatAddress, FunctionTool, ToolContext, ToolResult, function_schema
from bot.tools.policy import ToolPolicy
from bot.tools.registry import StaticTools, ToolRegistry
from bot.tools.runner import run_call
from bot.tools.schemas import UnsendableSchema, normalise_schema


class Query(BaseModel):
    query: str = Field(description="What to look for.")
    k: int = Field(default=5, ge=1, le=20)


class Nothing(BaseModel):
    pass


async def echo(context: ToolContext, arguments: Query) -> object:
    return {"query": arguments.query, "k": arguments.k}


async def slow(context: ToolContext, arguments: Nothing) -> object:
    await asyncio.sleep(30)
    return "never"


async def broken(context: ToolContext, arguments: Nothing) -> object:
    raise RuntimeError("the disk is on fire")


def tool(
    name: str, *, read_only: bool = True, handler: Any = echo, arguments: Any = Query
) -> FunctionTool[Any]:
    return FunctionTool(name, f"The {name} tool.", arguments, handler, read_only=read_only)


CONTEXT = ToolContext(
    session=ChatSession(id="s1", kind="private", owner_kind="person", owner_id="p1"),
    persona_id="ada",
    chat=ChatAddress("web", "visitor-1", "private"),
    group=False,
    call_id="call_1",
)


def names(registry: ToolRegistry, **where: Any) -> list[str]:
    return [t.name for t in registry.offered(**where)]


def test_deny_wins_wildcards_match_and_personas_narrow() -> None:
    tools = [tool("recall"), tool("remember", read_only=False), tool("time__now"), tool("time__convert")]
    settings = ToolSettings(allow=["*"], deny=["time__conv*"])
    registry = ToolRegistry([StaticTools(tools)], ToolPolicy(settings))

    assert names(registry, persona_tools=None, audience="members") == ["recall", "remember", "time__now"]
    assert names(registry, persona_tools=["time__*"], audience="members") == ["time__now"]
    assert names(registry, persona_tools=None, audience="groups") == ["recall", "time__now"]
    off = ToolRegistry([StaticTools(tools)], ToolPolicy(ToolSettings(enabled=False)))
    assert names(off, persona_tools=None, audience="members") == []


def test_the_defaults_per_audience_and_the_most_specific_approve_entry() -> None:
    def mcp(name: str, *, read_only: bool = False, destructive: bool = False) -> FunctionTool[Any]:
        return FunctionTool(
            name, "", Query, echo, read_only=read_only, source="mcp:fs", destructive=destructive
        )

    tools = [
        tool("recall"),
        tool("remember", read_only=False),
        mcp("fs__read", read_only=True),
        mcp("fs__write"),
        mcp("fs__delete", destructive=True),
    ]
    audiences = ("admins", "members", "public", "groups")

    def table(settings: ToolSettings) -> dict[str, list[str]]:
        policy = ToolPolicy(settings)
        return {
            each.name: [policy.decide(each, persona_tools=None, audience=audience) for audience in audiences]
            for each in tools
        }

    assert table(ToolSettings()) == {
        "recall": ["allow", "allow", "allow", "allow"],
        "remember": ["allow", "allow", "deny", "deny"],
        "fs__read": ["allow", "allow", "allow", "allow"],
        "fs__write": ["allow", "ask", "deny", "deny"],
        "fs__delete": ["ask", "ask", "deny", "deny"],
    }
    # Groups let in by `in_groups` get what members get.
    assert table(ToolSettings(in_groups="all"))["fs__write"] == ["allow", "ask", "deny", "ask"]
    # The most specific name that lists the audience decides, whatever the order.
    approve = {"fs__*": {"members": "allow", "public": "ask"}, "fs__delete": {"members": "deny"}}
    assert table(ToolSettings(approve=approve))["fs__delete"] == ["ask", "deny", "ask", "deny"]
    assert table(ToolSettings(approve=approve))["fs__write"] == ["allow", "allow", "ask", "deny"]
    # tools.deny wins over any entry.
    assert table(ToolSettings(approve=approve, deny=["fs__write"]))["fs__write"] == ["deny"] * 4


def test_group_rule_read_only_all_none_or_a_list() -> None:
    tools = [tool("recall"), tool("remember", read_only=False)]
    for rule, offered in [
        ("read_only", ["recall"]),
        ("all", ["recall", "remember"]),
        ("none", []),
        (["rem*"], ["remember"]),
    ]:
        registry = ToolRegistry([StaticTools(tools)], ToolPolicy(ToolSettings(in_groups=rule)))
        assert names(registry, persona_tools=None, audience="groups") == offered, rule


def test_the_first_source_keeps_a_shared_name() -> None:
    first, second = tool("recall"), tool("recall", read_only=False)
    registry = ToolRegistry(
        [StaticTools([first]), StaticTools([second, tool("alpha")])], ToolPolicy(ToolSettings())
    )

    assert [t.name for t in registry.all()] == ["alpha", "recall"]
    assert registry.all()[1] is first


def test_schema_comes_from_the_arguments_model_self_contained() -> None:
    class Inner(BaseModel):
        city: str

    class Outer(BaseModel):
        where: Inner
        when: str | None = None

    schema = function_schema(tool("trip", arguments=Outer))

    parameters = schema["function"]["parameters"]
    assert "$defs" not in json.dumps(parameters) and "$ref" not in json.dumps(parameters)
    assert parameters["properties"]["where"]["properties"]["city"] == {"type": "string"}
    assert "title" not in parameters and "title" not in parameters["properties"]["where"]


def test_a_recursive_or_non_object_schema_cannot_be_sent() -> None:
    recursive = {
        "type": "object",
        "properties": {"next": {"$ref": "#/$defs/Node"}},
        "$defs": {"Node": {"$ref": "#/$defs/Node"}},
    }
    with pytest.raises(UnsendableSchema):
        normalise_schema(recursive)
    with pytest.raises(UnsendableSchema):
        normalise_schema({"type": "array"})
    # A property called "title" is a name, not the keyword.
    kept = normalise_schema({"type": "object", "properties": {"title": {"type": "string", "title": "Title"}}})
    assert kept["properties"] == {"title": {"type": "string"}}


async def call(name: str, arguments: str, *tools: FunctionTool[Any], timeout: float = 30) -> ToolResult:
    offered = {t.name: t for t in tools}
    return await run_call(ToolCall("call_1", name, arguments), offered, CONTEXT, timeout)


async def test_a_good_call_returns_json() -> None:
    result = await call("recall", '{"query": "dentist"}', tool("recall"))
    assert not result.is_error
    assert json.loads(result.content) == {"query": "dentist", "k": 5}


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("recal", '{"query": "x"}', "no tool named 'recal'. Tools you can call: recall"),
        ("recall", '{"query": ', "not valid JSON"),
        ("recall", '["x"]', "must be a JSON object"),
        ("recall", '{"k": 3}', "query: Field required"),
        ("recall", '{"query": "x", "k": 99}', "k: Input should be less than or equal to 20"),
    ],
)
async def test_what_went_wrong_is_the_result(name: str, arguments: str, says: str) -> None:
    result = await call(name, arguments, tool("recall"))
    assert result.is_error
    assert says in result.content


async def test_an_exception_and_a_timeout_are_results_too() -> None:
    failing = await call("broken", "{}", tool("broken", handler=broken, arguments=Nothing))
    late = await call("slow", "", tool("slow", handler=slow, arguments=Nothing), timeout=0.05)

    assert failing.is_error and "RuntimeError: the disk is on fire" in failing.content
    assert late.is_error and "did not finish within 0.05 seconds" in late.content


async def test_cancellation_is_not_swallowed() -> None:
    started = asyncio.Event()

    async def waits(context: ToolContext, arguments: Nothing) -> object:
        started.set()
        await asyncio.sleep(30)
        return "never"

    running = asyncio.create_task(call("waits", "{}", tool("waits", handler=waits, arguments=Nothing)))
    async with asyncio.timeout(30):
        await started.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_each_call_logs_one_json_line_without_what_was_said(caplog: pytest.LogCaptureFixture) -> None:
    from bot.logs import JsonFormatter

    with caplog.at_level(logging.INFO, logger="bot.tools.runner"):
        await call("recall", '{"query": "my secret diagnosis"}', tool("recall"))

    [record] = [r for r in caplog.records if r.name == "bot.tools.runner"]
    line = json.loads(JsonFormatter().format(record))
    assert (line["tool"], line["outcome"], line["source"]) == ("recall", "ok", "builtin")
    assert line["argument_chars"] == len('{"query": "my secret diagnosis"}')
    assert "secret" not in json.dumps(line)


def test_a_tools_schema_is_built_once_and_shared_by_every_model_call() -> None:
    class Lookup(BaseModel):
        query: str = Field(description="What to look up.")

    async def lookup(context: ToolContext, arguments: Lookup) -> object:
        return arguments.query

    tool = FunctionTool("lookup", "Look something up.", Lookup, lookup, read_only=True)

    first, second = function_schema(tool), function_schema(tool)

    # pydantic's schema generation was most of a tool round's CPU when it ran per call.
    assert first["function"]["parameters"] is second["function"]["parameters"]
    assert first["function"]["parameters"]["properties"]["query"]["description"] == "What to look up."
