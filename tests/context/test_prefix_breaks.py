"""A turn's request either starts with the conversation's previous one or breaks it, for a reason.

Through the engine on the fake server: a normal turn keeps the prefix, a /persona switch,
a changed tool list and a /snip break it, each counted and logged with its reason and the
part that changed first, and /context shows it beside what the server reused.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from bot.metrics import REGISTRY
from tests.context.helpers import runtime, say
from tests.fakes.openai_server import FakeOpenAI
from tests.support.failures import install_broken_tool
from tests.support.runtime import RuntimeFactory

UNKNOWN = "Prompt prefix: unknown (no two requests of this conversation since Chorus started)."


def breaks(reason: str) -> float:
    return REGISTRY.get_sample_value("chorus_prompt_prefix_breaks_total", {"reason": reason}) or 0.0


def reused(kind: str) -> float:
    return REGISTRY.get_sample_value("chorus_prompt_reuse_tokens_total", {"reuse": kind}) or 0.0


def prefix_line(context: str) -> str:
    return next(line for line in context.splitlines() if line.startswith("Prompt prefix:"))


async def test_normal_turns_keep_the_prefix_and_context_shows_what_the_server_reused(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai)
    before = {reason: breaks(reason) for reason in ("unexpected", "window", "tools")}
    reused_before = reused("reused")

    await say(rt, "hi")
    assert prefix_line(await say(rt, "/context")) == UNKNOWN
    with caplog.at_level(logging.INFO, logger="bot.turns.prefixes"):
        await say(rt, "how are you?")
        await say(rt, "and tomorrow?")
    context = await say(rt, "/context")

    assert prefix_line(context) == (
        "Prompt prefix: the newest request kept the previous one's; 2 compared since Chorus started, "
        "no breaks."
    )
    assert {reason: breaks(reason) for reason in before} == before
    assert not [record for record in caplog.records if "prefix broke" in record.getMessage()]
    usage = fake_openai.requests[-1].json
    assert usage["stream_options"] == {"include_usage": True}
    line = next(line for line in context.splitlines() if line.startswith("Last turn:"))
    assert line.startswith("Last turn: reused ") and "evaluated" in line and "unknown" not in line
    assert reused("reused") > reused_before


async def test_a_persona_switch_breaks_the_prefix_and_is_counted_as_such(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai)
    before = breaks("persona")
    await say(rt, "hi")
    await say(rt, "/persona sage")

    with caplog.at_level(logging.INFO, logger="bot.turns.prefixes"):
        await say(rt, "who are you now?")
    context = await say(rt, "/context")

    assert breaks("persona") == before + 1
    (logged,) = [record for record in caplog.records if "prefix broke" in record.getMessage()]
    assert logged.levelno == logging.INFO
    assert "at the system prompt (persona)" in logged.getMessage()
    assert prefix_line(context) == (
        "Prompt prefix: the newest request broke it at the system prompt (persona); "
        "1 compared since Chorus started, breaks: persona 1."
    )


async def test_a_changed_tool_list_breaks_the_prefix_at_the_tools(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai)
    before = breaks("tools")
    await say(rt, "hi")
    install_broken_tool(rt, "lookup")

    with caplog.at_level(logging.INFO, logger="bot.turns.prefixes"):
        await say(rt, "look something up")
    context = await say(rt, "/context")

    assert "lookup" in {tool["function"]["name"] for tool in fake_openai.requests[-1].json["tools"]}
    assert breaks("tools") == before + 1
    assert any("at the tool list (tools)" in record.getMessage() for record in caplog.records)
    assert "breaks: tools 1." in prefix_line(context)


async def test_a_snip_breaks_the_prefix_at_the_first_message_it_left_out(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai)
    before = breaks("snip")
    await say(rt, "first")
    await say(rt, "second")
    await say(rt, "/snip 1-2")

    await say(rt, "third")
    context = await say(rt, "/context")

    assert breaks("snip") == before + 1
    assert prefix_line(context).startswith(
        "Prompt prefix: the newest request broke it at message 1 after the system prompt (snip);"
    )


async def test_a_server_silent_on_its_cache_shows_the_reuse_as_unknown(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.usage_shape = "bare"
    rt = runtime(runtimes, tmp_path, fake_openai)
    unknown_before = reused("unknown")

    await say(rt, "hi")
    await say(rt, "hi again")
    context = await say(rt, "/context")

    assert "reused: unknown (the server did not say)." in context
    assert "reused 0 of" not in context
    assert reused("unknown") > unknown_before


async def test_a_model_change_and_a_compaction_are_counted_as_such(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    models = [{"name": "deep", "model": "deep-model"}]
    rt = runtime(runtimes, tmp_path, fake_openai, models=models, context_keep_recent_messages=2)
    before = {reason: breaks(reason) for reason in ("model", "compact")}
    for text in ("one", "two", "three"):
        await say(rt, text)

    await say(rt, "/model deep")
    await say(rt, "four")
    assert fake_openai.requests[-1].json["model"] == "deep-model"
    assert "broke it at" in prefix_line(await say(rt, "/context")) and breaks("model") == before["model"] + 1
    assert "Compacted messages" in await say(rt, "/compact")
    await say(rt, "five")

    assert breaks("compact") == before["compact"] + 1
    assert prefix_line(await say(rt, "/context")).endswith("breaks: compact 1, model 1.")


async def test_a_window_that_moves_on_is_counted_as_a_window_step(
    runtimes: RuntimeFactory, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    # No compaction: once the window is full, each turn drops the oldest message.
    rt = runtime(runtimes, tmp_path, fake_openai, context_compact_dropped_messages=1000)
    before = {reason: breaks(reason) for reason in ("window", "unexpected")}
    turns = 0
    while breaks("window") == before["window"]:
        assert turns < 30, "the window never moved"
        await say(rt, f"message number {turns}")
        turns += 1

    assert breaks("unexpected") == before["unexpected"]
    assert prefix_line(await say(rt, "/context")).startswith(
        "Prompt prefix: the newest request broke it at message 1 after the system prompt (window);"
    )
