"""Anthropic through the turn engine: signed thinking replayed across tool rounds and turns,
cache breakpoints and billed tokens in /context, failover to an OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from bot.memory.distill import ModelDistiller, SourceBlock
from bot.runtime import Runtime
from bot.tools.base import FunctionTool, ToolContext
from bot.tools.registry import StaticTools
from tests.fakes.anthropic_server import Answer, FakeAnthropic, overloaded
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runtime import RuntimeFactory, inbound
from transcript import PROVIDER_BLOCKS_KEY
from transcript.compaction import SUMMARY_INSTRUCTIONS

CLAUDE = [{"name": "claude", "provider": "anthropic", "model": "claude-test", "thinking": True}]


class City(BaseModel):
    city: str


async def _weather(context: ToolContext, arguments: City) -> object:
    return {"city": arguments.city, "sky": "rain"}


WEATHER = FunctionTool("weather", "The weather in a city.", City, _weather, read_only=True)


def anthropic_runtime(
    runtimes: RuntimeFactory, tmp_path: Path, server: FakeAnthropic, **overrides: Any
) -> Runtime:
    runtime = runtimes(
        tmp_path,
        model_provider="anthropic",
        model_base_url=server.base_url,
        model_api_key="sk-ant-test",
        model_name="claude-test",
        models=CLAUDE,
        memory_enabled=False,
        **overrides,
    )
    runtime.tools.add_source(StaticTools([WEATHER]))
    return runtime


def turn_bodies(server: FakeAnthropic) -> list[dict[str, Any]]:
    """The bodies of the turns' requests (those that offer tools), in order."""
    return [request.json for request in server.requests if request.json.get("tools")]


def tool_round(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of the assistant message that called a tool."""
    return next(
        message["content"]
        for message in body["messages"]
        if message["role"] == "assistant" and any(block["type"] == "tool_use" for block in message["content"])
    )


@pytest.mark.parametrize("lane", ["web", "telegram"])
async def test_a_tool_round_replays_its_signed_thinking_in_this_turn_and_the_next(
    runtimes: RuntimeFactory, tmp_path: Path, fake_anthropic: FakeAnthropic, lane: str
) -> None:
    runtime = anthropic_runtime(runtimes, tmp_path, fake_anthropic)
    engine = runtime.engine
    await engine.respond(inbound("/think high", lane=lane))
    fake_anthropic.script(
        Answer(thinking="The weather tool knows Oslo.", tool_calls=[("weather", {"city": "Oslo"})]),
        Answer(text="It rains in Oslo."),
        Answer(text="Take an umbrella."),
    )

    first = await engine.respond(inbound("weather in Oslo?", lane=lane))
    second = await engine.respond(inbound("what should I take?", lane=lane))

    # The stand-in refuses a round without the thinking it signed: these replies prove the replay.
    assert (first.text, second.text) == ("It rains in Oslo.", "Take an umbrella.")
    asked, answered, later = turn_bodies(fake_anthropic)
    assert asked["thinking"] == answered["thinking"] == {"type": "enabled", "budget_tokens": 16384}
    for body in (answered, later):  # within the round, then read back from storage a turn later
        blocks = tool_round(body)
        assert [block["type"] for block in blocks] == ["thinking", "tool_use"]
        assert blocks[0]["thinking"] == "The weather tool knows Oslo."
        assert blocks[0]["signature"]
    stored = runtime.stores.messages.rows_after(first.session_id or "", 0)
    (call_row,) = [row for row in stored if row.tool_calls]
    assert isinstance(call_row.provider_blocks, dict)
    assert call_row.provider_blocks["provider"] == "anthropic"


async def test_a_redacted_thinking_block_is_stored_and_sent_back_unchanged(
    runtimes: RuntimeFactory, tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    runtime = anthropic_runtime(runtimes, tmp_path, fake_anthropic)
    engine = runtime.engine
    await engine.respond(inbound("/think high"))
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}
    fake_anthropic.script(
        Answer(redacted_thinking=redacted["data"], tool_calls=[("weather", {"city": "Oslo"})]),
        Answer(text="It rains in Oslo."),
    )

    reply = await engine.respond(inbound("weather in Oslo?"))

    # The stand-in refuses a round whose thinking blocks changed: the answer proves the replay.
    assert reply.text == "It rains in Oslo."
    (call_row,) = [
        row for row in runtime.stores.messages.rows_after(reply.session_id or "", 0) if row.tool_calls
    ]
    assert isinstance(call_row.provider_blocks, dict)
    assert call_row.provider_blocks["blocks"][0] == redacted
    answered = turn_bodies(fake_anthropic)[-1]
    assert [block["type"] for block in tool_round(answered)] == ["redacted_thinking", "tool_use"]
    assert tool_round(answered)[0] == redacted


async def test_breakpoints_and_the_billed_cache_show_in_context(
    runtimes: RuntimeFactory, tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    runtime = anthropic_runtime(runtimes, tmp_path, fake_anthropic)
    engine = runtime.engine
    fake_anthropic.script(Answer(tool_calls=[("weather", {"city": "Oslo"})]), "It rains.", "Yes.")

    await engine.respond(inbound("weather in Oslo?"))
    await engine.respond(inbound("really?"))
    context = await engine.respond(inbound("/context"))

    later = turn_bodies(fake_anthropic)[-1]
    marked = [
        block
        for block in [
            *later["tools"],
            *later["system"],
            *(b for m in later["messages"] for b in m["content"]),
        ]
        if "cache_control" in block
    ]
    assert 2 <= len(marked) <= 4
    assert "cache_control" in later["tools"][-1] and "cache_control" in later["system"][0]
    usage = [request.usage for request in fake_anthropic.requests if request.json.get("tools")][-1]
    assert usage is not None and usage["cache_read_input_tokens"] > 0
    billed = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    read, written = usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]
    assert (
        f"Last turn: reused {read:,} of {billed:,} prompt tokens ({read / billed:.0%}) from the server's "
        f"prompt cache; evaluated {usage['input_tokens'] + written:,}, {written:,} of them written to the "
        "prompt cache." in context.text
    )


async def test_an_overloaded_anthropic_round_is_answered_by_the_openai_fallback_once(
    runtimes: RuntimeFactory, tmp_path: Path, fake_anthropic: FakeAnthropic, fake_openai: FakeOpenAI
) -> None:
    runtime = anthropic_runtime(
        runtimes,
        tmp_path,
        fake_anthropic,
        model_fallbacks=[{"base_url": fake_openai.base_url, "name": "spare-model"}],
    )
    engine = runtime.engine
    await engine.respond(inbound("/think low"))
    fake_anthropic.script(
        Answer(thinking="Ask the tool.", tool_calls=[("weather", {"city": "Oslo"})]),
        overloaded(),
        Answer(thinking="Nothing to look up.", text="You are welcome."),
    )
    fake_openai.script("It rains in Oslo.")

    answered = await engine.respond(inbound("weather in Oslo?"))
    thanked = await engine.respond(inbound("thanks"))

    assert (answered.text, thanked.text) == ("It rains in Oslo.", "You are welcome.")
    (spare,) = [request.json for request in fake_openai.requests]
    assert spare["model"] == "spare-model"
    # The fallback reads the round as calls and results; Anthropic's own blocks stay out.
    assert all(PROVIDER_BLOCKS_KEY not in message for message in spare["messages"])
    assert any(message.get("tool_calls") for message in spare["messages"])
    models = [runtime.stores.messages.get_message(reply.message_id or 0) for reply in (answered, thanked)]
    assert [message.model for message in models if message is not None] == ["spare-model", "claude-test"]
    # Back on Anthropic the next turn sends the signed round again, thinking on.
    later = turn_bodies(fake_anthropic)[-1]
    assert later["thinking"]["type"] == "enabled"
    assert tool_round(later)[0]["type"] == "thinking"


async def test_every_request_the_runtime_builds_goes_through_the_installed_sdk(
    runtimes: RuntimeFactory, tmp_path: Path, fake_anthropic: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    # A persona with a temperature (the shipped captain), its turns with thinking off and on,
    # a summary and a memory distillation (temperature 0): each through the SDK's real create().
    runtime = anthropic_runtime(runtimes, tmp_path, fake_anthropic, context_keep_recent_messages=2)
    engine = runtime.engine
    await engine.respond(inbound("/persona captain"))
    caplog.set_level(logging.WARNING, logger="bot.providers.anthropic")

    replies = [await engine.respond(inbound(f"question {n}")) for n in range(3)]
    await engine.respond(inbound("/think high"))
    thought = await engine.respond(inbound("think about it"))
    compacted = await engine.respond(inbound("/compact"))
    distiller = ModelDistiller(runtime.engine.provider, "claude-test", runtime.context.assembler.windows)
    await distiller.distill([SourceBlock(seq=1, speaker=None, text="I keep bees in Oslo.")], 5)
    status = await engine.respond(inbound("/status"))

    assert [reply.text for reply in replies] == [f"reply to: question {n}" for n in range(3)]
    assert thought.text == "reply to: think about it"
    assert compacted.text.startswith("Compacted messages"), compacted.text
    bodies = [request.json for request in fake_anthropic.requests]
    assert any(body.get("thinking") for body in bodies)
    assert any("I keep bees in Oslo." in json.dumps(body["messages"]) for body in bodies)
    # anthropic 2.17's create() takes no temperature: every request went without it.
    assert not [body for body in bodies if "temperature" in body or "top_p" in body]
    said = [record for record in caplog.records if "takes no 'temperature'" in record.getMessage()]
    assert len(said) == 1
    assert "Left out: Captain Reed's temperature (the model's client cannot send it)" in status.text


async def test_a_refused_key_reads_as_sentences_and_says_where_the_key_is_set(
    runtimes: RuntimeFactory, tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.accepted_key = "sk-ant-the-right-one"
    runtime = anthropic_runtime(runtimes, tmp_path, fake_anthropic)

    reply = await runtime.engine.respond(inbound("hello"))

    assert reply.kind == "error"
    assert reply.text == (
        "The model provider refused the request (HTTP 401): invalid x-api-key. "
        "Check the model's API key: it is set as model.api_key in config.yaml (the key, or "
        "${NAME} to read environment variable NAME) or as CHORUS_MODEL_API_KEY. Your message is saved."
    )


def without_breakpoints(value: Any) -> Any:
    """`value` without `cache_control` marks: where they sit is no part of the prompt's bytes."""
    if isinstance(value, dict):
        return {key: without_breakpoints(item) for key, item in value.items() if key != "cache_control"}
    if isinstance(value, list):
        return [without_breakpoints(item) for item in value]
    return value


async def test_a_summary_through_anthropic_starts_with_the_turns_request_and_asks_in_the_last_user_turn(
    runtimes: RuntimeFactory, tmp_path: Path, fake_anthropic: FakeAnthropic
) -> None:
    runtime = anthropic_runtime(runtimes, tmp_path, fake_anthropic, context_keep_recent_messages=2)
    for n in range(3):
        await runtime.engine.respond(inbound(f"question {n}"))
    compacted = await runtime.engine.respond(inbound("/compact"))
    assert compacted.text.startswith("Compacted messages"), compacted.text

    bodies = [request.json for request in fake_anthropic.requests]
    summary = next(body for body in bodies if SUMMARY_INSTRUCTIONS[:40] in json.dumps(body["messages"]))
    turn = bodies[bodies.index(summary) - 1]
    # One system prompt, the persona's; the same tools, which the model may not call.
    assert without_breakpoints(summary["system"]) == without_breakpoints(turn["system"])
    assert without_breakpoints(summary["tools"]) == without_breakpoints(turn["tools"])
    assert summary["tool_choice"] == {"type": "none"}
    # The turn's messages, its reply, then the instruction: turns alternate as the API requires.
    sent = without_breakpoints(turn["messages"])
    messages = without_breakpoints(summary["messages"])
    assert messages[: len(sent)] == sent
    assert messages[len(sent)] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "reply to: question 2"}],
    }
    assert len(messages) == len(sent) + 2 and messages[-1]["role"] == "user"
    assert messages[-1]["content"][0]["text"].startswith(SUMMARY_INSTRUCTIONS)
    roles = [message["role"] for message in messages]
    assert all(first != second for first, second in zip(roles, roles[1:], strict=False))
