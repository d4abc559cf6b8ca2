"""After-turn requests through the engine: each starts with the turn's own request, byte for byte.

The local OpenAI-compatible stand-in records every request. A summary or a memory
distillation that follows a turn must begin with that turn's last request — its
messages and its tools unchanged — then the reply, then one user message with the
instruction, and ask for text (`tool_choice` "none"): the server's cache serves the
conversation instead of being evicted by a prompt of the summariser's own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bot.memory.distill import MEMORY_PURPOSE, MODEL_INSTRUCTIONS
from bot.providers.openai import PURPOSE_HEADER
from bot.storage.owners import Owner
from tests.context.helpers import runtime, say, session_of
from tests.fakes.openai_server import (
    FakeOpenAI,
    HttpError,
    RecordedRequest,
    ToolCalls,
    context_overflow,
    echo_reply,
)
from tests.tools.test_turn_rounds import add_tools, echo_tool
from transcript.compaction import SUMMARY_INSTRUCTIONS


def purpose(request: RecordedRequest) -> str | None:
    return request.headers.get(PURPOSE_HEADER.lower())


def as_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, sort_keys=True).encode()


def after_turn_pairs(server: FakeOpenAI, wanted: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Each request for `wanted` with the conversation request the server served before it."""
    pairs = []
    turn: dict[str, Any] | None = None
    for request in server.requests:
        if not request.json or "messages" not in request.json:
            continue
        if purpose(request) is None:
            turn = request.json
        elif purpose(request) == wanted:
            assert turn is not None, "an after-turn request came before any turn"
            pairs.append((turn, request.json))
    return pairs


def assert_starts_with_the_turn(turn: dict[str, Any], after: dict[str, Any], instructions: str) -> None:
    sent = turn["messages"]
    messages = after["messages"]
    assert as_bytes(messages[: len(sent)]) == as_bytes(sent)
    # Then the turn's reply (what the server generated after that prompt) ...
    reply = messages[len(sent)]
    assert reply["role"] == "assistant" and reply["content"] == echo_reply(turn)
    # ... and the instruction, one user message, last.
    assert len(messages) == len(sent) + 2
    assert messages[-1]["role"] == "user" and messages[-1]["content"].startswith(instructions)
    assert [m["role"] for m in messages].count("system") == 1
    # The same tools, so the prefix the server renders them into is the same; text only.
    assert turn.get("tools") and as_bytes(after.get("tools")) == as_bytes(turn["tools"])
    assert after.get("tool_choice") == "none"


def distilled(body: dict[str, Any]) -> str:
    if body["messages"][-1]["content"].startswith(MODEL_INSTRUCTIONS.splitlines()[0]):
        return json.dumps({"items": [{"kind": "fact", "content": "Alice likes ferries.", "importance": 5}]})
    return echo_reply(body)


# Who asks decides which tools a turn offers (the public fewer): the rebuilt request offers the same.
@pytest.mark.parametrize("strangers", ["members", "public"])
async def test_each_memory_distillation_starts_with_the_request_of_the_turn_before_it(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI, strangers: str
) -> None:
    fake_openai.default = distilled
    rt = runtime(
        runtimes,
        tmp_path,
        fake_openai,
        channels_web_access_strangers=strangers,
        memory_enabled=True,
        memory_turns_threshold=1,
        memory_idle_seconds=0,
        memory_dedup_threshold=1.0,
    )
    add_tools(rt, echo_tool([]))
    await say(rt, "I take the ferry to work every morning.")
    # A turn that calls a tool: its last request holds the exchange, and so does the prefix.
    fake_openai.script(ToolCalls([("echo", {"word": "ferry"})]))
    await say(rt, "Say ferry loudly, please.")
    await say(rt, "The ferry leaves at seven.")

    pairs = after_turn_pairs(fake_openai, MEMORY_PURPOSE)
    assert len(pairs) == 3
    for turn, distillation in pairs:
        assert_starts_with_the_turn(turn, distillation, MODEL_INSTRUCTIONS.splitlines()[0])
    tool_turn = pairs[1][0]["messages"]
    assert any(message["role"] == "tool" for message in tool_turn)


async def test_a_summary_starts_with_the_request_of_the_turn_before_it(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    rt = runtime(runtimes, tmp_path, fake_openai, context_compact_dropped_messages=2)
    add_tools(rt, echo_tool([]))
    for turn in range(1, 13):
        await say(rt, f"note {turn}")

    pairs = after_turn_pairs(fake_openai, "summary")
    assert pairs, "no summary was asked for"
    for turn, summary in pairs:
        assert_starts_with_the_turn(turn, summary, SUMMARY_INSTRUCTIONS)
    # The summary folds in what left the window, listed in the instruction.
    assert "#1 Alice (user): note 1" in pairs[0][1]["messages"][-1]["content"]


async def test_a_prefix_the_server_refuses_as_too_large_is_dropped_and_the_instruction_goes_alone(
    runtimes, tmp_path: Path, fake_openai: FakeOpenAI
) -> None:
    def refuse_with_prefix(body: dict[str, Any]) -> str | HttpError:
        return context_overflow() if len(body["messages"]) > 1 else distilled(body)

    def default(body: dict[str, Any]) -> str | HttpError:
        if body["messages"][-1]["content"].startswith(MODEL_INSTRUCTIONS.splitlines()[0]):
            return refuse_with_prefix(body)
        return echo_reply(body)

    fake_openai.default = default
    fake_openai.summary = lambda body: context_overflow() if len(body["messages"]) > 1 else "kept summary"
    rt = runtime(
        runtimes,
        tmp_path,
        fake_openai,
        context_compact_dropped_messages=2,
        memory_enabled=True,
        memory_turns_threshold=11,
        memory_idle_seconds=0,
    )
    for turn in range(1, 13):
        await say(rt, f"note {turn}")

    session = session_of(rt)
    assert rt.context is not None
    summary = rt.context.records.latest_summary(session.id)
    assert summary is not None and summary.text == "kept summary"
    assert rt.memory is not None
    items = rt.stores.memory.all_items(Owner.of(session))
    assert [item.content for item in items] == ["Alice likes ferries."]
    for wanted in ("summary", MEMORY_PURPOSE):
        asked = [len(r.json["messages"]) for r in fake_openai.requests if r.json and purpose(r) == wanted]
        # Each refused request with the prefix was asked again with the instruction alone.
        assert asked and asked[-1] == 1 and any(count > 1 for count in asked)
